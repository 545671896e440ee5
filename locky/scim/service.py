"""Locky's steps in ``scim2-server``'s protocol (:class:`~scim2_server.service.ScimService`).

- Authorization: every operation on ``/Users`` and ``/Groups`` asks Locky's authorizer,
  as ``/v1`` does (``context.require``): policy resource ``scim``, action ``read``
  (GET, searches) or ``write`` (POST, PUT, PATCH, DELETE). Admins hold it
  (``p, admin, *, *, *``); a machine client (subject ``client:<client_id>``) holds it
  through the built-in role ``provisioner`` (``locky grant-role client:ID provisioner``).
  The discovery endpoints need no credentials (RFC 7644 section 4: they describe the
  service, nothing of its data).
- Bodies: ``scim2-server`` reads JSON (``application/scim+json`` or
  ``application/json``) into the models with SCIM errors (``invalidSyntax``,
  ``invalidValue``), which Locky's field-map reader (:func:`locky.http.media.read_json`,
  JSON only) cannot give; the size limit is Locky's (``LOCKY_MAX_BODY_BYTES``: 413),
  and text no database stores (NUL, unpaired surrogates) is refused here, as
  :data:`locky.http.media.UNSTORABLE` refuses it on ``/v1``.
- Defaults of a User body (:mod:`locky.scim.discovery` declares ``displayName`` and
  ``active`` required, as every Locky account has both): a creation without
  ``displayName`` is named after its ``userName``, and one without ``active`` is
  active. A PUT without ``active`` keeps the account's status (:func:`keep_status`:
  leaving it out must neither enable a deprovisioned account nor be refused, as many
  provisioning systems push profiles without it; the status is the one the write finds,
  not one read before); a PUT without ``displayName`` is a 400.
- PATCH answers 200 with the resource (RFC 7644 lets it answer 204; Locky's contract
  asks for the resource).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Union

from scim2_models import (
    BulkRequest, BulkResponse, Context, ForbiddenException, InvalidValueException, ListResponse, PatchOp,
    ResponseParameters, SearchRequest,
)
from scim2_server.routing import Operation
from scim2_server.service import ScimService
from scim2_server.utils import parametrize

from locky.http.media import UNSTORABLE_TEXT, holds_unstorable

READS = frozenset({Operation.query, Operation.search, Operation.search_with_body})


class LockyScimService(ScimService):
    """The protocol with Locky's authorization, body checks and PATCH answer."""

    def __init__(self, provider, context):
        super().__init__(provider)
        self.context = context
        self.generic_models = generic_models(self.get_models())

    def authorize(self, request, target, resource_type) -> None:
        action = "read" if target.operation in READS else "write"
        if not self.context.allowed(request.subject, "scim", action):
            raise ForbiddenException(detail=f"The policy does not allow scim {action} to this caller.")

    def _check_text(self, body: bytes) -> None:
        try:
            data = json.loads(body) if body else None
        except (ValueError, RecursionError):
            return  # the library answers invalidSyntax
        if holds_unstorable(data):
            raise InvalidValueException(detail=UNSTORABLE_TEXT)

    def read_body(self, model, body, content_type, scim_ctx):
        self._check_text(body)
        if scim_ctx == Context.RESOURCE_CREATION_REQUEST and getattr(model, "__name__", "") == "User":
            body = _user_defaults(body)
        return super().read_body(model, body, content_type, scim_ctx)

    def decode_body(self, body, content_type):
        self._check_text(body)
        return super().decode_body(body, content_type)

    def publish(self, base_url, resource):
        """The library's :meth:`~scim2_server.service.ScimService.publish` (the location
        in ``meta``, references as URLs, no version without ETags) done on ``resource``
        itself instead of a deep copy of it. The library copies because a storage may
        keep the resources it hands out; Locky's builds each one for the request
        (:mod:`locky.scim.mapping`) and never sees it again. The copies were a fifth of
        the CPU of a page of users. Publishing twice gives the same resource: a
        reference that is already a URL is kept."""
        assert resource.meta is not None and resource.id is not None
        update = {"location": self.resource_location(base_url, self.get_resource_type_of(resource), resource.id)}
        if not self.etag_supported:
            update["version"] = None
        resource.meta = resource.meta.model_copy(update=update)
        self._publish_references(base_url, resource)
        return resource

    def search_response(self, base_url, resource_types, page, search_request):
        """The library's list response, less a round trip: it dumps each resource (with
        the request's ``attributes``), validates the dumps back into models for the
        ``ListResponse`` and dumps them again, two fifths of a page's CPU. Here the
        envelope is the library's, made for the page without its resources (totals,
        cursors and all), and the resources are its first dumps, as the second gave
        them back (``tests/scim/test_scim_pages.py`` compares the two bodies)."""
        dumped = [self.publish(base_url, resource).model_dump(
            scim_ctx=Context.RESOURCE_QUERY_RESPONSE, response_parameters=search_request)
            for resource in page.resources]
        response = super().search_response(base_url, resource_types, replace(page, resources=[]), search_request)
        if dumped:  # an empty page's envelope is the library's answer as it is
            response.body["itemsPerPage"] = len(dumped)
            response.body["Resources"] = dumped
        return response

    def patch_response(self, base_url, resource, response_parameters):
        return self.resource_response(self.publish(base_url, resource), Context.RESOURCE_REPLACEMENT_RESPONSE,
                                      response_parameters)


def generic_models(models: list) -> list:
    """The generic models the library parametrizes with the resource models on every
    request (``ResponseParameters[User]``, ``ListResponse[Union[User, Group]]`` ...),
    made once, for the service to keep. pydantic keeps a parametrized model in a weak
    cache: once the garbage collector had freed the one a request made, the next request
    built it again, 3-6 ms of CPU each time (most single reads and pages, under load)."""
    union = Union[tuple(models)]  # noqa: UP007 (as the library writes it)
    kept = [parametrize(generic, union) for generic in (ListResponse, SearchRequest, BulkRequest, BulkResponse)]
    kept += [parametrize(generic, model) for generic in (ResponseParameters, SearchRequest, PatchOp)
             for model in models]
    return kept


def _json_object(body: bytes) -> dict | None:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def keep_status(context, request) -> bool:
    """Whether ``request`` is a ``PUT /Users/{id}`` whose body has no ``active``: that
    body is then given the user's stored status, which the schema asks for, and the
    write leaves the status as it finds it (``LockyScimStorage(keeps_status=True)``), so
    an account turned off meanwhile stays off. Called before the handler validates the
    body; a body that is no JSON object, or a user that does not exist, is left to the
    handler."""
    parts = request.path.strip("/").split("/")
    if request.method.upper() != "PUT" or len(parts) != 2 or parts[0].lower() != "users":
        return False
    data = _json_object(request.body)
    if data is None or any(isinstance(key, str) and key.lower() == "active" for key in data):
        return False
    user = context.storage.users.get_by_uuid(parts[1])
    if user is None:
        return False
    data["active"] = not user.disabled
    request.body = json.dumps(data).encode()
    return True


def _user_defaults(body: bytes) -> bytes:
    """A new User's body with ``active`` true when it has none, and ``displayName`` =
    ``userName`` when it has none (attribute names are case-insensitive). A body that
    is no JSON object is left to the library's errors."""
    data = _json_object(body)
    if data is None:
        return body
    names = {key.lower() for key in data if isinstance(key, str)}
    if "active" not in names:
        data["active"] = True
    if "displayname" not in names:
        user_name = next((v for k, v in data.items() if isinstance(k, str) and k.lower() == "username"), None)
        if isinstance(user_name, str):
            data["displayName"] = user_name
    return json.dumps(data).encode()
