"""What the SCIM service says about itself: ``/ServiceProviderConfig``,
``/ResourceTypes`` and ``/Schemas`` (RFC 7643 sections 5-7), as one
:class:`~scim2_models.ScimProvider`.

The schemas are RFC 7643's User and Group cut down to the attributes Locky keeps, so a
client (or a compliance tester) that fills every writable attribute gets back what it
wrote. Mutabilities are Locky's:

- ``userName`` is the email address (unique among live users whatever the case: 409
  ``uniqueness``); it must be a valid address (400 ``invalidValue`` otherwise).
- ``displayName`` is the user's name and is the attribute a client writes;
  ``name.formatted`` shows the same name and is ``readOnly`` (two writable copies of
  one stored value could not both keep what a client wrote). Locky's users always
  have a name, so it is ``required``: a creation without it names the user after
  its ``userName`` (:mod:`locky.scim.service`); a PUT without it is a 400.
- ``emails`` is ``readOnly``: the one address, ``userName``, as the primary email.
- ``active`` is ``not disabled``, and ``required`` since every account is one or the
  other: a creation without it is active, a PUT without it keeps the account's status
  (:mod:`locky.scim.service`), and a PATCH cannot remove it.
- ``password`` is ``writeOnly`` (never returned).
- ``groups`` on a user is ``readOnly``: the groups the user is a member of.
- A Group's ``displayName`` is its name, unique and compared exactly as Locky compares
  group names ("Admins" and "admins" are two groups): ``caseExact`` true, so a filter
  ``displayName eq`` matches the exact name (and storage answers it).
- A Group's ``members`` hold users only (``type`` ``User``); ``display`` is not kept.

What identity providers send beyond these is ignored, not refused (:data:`POLICY`):
their default mappings carry ``name.givenName``, ``phoneNumbers``, the enterprise
extension, members' ``display``; a PATCH on such an attribute changes nothing. PATCH
takes Microsoft Entra's forms too: ``remove`` with a ``value`` selecting what to
remove, and an ``add``/``replace`` whose path filter matches nothing adds the entry.

No bulk (``/Bulk`` answers 404: no such resource). Filtering, sorting and ETags are supported; see
:mod:`locky.scim.filters` for the cap on filters that need a scan.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from scim2_models import ResourceType, Schema, ScimPolicy, ScimProvider, ServiceProviderConfig
from scim2_server.utils import load_json_resource

USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
#: The most resources one search answers (``count`` beyond it is lowered to it).
MAX_RESULTS = 200
DOCUMENTATION = "https://github.com/locky/locky/blob/main/docs/http/scim.md"

#: attribute name → (mutability, {sub-attribute: mutability} or None: keep them all)
USER_ATTRIBUTES: dict[str, tuple[str, Any]] = {
    "userName": ("readWrite", None),
    "name": ("readOnly", {"formatted": "readOnly"}),
    "displayName": ("readWrite", None),
    "active": ("readWrite", None),
    "password": ("writeOnly", None),
    "emails": ("readOnly", {"value": "readOnly", "primary": "readOnly"}),
    "groups": ("readOnly", {"value": "readOnly", "$ref": "readOnly", "display": "readOnly"}),
}
#: How much the requests read may depart from the RFCs (see the module docstring).
POLICY = ScimPolicy(unknown=ScimPolicy.Unknown.ignore,
                    remove_value_as_filter=ScimPolicy.RemoveValue.apply,
                    unmatched_path_filter=ScimPolicy.UnmatchedPathFilter.create)

#: Attributes RFC 7643 leaves optional that every Locky user has (see the module docstring).
REQUIRED = frozenset({"displayName", "active"})
GROUP_ATTRIBUTES: dict[str, tuple[str, Any]] = {
    "displayName": ("readWrite", None),
    "members": ("readWrite", {"value": "immutable", "$ref": "immutable", "type": "immutable"}),
}


def _cut(schema: dict, keep: dict[str, tuple[str, Any]]) -> dict:
    """``schema`` (RFC 7643's JSON) with only the attributes in ``keep``, each with its
    mutability, and only the listed sub-attributes."""
    schema = copy.deepcopy(schema)
    attributes = []
    for attribute in schema["attributes"]:
        if attribute["name"] not in keep:
            continue
        mutability, subs = keep[attribute["name"]]
        attribute["mutability"] = mutability
        if attribute["name"] in REQUIRED:
            attribute["required"] = True
        if schema["id"] == GROUP_SCHEMA and attribute["name"] == "displayName":
            attribute["caseExact"] = True
        if subs is not None:
            kept = []
            for sub in attribute.get("subAttributes", []):
                if sub["name"] in subs:
                    sub["mutability"] = subs[sub["name"]]
                    if sub["name"] == "$ref" and attribute["name"] == "members":
                        sub["referenceTypes"] = ["User"]
                    if sub["name"] == "type" and attribute["name"] == "members":
                        sub["canonicalValues"] = ["User"]
                    kept.append(sub)
            attribute["subAttributes"] = kept
        attributes.append(attribute)
    schema["attributes"] = attributes
    return schema


def schemas() -> list[Schema]:
    """The User and Group schemas as Locky keeps them."""
    defaults = {s["id"]: s for s in load_json_resource("default-schemas.json")}
    return [Schema.model_validate(_cut(defaults[USER_SCHEMA], USER_ATTRIBUTES)),
            Schema.model_validate(_cut(defaults[GROUP_SCHEMA], GROUP_ATTRIBUTES))]


def resource_types() -> list[ResourceType]:
    return [
        ResourceType.model_validate({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"], "id": "User", "name": "User",
            "endpoint": "/Users", "description": "A Locky user account", "schema": USER_SCHEMA}),
        ResourceType.model_validate({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"], "id": "Group", "name": "Group",
            "endpoint": "/Groups", "description": "A Locky group; its members are memberships",
            "schema": GROUP_SCHEMA}),
    ]


def config() -> ServiceProviderConfig:
    return ServiceProviderConfig.model_validate({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
        "documentationUri": DOCUMENTATION,
        "patch": {"supported": True},
        "bulk": {"supported": False, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": True, "maxResults": MAX_RESULTS},
        "changePassword": {"supported": True},
        "sort": {"supported": True},
        "etag": {"supported": True},
        "authenticationSchemes": [{
            "type": "oauthbearertoken", "name": "OAuth Bearer Token", "primary": True,
            "description": "A Locky access token of an admin, or a client_credentials token of a machine"
                           " client whose role allows scim read and write (docs/http/scim.md).",
        }],
    })


@lru_cache(maxsize=1)
def provider() -> ScimProvider:
    """The one description of the service (immutable, so built once per process)."""
    return ScimProvider.from_discovery(schemas(), resource_types(), config=config(), policy=POLICY)
