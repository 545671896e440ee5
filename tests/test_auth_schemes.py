"""A new authentication scheme from a plugin (docs/plugins.md, "Authentication schemes"):
HTTP Basic beside Locky's bearer tokens, built from the public API only.

The scheme's ``locky_authenticate`` returns an identity for good credentials and
raises ``Unauthorized`` with its own challenge for bad ones (401, ``WWW-Authenticate:
Basic realm="locky"``, the contract's ``{"title", "description"}`` body); its
``locky_swagger`` adds a security definition that every protected operation then lists
beside Bearer; its middleware offers the challenge on every other 401 too. Bearer tokens
keep working unchanged."""

from __future__ import annotations

import base64
import binascii
import pickle

import pytest

from locky import Identity, Unauthorized, hookimpl
from locky.testing import PASSWORD

ME = "/v1/internal/users/me"
CHALLENGE = 'Basic realm="locky"'


class BasicAuth:
    """The example plugin: ``Authorization: Basic base64(email:password)``.

    A production scheme would also count failures in ``context.storage.throttle`` as
    the login does; this one shows the seams only."""

    @hookimpl
    def locky_authenticate(self, req, context):
        scheme, _, credential = (req.get_header("Authorization") or "").strip().partition(" ")
        if scheme.lower() != "basic":
            return None  # not ours: a bearer token, or no credential at all
        try:
            email, colon, password = base64.b64decode(credential.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise Unauthorized("The Basic credential is malformed.", challenge=CHALLENGE) from None
        user = context.storage.users.get_by_email(email.strip().lower()) if colon else None
        if user is None or user.disabled or not context.password_hasher.verify(password, user.password_hash):
            raise Unauthorized("Wrong email or password.", challenge=CHALLENGE)
        return Identity(user=user, session_uuid=None, scheme="basic")

    @hookimpl
    def locky_swagger(self, spec, context):
        spec.components.security_scheme("Basic", {"type": "basic", "description": "Email and password."})

    @hookimpl
    def locky_middleware(self, context):
        return [OfferBasic()]


class OfferBasic:
    """Adds the Basic challenge to the 401s of other schemes (no credential, a bad token),
    so that a client that only speaks Basic learns it may use it."""

    def process_response(self, req, resp, resource, req_succeeded):
        if resp.status_code == 401 and CHALLENGE not in (resp.get_header("WWW-Authenticate") or ""):
            resp.append_header("WWW-Authenticate", CHALLENGE)


def basic(email: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{email}:{password}".encode()).decode()}


@pytest.fixture
def locky_plugins():
    return [BasicAuth()]


def test_good_basic_credentials_authenticate(locky_client, locky_user):
    result = locky_client.simulate_get(ME, headers=basic(locky_user.email, PASSWORD))
    assert result.status_code == 200, result.text
    assert result.json["uuid"] == locky_user.uuid


def test_basic_callers_are_subject_to_the_policy(locky_client, locky_user):
    group = locky_client.simulate_post("/v1/private/groups", json={"name": "basic-made"},
                                       headers=basic(locky_user.email, PASSWORD))
    assert group.status_code == 201, group.text
    roles = locky_client.simulate_post("/v1/private/roles", json={"name": "nope"},
                                       headers=basic(locky_user.email, PASSWORD))
    assert roles.status_code == 403, roles.text


@pytest.mark.parametrize("header", [
    "wrong password",
    "unknown email",
    "no colon",
    "not base64",
])
def test_bad_basic_credentials_get_the_schemes_challenge(locky_client, locky_user, header):
    headers = {
        "wrong password": basic(locky_user.email, "not the password"),
        "unknown email": basic("nobody@example.com", PASSWORD),
        "no colon": {"Authorization": "Basic " + base64.b64encode(locky_user.email.encode()).decode()},
        "not base64": {"Authorization": "Basic %%%"},
    }[header]
    result = locky_client.simulate_get(ME, headers=headers)
    assert result.status_code == 401
    assert result.headers["WWW-Authenticate"] == CHALLENGE
    body = result.json
    assert set(body) == {"title", "description"} and all(isinstance(v, str) for v in body.values())
    assert body["title"] == "401 Unauthorized"
    assert PASSWORD not in result.text


def test_bearer_still_works_and_its_401s_offer_both_schemes(locky_client, locky_user):
    assert locky_client.simulate_get(ME, headers=locky_user.headers).status_code == 200
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        result = locky_client.simulate_get(ME, headers=headers)
        assert result.status_code == 401
        assert result.headers["WWW-Authenticate"] == f"Bearer, {CHALLENGE}"


def test_the_swagger_document_lists_the_scheme_on_every_protected_operation(locky_client):
    doc = locky_client.simulate_get("/swagger/doc.json").json
    assert doc["securityDefinitions"]["Basic"] == {"type": "basic", "description": "Email and password."}
    assert list(doc["securityDefinitions"]) == ["Bearer", "Basic"]
    protected = public = 0
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            if path.startswith(("/public/", "/../.well-known/")):
                public += 1
                assert not operation.get("security"), (path, method)
            else:
                protected += 1
                assert operation["security"] == [{"Bearer": []}, {"Basic": []}], (path, method)
    assert protected > 20 and public > 3


def test_the_swagger_document_stays_valid(locky_client):
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation import OpenAPIV2SpecValidator

    validate(locky_client.simulate_get("/swagger/doc.json").json, cls=OpenAPIV2SpecValidator)


def test_without_the_plugin_the_document_and_challenge_are_bearer_only(locky_app_factory, locky_user):
    from falcon import testing

    client = testing.TestClient(locky_app_factory([]))
    doc = client.simulate_get("/swagger/doc.json").json
    assert list(doc["securityDefinitions"]) == ["Bearer"]
    assert doc["paths"]["/internal/users/me"]["get"]["security"] == [{"Bearer": []}]
    result = client.simulate_get(ME, headers=basic(locky_user.email, PASSWORD))
    assert result.status_code == 401 and result.headers["WWW-Authenticate"] == "Bearer"


def test_unauthorized_keeps_its_challenges_across_processes():
    error = pickle.loads(pickle.dumps(Unauthorized("No.", challenge=["Bearer", CHALLENGE])))
    assert (error.description, error.challenges) == ("No.", ("Bearer", CHALLENGE))
    assert Unauthorized().challenges == ("Bearer",)
