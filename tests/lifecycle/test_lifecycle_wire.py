"""The wire rules of docs/http/README.md#bodies hold on the lifecycle routes too: another
content type is 415, a body that is not a JSON object is 400 ``{"body": ...}``, a method
the route does not serve is 405, all as JSON error objects; and every route is in the
Swagger document."""

from __future__ import annotations

import pytest

from authz_helpers import assert_error, assert_fields
from lifecycle_helpers import FORGOT, LOGIN_MFA, RESEND, RESET, TOTP, TOTP_CONFIRM, VERIFY

PUBLIC = [VERIFY, RESEND, FORGOT, RESET, LOGIN_MFA]
PRIVATE = [TOTP, TOTP_CONFIRM]


@pytest.mark.parametrize("path", PUBLIC)
def test_another_content_type_is_415(locky_client, path):
    result = locky_client.simulate_post(path, body="token=x", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_error(result, 415, "415 Unsupported Media Type")


@pytest.mark.parametrize("path", PUBLIC)
@pytest.mark.parametrize("body", ["[]", '"token"', "null", "{", "17"])
def test_a_body_that_is_no_json_object_is_400_body(locky_client, path, body):
    result = locky_client.simulate_post(path, body=body, headers={"Content-Type": "application/json"})
    assert_fields(result, "body")


@pytest.mark.parametrize("path", PUBLIC + [TOTP_CONFIRM])
def test_get_is_405(locky_client, locky_user, path):
    result = locky_client.simulate_get(path, headers=locky_user.headers)
    assert_error(result, 405, "405 Method Not Allowed")


def test_every_lifecycle_route_is_documented(locky_client):
    paths = locky_client.simulate_get("/swagger/doc.json").json["paths"]
    for path in PUBLIC + PRIVATE:
        documented = paths[path.removeprefix("/v1")]
        assert "post" in documented, path
        for status in documented["post"]["responses"]:
            assert status.isdigit()
    assert "delete" in paths[TOTP.removeprefix("/v1")]
    doc = locky_client.simulate_get("/swagger/doc.json").json
    for path in PUBLIC:
        assert not paths[path.removeprefix("/v1")]["post"].get("security"), path
    for path, method in [(p, "post") for p in PRIVATE] + [(TOTP, "delete")]:
        operation = paths[path.removeprefix("/v1")][method]
        assert operation.get("security", doc.get("security")) == [{"Bearer": []}], (path, method)
        assert "401" in operation["responses"], (path, method)
