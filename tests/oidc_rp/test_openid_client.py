"""Locky's OpenID provider (docs/http/oauth.md) driven by a certified
third-party relying party, panva's ``openid-client`` (npm, pinned in package.json and
package-lock.json beside this file), run on Node as its users run it: discovery over
plain http to 127.0.0.1 (``allowInsecureRequests``), the code flow with PKCE for
confidential clients authenticating with ``client_secret_basic`` and with
``client_secret_post`` and for a public client, ID tokens signed RS256 and ES256 checked
by the library (signature against the JWKS, ``iss``, ``aud``, ``nonce``), userinfo,
refresh rotation and reuse detection, ``prompt=none`` with and without a session,
``max_age``, client credentials (and a role given to the client with ``locky
grant-role``), introspection and revocation, end-session with and
without a post-logout URI, a TOTP user's second step, and the error cases: an
unregistered redirect URI or an unknown client (400 page, no redirect), a public client
without PKCE, a wrong verifier, a code used twice, a rotated secret and a deleted client.

The "browser" of ``rp.mjs`` is a cookie jar that follows redirects by hand and posts the
provider's forms with their hidden fields (CSRF token included), as a browser does.

One real ``locky serve`` on 127.0.0.1 (SQLite) serves every scenario; the clients are
registered through the API, the backend's with ``locky clients create --json``. Each
scenario is one ``node rp.mjs SCENARIO`` run, and each of its named checks is one test here.
Needs ``node`` (20 or later) and ``npm ci`` run in ``tests/oidc_rp``; without them the
module skips with the reason, unless ``LOCKY_REQUIRE_NODE=1`` (``.ci/run``), which makes
it fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.server import free_port, locky_server

pytestmark = [pytest.mark.server, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
PASSWORD = "openid-client-password-1"
ADMIN, ADA, TOTP_USER = "admin@example.com", "ada@example.com", "tess@example.com"
#: Where the relying party's callbacks point. Nothing needs to listen there: the RP's
#: browser stops at the first redirect that leaves the provider.
REDIRECT_URI = "http://127.0.0.1:9999/callback"
POST_LOGOUT_URI = "http://127.0.0.1:9999/signed-out"
GROUP = "Research"


def _node_missing() -> str | None:
    if not shutil.which("node") or not shutil.which("npm"):
        return "node and npm are not installed (Node 20 or later)"
    if not (HERE / "node_modules" / "openid-client" / "package.json").exists():
        return "tests/oidc_rp/node_modules is missing: run `npm ci --no-audit --no-fund` in tests/oidc_rp"
    return None


MISSING = _node_missing()
if MISSING:
    if os.environ.get("LOCKY_REQUIRE_NODE") == "1":
        raise RuntimeError(f"LOCKY_REQUIRE_NODE=1 but {MISSING}")
    pytest.skip(f"openid-client tests skipped: {MISSING}", allow_module_level=True)


# -- the clients (docs/http/oauth.md registration bodies) ---------------------------------------

#: label -> registration body; the labels are the ones rp.mjs uses.
CLIENTS = {
    "basic": {"name": "Research Notes", "type": "confidential", "redirect_uris": [REDIRECT_URI],
              "post_logout_redirect_uris": [POST_LOGOUT_URI], "id_token_signed_response_alg": "RS256"},
    "post": {"name": "Team Wiki", "type": "confidential", "redirect_uris": [REDIRECT_URI],
             "post_logout_redirect_uris": [POST_LOGOUT_URI], "id_token_signed_response_alg": "ES256",
             "first_party": True},
    "public": {"name": "Pocket App", "type": "public", "redirect_uris": [REDIRECT_URI]},
    "other": {"name": "Other App", "type": "confidential", "redirect_uris": [REDIRECT_URI],
              "scopes": ["openid", "email", "profile"]},
    "machine": {"name": "Billing Backend", "type": "confidential", "redirect_uris": [],
                "grant_types": ["client_credentials"]},
    "doomed": {"name": "Short-lived App", "type": "confidential", "redirect_uris": [REDIRECT_URI],
               "grant_types": ["authorization_code", "refresh_token", "client_credentials"], "first_party": True},
}


def _code_checks(label: str) -> list[str]:
    """The checks of ``rp.mjs code LABEL``, named as it names them."""
    body = CLIENTS[label]
    how = "post" if label == "post" else "basic" if body["type"] == "confidential" else "none"
    p = f"{label} ({how}, {body.get('id_token_signed_response_alg', 'RS256')})"
    names = [f"{p}: prompt=none without a session -> login_required",
             f"{p}: the sign-in page, email pre-filled from login_hint",
             f"{p}: a wrong password stays on the sign-in page with 401",
             f"{p}: sign in with email and password",
             f"{p}: a first-party client asks no consent" if body.get("first_party")
             else f"{p}: the consent page names the client, Allow -> back to the client",
             f"{p}: code + PKCE exchanged, ID token valid (iss, aud, nonce, signature)",
             f"{p}: the token request authenticated with {how}",
             f"{p}: ID token claims",
             f"{p}: token answer (Bearer, scope, refresh token for offline_access)",
             f"{p}: the access token is a Locky token for this client",
             f"{p}: userinfo",
             f"{p}: userinfo scoped to the grant (openid only: no email, no name)"]
    if body["type"] == "confidential":
        names.append(f"{p}: introspection of its access token")
    names += [f"{p}: refresh rotates the refresh token",
              f"{p}: a refresh token used twice -> invalid_grant",
              f"{p}: after reuse the whole chain is dead",
              f"{p}: prompt=none with a session -> a code at once",
              f"{p}: max_age=0 asks for the password again"]
    if not body.get("first_party"):
        names += [f"{p}: prompt=none, signed in, another client never consented -> consent_required",
                  f"{p}: a scope the client may not ask for -> invalid_scope, redirected with state"]
    names += [f"{p}: wrong PKCE verifier -> invalid_grant",
              f"{p}: a code used twice -> invalid_grant, and the first exchange's tokens are revoked",
              f"{p}: a last login before logout",
              f"{p}: end-session with state -> back to the registered post-logout URI with state"
              if body.get("post_logout_redirect_uris")
              else f"{p}: end-session without a registered post-logout URI -> the signed-out page",
              f"{p}: after logout prompt=none -> login_required",
              f"{p}: after logout the session's tokens are refused"]
    return names


#: scenario run (rp.mjs arguments) -> the checks it must report, by name.
EXPECTED: dict[tuple[str, ...], list[str]] = {
    ("discovery",): ["discovery: openid-client reads the document",
                     "discovery: issuer is the URL it was fetched from",
                     "discovery: endpoints",
                     "discovery: code flow with S256 only",
                     "discovery: grants, client authentication, algorithms",
                     "discovery: the JWKS holds RS256 and ES256 keys"],
    ("code", "basic"): _code_checks("basic"),
    ("code", "post"): _code_checks("post"),
    ("code", "public"): _code_checks("public"),
    ("totp",): ["totp: the password leads to the code step",
                "totp: a wrong code stays on the code step with 401",
                "totp: the right code -> back to the client",
                "totp: ID token amr has pwd and otp"],
    ("errors",): ["errors: unregistered redirect URI -> 400 page, no redirect",
                  "errors: unknown client -> 400 page, no redirect",
                  "errors: public client without PKCE -> invalid_request, redirected with state",
                  "errors: code_challenge_method=plain -> invalid_request",
                  "errors: the sign-in form without its CSRF token is refused",
                  "errors: an unknown grant type -> unsupported_grant_type",
                  "errors: a public client cannot use client_credentials",
                  "errors: userinfo with a bad token -> 401 Bearer invalid_token"],
    ("machine",): [f"machine ({how}): {what}" for how in ("basic", "post") for what in (
                       "client_credentials grant", "the token's subject is the client",
                       "may ask /v1/internal/authz/check, may not list users", "introspection")]
                  + ["machine: a wrong secret -> invalid_client (401)"],
    ("machine-role",): ["machine: given a role (locky grant-role client:ID ROLE), it may do what the role allows"],
    ("machine-rotated",): ["rotated secret: the old secret -> invalid_client",
                           "rotated secret: the new secret works",
                           "rotated secret: a token from before the rotation still works",
                           "machine: revoking a client_credentials token ends the client's tokens"],
    ("before-delete",): ["deleted client: a login before the deletion",
                         "deleted client: a client_credentials token before the deletion"],
    ("after-delete",): ["deleted client: its secret -> invalid_client",
                        "deleted client: its refresh token is refused",
                        "deleted client: its users' access tokens are refused",
                        "deleted client: its client_credentials token is refused",
                        "deleted client: authorization -> 400 page, no redirect"],
}


# -- the provider, its users and clients --------------------------------------------------


class Provider:
    """The running server, the relying party's configuration, and each scenario's outcome."""

    def __init__(self, server, workdir: Path):
        self.server, self.workdir = server, workdir
        self.admin = server.sign_up(ADMIN, PASSWORD, verify=True)
        self.clients: dict[str, dict] = {}
        self.outcomes: dict[tuple[str, ...], dict[str, str | None]] = {}
        self.outputs: dict[tuple[str, ...], str] = {}

    def register(self, label: str) -> dict:
        status, _, body = self.server.request("POST", "/v1/private/oauth/clients", CLIENTS[label], headers=self.admin)
        assert status == 201, (label, status, body)
        self.clients[label] = body
        return body

    def cli(self, *args: str) -> str:
        """``locky ARGS`` on the server's database (the operator's command); its output."""
        done = subprocess.run([sys.executable, "-m", "locky.cli.main", *args], cwd=self.workdir, env=self.env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def register_with_the_cli(self, label: str, *options: str) -> dict:
        """``locky clients create NAME OPTIONS --json``, the operator's way, on the server's database."""
        body = json.loads(self.cli("clients", "create", CLIENTS[label]["name"], *options, "--json"))
        assert body["client_secret"] and body["grant_types"] == CLIENTS[label]["grant_types"], body
        self.clients[label] = body
        return body

    def config(self, users: dict) -> dict:
        clients = {}
        for label, body in self.clients.items():
            asked = CLIENTS[label]
            clients[label] = {"client_id": body["client_id"], "client_secret": body.get("client_secret"),
                              "alg": asked.get("id_token_signed_response_alg", "RS256"), "name": asked["name"],
                              "first_party": asked.get("first_party", False),
                              "post_logout": bool(asked.get("post_logout_redirect_uris"))}
        return {"issuer": self.server.url, "redirect_uri": REDIRECT_URI, "post_logout_redirect_uri": POST_LOGOUT_URI,
                "clients": clients, **users}

    def run(self, scenario: tuple[str, ...], *extra: str) -> dict[str, str | None]:
        """``node rp.mjs SCENARIO EXTRA``: each check's name -> ``None`` when it passed, else why not."""
        if scenario in self.outcomes:
            return self.outcomes[scenario]
        env = {**os.environ, "RP_CONFIG": json.dumps(self.rp_config), "RP_STATE": str(self.workdir / "rp-state.json")}
        done = subprocess.run(["node", "rp.mjs", *scenario, *extra], cwd=HERE, env=env, capture_output=True, text=True,
                              timeout=300)
        outcome: dict[str, str | None] = {}
        for line in done.stdout.splitlines():
            if m := re.fullmatch(r"ok (.+)", line):
                outcome[m[1]] = None
            elif m := re.fullmatch(r"not ok (.+?) - (.*)", line):
                outcome[m[1]] = m[2]
        self.outcomes[scenario] = outcome
        self.outputs[scenario] = done.stdout + done.stderr
        return outcome


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("oidc-rp")
    port = free_port()
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}", "LOCKY_BCRYPT_ROUNDS": "4",
           "LOCKY_PUBLIC_URL": f"http://127.0.0.1:{port}", "LOCKY_ADMIN_EMAILS": ADMIN}
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_")]:
            mp.delenv(key)
        with locky_server(workdir, env=env, workers=2, port=port) as server:
            op = Provider(server, workdir)
            op.env = {**os.environ, **env}
            for label in CLIENTS:
                if label == "machine":  # the backend's client comes from the operator's command
                    op.register_with_the_cli(label, "--grant", "client_credentials")
                else:
                    op.register(label)
            ada = _user(server, ADA, "Ada Lovelace")
            status, _, group = server.request("POST", "/v1/private/groups", {"name": GROUP}, headers=ada["headers"])
            assert status == 201, group
            tess = _user(server, TOTP_USER, "Tess Totp")
            secret = _enable_totp(server, tess["headers"])
            op.rp_config = op.config({
                "user": {"email": ADA, "password": PASSWORD, "uuid": ada["uuid"], "name": "Ada Lovelace",
                         "groups": [GROUP]},
                "totp_user": {"email": TOTP_USER, "password": PASSWORD, "uuid": tess["uuid"], "secret": secret}})
            yield op


def _user(server, email: str, name: str) -> dict:
    status, _, body = server.request("POST", "/v1/public/users/register",
                                     {"name": name, "email": email, "password": PASSWORD})
    assert status == 201, body
    server.verify(email)  # email_verified: true in the ID token
    status, _, tokens = server.request("POST", "/v1/public/users/login", {"email": email, "password": PASSWORD})
    assert status == 200, tokens
    return {"uuid": body["uuid"], "headers": {"Authorization": f"Bearer {tokens['access_token']}"}}


def _enable_totp(server, headers: dict) -> str:
    import pyotp

    status, _, pending = server.request("POST", "/v1/private/users/me/mfa/totp", {}, headers=headers)
    assert status == 200, pending
    status, _, confirmed = server.request("POST", "/v1/private/users/me/mfa/totp/confirm",
                                          {"code": pyotp.TOTP(pending["secret"]).now()}, headers=headers)
    assert status == 200, confirmed
    return pending["secret"]


def _outcome(provider: Provider, scenario: tuple[str, ...]) -> dict[str, str | None]:
    """A scenario's checks, after what the provider's admin does before it: a secret
    rotated, a client deleted."""
    if scenario in provider.outcomes:
        return provider.outcomes[scenario]
    if scenario == ("machine-role",):
        # After the machine scenario saw it refused a user list: a role that allows it.
        _outcome(provider, ("machine",))
        status, _, role = provider.server.request("POST", "/v1/private/roles", {
            "name": "directory-reader", "permissions": [{"resource": "users", "action": "read"}]},
            headers=provider.admin)
        assert status == 201, role
        provider.cli("grant-role", f"client:{provider.clients['machine']['client_id']}", "directory-reader")
    if scenario == ("machine-rotated",):
        _outcome(provider, ("machine",))
        machine = provider.clients["machine"]
        status, _, body = provider.server.request("POST", f"/v1/private/oauth/clients/{machine['client_id']}/secret",
                                                  headers=provider.admin)
        assert status == 200, body
        return provider.run(scenario, body["client_secret"])
    if scenario == ("after-delete",):
        _outcome(provider, ("before-delete",))
        doomed = provider.clients["doomed"]
        status, _, body = provider.server.request("DELETE", f"/v1/private/oauth/clients/{doomed['client_id']}",
                                                  headers=provider.admin)
        assert status == 204, body
    return provider.run(scenario)


CASES = [pytest.param(scenario, name, id=f"{' '.join(scenario)}: {name}")
         for scenario, names in EXPECTED.items() for name in names]


@pytest.mark.parametrize(("scenario", "name"), CASES)
def test_openid_client_check(provider, scenario, name):
    outcome = _outcome(provider, scenario)
    assert name in outcome, f"rp.mjs {' '.join(scenario)} did not report {name!r}:\n{provider.outputs[scenario][-3000:]}"
    assert outcome[name] is None, outcome[name]


@pytest.mark.parametrize("scenario", list(EXPECTED), ids=" ".join)
def test_every_check_is_named_here(provider, scenario):
    """rp.mjs reports no check this file does not expect (the two lists move together)."""
    outcome = _outcome(provider, scenario)
    assert sorted(set(outcome) - set(EXPECTED[scenario])) == []


def test_installed_packages_are_the_locked_ones():
    """``npm ci`` installed exactly the lockfile's versions (openid-client, jose, oauth4webapi)."""
    lock = json.loads((HERE / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/openid-client"]["version"] == "6.9.0"
    for name in ("openid-client", "jose", "oauth4webapi"):
        installed = json.loads((HERE / "node_modules" / name / "package.json").read_text())["version"]
        assert installed == lock["packages"][f"node_modules/{name}"]["version"], name
    major = int(subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip().lstrip("v").split(".")[0])
    assert major >= 20
