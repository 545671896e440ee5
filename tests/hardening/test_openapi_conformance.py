"""The server keeps the rules its OpenAPI document states: schemathesis with every phase
and every check against the app in-process (WSGI), on SQLite and on PostgreSQL (issue 13,
findings 11 and 12).

The run is what ``st run --phases=all --checks=all`` does (schemathesis' own engine,
through its Python API): the examples the document gives, the coverage phase (each
keyword's boundaries, valid and invalid), fuzzing (positive and negative) and the
stateful phase (chains inferred from ``Location`` headers and response shapes), every
case called as an admin and checked by every check, ``positive_data_acceptance``
(ST202, "schema-valid request rejected") included. It passes only with no failure and
no error: the document states the rules the server enforces, and the server keeps them.

Budget: ``LOCKY_SCHEMATHESIS_EXAMPLES`` examples per operation and phase on SQLite
(default 200: about 7,000 cases, one to four minutes on a 2-core machine), a quarter of
that on PostgreSQL: the document and the resources are the same on both, and the
PostgreSQL run is there for what only a server database does (its errors, types and
lengths), which a quarter of the cases reaches as well, in a quarter of the time of CI;
``LOCKY_SCHEMATHESIS_SEED`` repeats a run (each run prints its seed; no example database
is kept, so the seed alone decides the run).

What the run does not count as a failure, each for a reason the document cannot carry:

- a 400 for a request that is valid in shape but conflicts with stored records
  (docs/http/records.md makes uniqueness and missing references 400s, section 6 built-in
  and held roles): which requests conflict depends on the data, not on the document
  (:data:`STATE_CONFLICTS`);
- a 400 for a code of the account lifecycle the run cannot know (a mailed verification
  or reset code, a TOTP code, a confirmation with no setup begun), in the same set;
- a 400 of the password rules the document can only describe (a common password, one
  containing the account's name or email name), when the rule does refuse that password
  (:data:`PASSWORD_RULES`);
- a 2xx for a body whose only fault is a password's length counted in characters when
  its UTF-8 bytes are within 8-72: docs/http/README.md#bodies counts bytes, the document says so
  in words, and Swagger 2.0's ``minLength``/``maxLength`` can only count characters
  (``'\U000a3bda·\x06i'`` is 4 characters and 8 bytes: a valid password)
  (:func:`password_valid_by_bytes`);
- a 204 without ``Content-Type``: Swagger 2.0 has one ``produces`` per operation, none
  per response, and a response without content has no media type (RFC 9110, 8.3).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import falcon.testing
import jsonschema
import pytest
import schemathesis
from hypothesis import strategies as st
from marshmallow import ValidationError
from schemathesis.engine import events, from_schema
from schemathesis.specs.openapi import unregister_string_format
from schemathesis.transport.wsgi import WSGITransport

from locky.app import create_app
from locky.accounts import password_rules
from locky.audit.schemas import KnownEvents, event_pattern
from locky.errors import MISSING_REFERENCE
from locky.accounts.lifecycle import BAD_TOKEN
from locky.testing import ADMIN_EMAIL, make_settings
from locky.oauth import clients as oauth_clients
from locky.webhooks import targets as webhook_targets

from harden import EVIDENCE, STRONG, RecordingClient, fresh_database, query

EXAMPLES = int(os.environ.get("LOCKY_SCHEMATHESIS_EXAMPLES", "200"))
#: Examples per operation and phase on each backend (see the module docstring).
BUDGET = {"sqlite": EXAMPLES, "postgres": max(25, EXAMPLES // 4)}
SEED = int(os.environ.get("LOCKY_SCHEMATHESIS_SEED") or random.randrange(2**31))
CASES_PER_EXAMPLE = 20  # at least: measured 27-37 (29 operations, four phases)
LOGOUT = "/private/users/logout"

#: 400 messages for a request of valid shape that conflicts with what is stored (copied
#: from storage and the resources: a message that changes shows up as a failure).
STATE_CONFLICTS = {
    "Already exists.",
    "Already registered.",
    "Already a member of this group.",
    "Built-in roles cannot be changed.",
    "Built-in roles cannot be deleted.",
    "Cannot rename a role held by live memberships or grants.",
    "The role is held by live memberships or grants.",
    "The group's last owner cannot leave it; make another member owner first.",
    # The policy's global roles exist as roles but cannot be held through a membership
    # (the MemberRequest description says so; Swagger 2.0 has no "not" to exclude them).
    "Not a membership role: admin and user are held globally.",
    "Not a membership role: client is the role of every machine client.",
    # Changing one's own password or email needs the current password: the caller's
    # identity, not the request's shape, decides whether it is required.
    "Required to change your own password or email.",
    "Does not match your current password.",
    # Codes of the account lifecycle (docs/http/accounts.md): a verification or reset code
    # is a secret the server mailed, a TOTP code follows from a secret and the clock, and
    # confirming needs a setup begun first; a run can only guess them.
    BAD_TOKEN,
    "No TOTP setup is pending: start one first.",
    "Invalid code: enter the current code of your authenticator app.",
    "Invalid code.",
    # Whether "disabled": true is allowed depends on who sends it: nobody may disable
    # their own account (docs/http/accounts.md; the request's description says so).
    "You cannot disable your own account.",
    *MISSING_REFERENCE.values(),
}

#: 400s of the password rules (docs/http/accounts.md) that the document states in words:
#: Swagger 2.0 cannot list 100,000 common passwords or refer to the account's name and
#: email. Not failures only when the rule really refuses the password sent
#: (:func:`password_refused_rightly`).
PASSWORD_RULES = {password_rules.COMMON, password_rules.PERSONAL}


def within_72_bytes(text: str) -> str:
    while len(text.encode("utf-8")) > 72:
        text = text[:-1]
    return text


#: Passwords as the document describes them (``format: password``): 8-72 bytes of UTF-8.
#: Swagger 2.0's ``maxLength`` counts characters, so the byte rule is in the description.
PASSWORDS = (st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=8, max_size=72)
             .map(within_72_bytes).filter(lambda text: len(text) >= 8))


@pytest.fixture
def password_format():
    schemathesis.openapi.format("password", PASSWORDS)
    yield
    unregister_string_format("password")


@dataclass
class Run:
    statuses: Counter = field(default_factory=Counter)
    phases: Counter = field(default_factory=Counter)
    failures: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    ignored: Counter = field(default_factory=Counter)
    examples: int = EXAMPLES

    @property
    def cases(self) -> int:
        return sum(self.statuses.values())

    def summary(self) -> str:
        return (f"{self.cases} cases (seed {SEED}, {self.examples} examples); by phase {dict(self.phases)}; "
                f"statuses {dict(sorted(self.statuses.items()))}; not failures {dict(self.ignored)}")

    def report(self) -> str:
        lines = [f"{len(examples)}x {label}: {check}: {title}\n    " + "\n    ".join(examples[:2])
                 for (label, check, title), examples in sorted(self.failures.items())]
        return "\n".join(lines + self.errors)


@pytest.fixture
def no_socket_options_in_process(monkeypatch):
    """schemathesis 4.32's WSGI transport drops the socket-level options (``max_redirects``,
    ``verify``...) only when a requests session comes with them; the probe of the
    ``ignored_auth`` check sends them without one, and werkzeug's client refuses the
    unknown keyword (a TypeError, reported as an error of the run, before the app is called)."""
    send = WSGITransport.send

    def send_without_socket_options(self, case, *, session=None, **kwargs):
        if session is None:
            for name in ("max_redirects", "verify", "cert", "proxies"):
                kwargs.pop(name, None)
        return send(self, case, session=session, **kwargs)

    monkeypatch.setattr(WSGITransport, "send", send_without_socket_options)


class Callers:
    """The admin every case runs as; re-made when a case deletes it (the API allows that)."""

    def __init__(self, client: RecordingClient):
        self.client = client
        self.admin = client.verified_account(ADMIN_EMAIL, STRONG)  # an admin email is admin once verified

    def fresh_token(self) -> str:
        return self.client.login(ADMIN_EMAIL, STRONG)["access_token"]

    def deleted(self, user_id) -> None:
        if str(user_id) == str(self.admin.id):  # path parameters come as str or int
            self.admin = self.client.verified_account(ADMIN_EMAIL, STRONG)


def seed(client: RecordingClient, callers: Callers) -> None:
    """Records of every kind for the ids and uuids the run draws to find."""
    token = {"Authorization": f"Bearer {callers.admin.access_token}"}
    for n in range(3):
        user = client.account(f"seed{n}@example.com", STRONG)
        group = client.simulate_post("/v1/private/groups", json={"name": f"seed-{n}"}, headers=token).json
        client.simulate_post("/v1/private/roles", headers=token,
                             json={"name": f"seed-role-{n}", "permissions": [{"resource": "docs", "action": "read"}]})
        client.simulate_post("/v1/private/members", headers=token,
                             json={"group_uuid": group["uuid"], "user_uuid": user.uuid, "role": "viewer"})


def password_refused_rightly(app, case, message: str) -> bool:
    """Whether the password rule named by ``message`` does refuse the case's password,
    for the account the case names (its body's name and email; for a change, what the
    stored user keeps)."""
    body = case.body if isinstance(case.body, dict) else {}
    password = body.get("password")
    if not isinstance(password, str):
        return False
    name, email = body.get("name"), body.get("email")
    if case.operation.path == "/private/users/{id}":
        try:
            stored = app.context.storage.users.get(int(case.path_parameters["id"]))
        except (KeyError, TypeError, ValueError):
            stored = None
        if stored is not None:
            name, email = name or stored.name, email or stored.email
    return password_rules.problem(password, email=email, name=name) == message


def utf8_length(text: str) -> int:
    """Bytes of ``text`` in UTF-8; -1 for a lone surrogate, which has no encoding."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return -1


def password_valid_by_bytes(document: dict, case) -> bool:
    """Whether the case's body breaks its schema only by the character count of
    ``format: password`` values that are 8-72 bytes of UTF-8 without NUL (what docs/http/README.md
    accepts): the body with each such password put back to a plain valid one
    passes the schema."""
    body = case.body
    operation = document["paths"].get(case.operation.path, {}).get(case.method.lower(), {})
    schema = next((p["schema"] for p in operation.get("parameters", []) if p.get("in") == "body"), None)
    if not isinstance(body, dict) or schema is None:
        return False
    resolver = {"definitions": document["definitions"], **schema}
    properties = document["definitions"][schema["$ref"].rsplit("/", 1)[1]]["properties"] if "$ref" in schema \
        else schema.get("properties", {})
    passwords = [name for name, field in properties.items() if field.get("format") == "password"]
    mended = dict(body)
    for name in passwords:
        value = body.get(name)
        if isinstance(value, str) and "\x00" not in value and 8 <= utf8_length(value) <= 72:
            mended[name] = "a valid password"
    if mended == body:
        return False
    return jsonschema.Draft4Validator(resolver).is_valid(mended)


def webhook_rule_refused_rightly(app, case, body: dict) -> bool:
    """Whether a 400 of the webhook rules the document states in words (docs/http/audit.md:
    no private, loopback or link-local target; only the event names Locky records)
    is what those rules say of the case's values."""
    values = case.body if isinstance(case.body, dict) else {}
    if case.operation.path == "/internal/audit":
        values = case.query or {}
    if body.keys() == {"url"} and isinstance(values.get("url"), str):
        try:
            webhook_targets.check(values["url"], allow_private=app.context.settings.webhook_allow_private)
        except webhook_targets.TargetRefused as refused:
            return str(refused) == body["url"]
        return False
    field = next(iter(body), None)
    given = values.get(field)
    patterns = given if field == "events" and isinstance(given, list) else [given]
    known = KnownEvents(names=app.context.audit.names)  # Locky's names and its plugins'
    for pattern in patterns:
        try:
            event_pattern(pattern)
            known._check(pattern)
        except ValidationError as refused:
            if refused.messages[0] == body[field]:
                return True
        except TypeError:
            return False
    return False


#: 400s of the OAuth client rules between fields, or between a request and the client it
#: changes (docs/http/oauth.md states them in words): a public client's grants and secret,
#: a type that stays, an authorization_code client's redirect URI.
OAUTH_CLIENT_RULES = {oauth_clients.PUBLIC_WITHOUT_CREDENTIALS, oauth_clients.CODE_NEEDS_REDIRECT,
                      oauth_clients.TYPE_FIXED, oauth_clients.PUBLIC_HAS_NO_SECRET}


PASSKEY_ANSWERS = ("/private/users/me/passkeys", "/public/users/login/passkey")


def passkey_answer_refused_rightly(case, body: dict) -> bool:
    """Whether a 400 is a passkey answer that did not verify (docs/http/accounts.md#passkeys):
    the document can only say it is an object, what a browser's authenticator made of a
    challenge; no generated object is one, so ``{"credential": ...}`` is the right answer."""
    return case.operation.path in PASSKEY_ANSWERS and body.keys() == {"credential"} and \
        body["credential"].startswith(("The passkey could not be verified", "The challenge is unknown",
                                       "No account has this passkey", "Must not contain NUL characters"))


def oauth_client_rule_refused_rightly(case, body: dict) -> bool:
    """Whether a 400 of the OAuth client rules the document states in words
    (docs/http/oauth.md: a redirect URI's form, the rules between fields) is what those
    rules say of the case's body."""
    if not case.operation.path.startswith("/private/oauth/clients") or not body:
        return False
    values = case.body if isinstance(case.body, dict) else {}

    def explained(field: str, message: str) -> bool:
        uris = values.get(field)
        return message in OAUTH_CLIENT_RULES or (
            field in ("redirect_uris", "post_logout_redirect_uris") and isinstance(uris, list)
            and any(isinstance(uri, str) and oauth_clients.redirect_uri_problem(uri) == message for uri in uris))

    return all(explained(field, message) for field, message in body.items())


def fuzz(app, client: RecordingClient, examples: int) -> Run:
    callers = Callers(client)
    seed(client, callers)
    config = schemathesis.Config.from_dict({
        "generation": {"max-examples": examples, "mode": "all", "database": "none"},
        "phases": {name: {"enabled": True} for name in ("examples", "coverage", "fuzzing", "stateful")},
        "checks": {"enabled": True},
        "seed": SEED,
    })
    schema = schemathesis.openapi.from_wsgi("/swagger/doc.json", app, config=config)
    document = falcon.testing.TestClient(app).simulate_get("/swagger/doc.json").json
    run = Run(examples=examples)

    @schema.auth.auth(refresh_interval=None)
    class Admin:
        def get(self, case, context):
            # Logging out ends the login it is called with: give it one of its own.
            return callers.fresh_token() if case.operation.path == LOGOUT else callers.admin.access_token

        def set(self, case, token, context):
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}

    @schema.hook
    def after_call(context, case, response):
        run.statuses[response.status_code] += 1
        run.phases[str(case.meta.phase.name) if case.meta else "other"] += 1
        EVIDENCE.response(f"{case.operation.label} (schemathesis)", response.status_code,
                          response.content.decode("utf-8", "replace"))
        if (case.method.upper(), case.operation.path, response.status_code) == ("DELETE", "/private/users/{id}", 204):
            callers.deleted(case.path_parameters.get("id"))

    @schema.hook
    def filter_failure(context, failure, case, response):
        """False for what :data:`STATE_CONFLICTS` and the 204 rule of the docstring exempt."""
        name = type(failure).__name__
        if name == "RejectedPositiveData" and response.status_code == 400:
            body = json.loads(response.content)
            if len(body) == 1 and next(iter(body.values())) in STATE_CONFLICTS:
                run.ignored["state conflict 400"] += 1
                return False
            if body.keys() == {"password"} and body["password"] in PASSWORD_RULES \
                    and password_refused_rightly(app, case, body["password"]):
                run.ignored["password rule 400"] += 1
                return False
            if webhook_rule_refused_rightly(app, case, body):
                run.ignored["webhook rule 400"] += 1
                return False
            if oauth_client_rule_refused_rightly(case, body):
                run.ignored["oauth client rule 400"] += 1
                return False
            if passkey_answer_refused_rightly(case, body):
                run.ignored["passkey answer 400"] += 1
                return False
        if name == "AcceptedNegativeData" and response.status_code < 300 and password_valid_by_bytes(document, case):
            run.ignored["password counted in bytes"] += 1
            return False
        if name == "MissingContentType" and response.status_code == 204 and not response.content:
            run.ignored["bodiless 204"] += 1
            return False
        return True

    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.failure_info is None:
                        continue
                    key = (event.recorder.label, check.name, check.failure_info.failure.title)
                    interaction = event.recorder.interactions.get(case_id)
                    answer = interaction.response.content[:300] if interaction and interaction.response else b""
                    run.failures.setdefault(key, []).append(f"{check.failure_info.code_sample[:600]}\n    -> {answer!r}")
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            run.errors.append(f"error in {getattr(event, 'label', '?')}: {event.info.message[:600]}")
    return run


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_schemathesis_all_phases_and_checks(backend, tmp_path, no_socket_options_in_process, password_format):
    with fresh_database(backend, tmp_path) as url:
        # The run is about the document and the server agreeing; the login throttles
        # (tested in test_bruteforce.py) would turn the admin's own logins into 429s.
        app = create_app(make_settings(url, login_max_failures=1000, login_max_failures_per_ip=1_000_000))
        try:
            started = time.monotonic()
            run = fuzz(app, RecordingClient(app), BUDGET[backend])
            print(f"\nschemathesis ({backend}, {time.monotonic() - started:.0f}s): {run.summary()}")
        finally:
            app.close()
        assert not run.failures and not run.errors, run.report()
        assert run.cases >= CASES_PER_EXAMPLE * run.examples, run.summary()
        assert {"examples", "coverage", "fuzzing", "stateful"} <= set(run.phases), run.summary()
        assert not any(status >= 500 for status in run.statuses), run.summary()
        hashes = [row[0] for row in query(url, "SELECT password_hash FROM locky_users")]
        assert len(hashes) >= 4
        assert not any(h in seen.text for seen in EVIDENCE.bodies for h in hashes)
