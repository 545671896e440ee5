"""What the SCIM tests share: the schema URIs of RFC 7643/7644, a SCIM caller over
Falcon's test client (bearer token, ``application/scim+json`` bodies), the check of a
SCIM error answer, a machine client made as an operator makes one, and a real ``locky
serve`` with the operator's commands."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.error
import urllib.request
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote, urlencode

BASE = "/scim/v2"
SCIM_JSON = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
LIST = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
SEARCH = "urn:ietf:params:scim:api:messages:2.0:SearchRequest"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"
#: A password §11's rules accept for any of the tests' names and addresses.
PASSWORD = "Provisioned horse battery 7"


class Scim:
    """A SCIM caller: ``http`` is Falcon's test client, ``token`` its bearer token
    (``None``: no ``Authorization`` header)."""

    def __init__(self, http, token: str | None):
        self.http, self.token = http, token

    def call(self, method: str, path: str, body: Any = None, *, params: dict | None = None,
             content_type: str = SCIM_JSON, raw: str | bytes | None = None, headers: dict | None = None):
        sent = dict(headers or {})
        if self.token:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        if data is not None:
            sent.setdefault("Content-Type", content_type)
        query = urlencode(params, quote_via=quote) if params else None  # %20, never '+', in filters
        return self.http.simulate_request(method, BASE + path, body=data, query_string=query, headers=sent)

    def get(self, path: str, **params):
        return self.call("GET", path, params=params or None)

    def post(self, path: str, body: Any, **kwargs):
        return self.call("POST", path, body, **kwargs)

    def put(self, path: str, body: Any, **kwargs):
        return self.call("PUT", path, body, **kwargs)

    def patch(self, path: str, *operations: dict, **kwargs):
        return self.call("PATCH", path, {"schemas": [PATCH_OP], "Operations": list(operations)}, **kwargs)

    def delete(self, path: str, **kwargs):
        return self.call("DELETE", path, **kwargs)

    # -- shortcuts that must succeed -------------------------------------------------

    def user(self, user_name: str, display_name: str | None = None, **more: Any) -> dict:
        """``POST /Users``; the created resource (201)."""
        body = {"schemas": [USER], "userName": user_name, **more}
        if display_name is not None:
            body["displayName"] = display_name
        result = self.post("/Users", body)
        assert result.status_code == 201, result.text
        return result.json

    def group(self, display_name: str, members: list[str] = (), **more: Any) -> dict:
        """``POST /Groups`` with these users' ids as ``members``; the created resource."""
        body = {"schemas": [GROUP], "displayName": display_name, **more}
        if members:
            body["members"] = [{"value": member} for member in members]
        result = self.post("/Groups", body)
        assert result.status_code == 201, result.text
        return result.json

    def search(self, endpoint: str = "/Users", **params) -> dict:
        result = self.get(endpoint, **params)
        assert result.status_code == 200, result.text
        assert result.json["schemas"] == [LIST], result.json
        return result.json


def assert_scim_error(result, status: int, scim_type: str | None = None) -> dict:
    """``result`` is a SCIM error (RFC 7644 section 3.12): the status, the error schema,
    ``status`` as a string, the ``scimType`` when given, ``application/scim+json``."""
    assert result.status_code == status, (result.status_code, result.text)
    assert result.headers.get("content-type", "").startswith(SCIM_JSON), result.headers
    body = result.json
    assert body["schemas"] == [ERROR], body
    assert body["status"] == str(status), body
    if scim_type is not None:
        assert body.get("scimType") == scim_type, body
    return body


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def client_credentials_token(http, client_id: str, secret: str) -> str:
    """A machine client's access token from ``POST /oauth/token`` (client_secret_basic)."""
    result = http.simulate_post("/oauth/token", body="grant_type=client_credentials", headers={
        "Authorization": basic(client_id, secret), "Content-Type": "application/x-www-form-urlencoded"})
    assert result.status_code == 200, result.text
    return result.json["access_token"]


class ScimServer:
    """A running ``locky serve`` (``server``, :mod:`support.server`), the environment it
    runs with, and what its operator does: ``locky`` commands, machine clients, tokens."""

    def __init__(self, server, env: dict[str, str], workdir):
        self.server, self.env, self.workdir = server, env, workdir
        self.base_url = f"{server.url}{BASE}"

    def cli(self, *args: str) -> str:
        """``locky ARGS`` on the server's database, as the operator runs it."""
        done = subprocess.run([sys.executable, "-m", "locky.cli.main", *args], cwd=self.workdir, env=self.env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"locky {' '.join(args)}: {done.stderr}"
        return done.stdout

    def machine_client(self, name: str, role: str | None) -> dict:
        """``locky clients create NAME --grant client_credentials --json`` and, when
        ``role``, ``locky grant-role client:CLIENT_ID ROLE``."""
        client = json.loads(self.cli("clients", "create", name, "--grant", "client_credentials", "--json"))
        if role:
            self.cli("grant-role", f"client:{client['client_id']}", role)
        return client

    def token(self, client: dict) -> str:
        """A ``client_credentials`` access token from ``/oauth/token`` (client_secret_basic)."""
        request = urllib.request.Request(
            self.server.url + "/oauth/token", method="POST", data=b"grant_type=client_credentials",
            headers={"Authorization": basic(client["client_id"], client["client_secret"]),
                     "Content-Type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            body = json.loads(answer.read())
        assert body["token_type"] == "Bearer" and body["access_token"], body
        return body["access_token"]

    def call(self, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``(status, parsed body or None)`` of one SCIM request over HTTP."""
        request = urllib.request.Request(self.base_url + path, method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {token}", "Content-Type": SCIM_JSON})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                raw = answer.read()
                return answer.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, json.loads(raw) if raw else None


def run_cli(settings, *words: str) -> int:
    """``locky WORDS`` in this process, on ``settings``' database."""
    from locky.cli import main as cli

    namespace = cli._parser().parse_args(list(words))
    return cli.COMMANDS[namespace.command](settings, namespace)


def machine_client(http, admin, settings, name: str, role: str | None) -> SimpleNamespace:
    """A registered machine client (``role`` granted with ``locky grant-role``) and its token."""
    result = http.simulate_post("/v1/private/oauth/clients", headers=admin.headers, json={
        "name": name, "type": "confidential", "redirect_uris": [], "grant_types": ["client_credentials"]})
    assert result.status_code == 201, result.text
    client = result.json
    if role:
        assert run_cli(settings, "grant-role", f"client:{client['client_id']}", role) == 0
    token = client_credentials_token(http, client["client_id"], client["client_secret"])
    return SimpleNamespace(client_id=client["client_id"], uuid=client["uuid"], token=token,
                           subject=f"client:{client['client_id']}")
