"""Schema-driven fuzzing: schemathesis against a real ``locky serve`` and the Swagger
document it serves itself (``/swagger/doc.json``).

Every operation of the document is fuzzed with valid (positive) and invalid (negative)
generated requests, once authenticated as an admin and once as a plain user. Each
response must be no 5xx, carry a documented status code, content type, headers and
body shape (schemathesis' own checks), and keep the contract's error shapes and headers
(:func:`contract`). The budget is ``LOCKY_FUZZ_EXAMPLES`` examples per operation, mode
and caller (default 20: over 2,000 cases on SQLite). ``LOCKY_FUZZ_SEED`` repeats a run
(each run prints its seed and draws a new one without it, as ``LOCKY_SCHEMATHESIS_SEED``
does for test_openapi_conformance.py).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlencode

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from locky.testing import ADMIN_EMAIL

from harden import EVIDENCE, STRONG, account, fresh_database, http, query, served

pytestmark = [pytest.mark.server, pytest.mark.slow]

EXAMPLES = int(os.environ.get("LOCKY_FUZZ_EXAMPLES", "20"))
SEED = int(os.environ.get("LOCKY_FUZZ_SEED") or random.randrange(2**31))
MIN_CASES = 2000
REQUEST_LINE = 3500  # bytes of query string, under gunicorn's 4094-byte request line
#: Seconds a request may take (schemathesis' own default): a server that leaves one
#: unanswered ends the run at once, naming it, rather than every later case waiting as long.
ANSWER_WITHIN = 10


@schemathesis.check
def documented_content_type(ctx, response, case):
    """schemathesis' content-type check, except for bodiless 204s: Swagger 2.0 has one
    ``produces`` list per operation and none per response, and a response without a
    body has no media type (RFC 9110, 8.3)."""
    if response.status_code == 204 and not response.content:
        return None
    return content_type_conformance(ctx, response, case)


@schemathesis.check
def contract(ctx, response, case):
    """The contract's own rules for every response (docs/http/README.md, records.md and tokens.md)."""
    headers = {k.lower(): v[0] for k, v in response.headers.items()}
    status = response.status_code
    assert headers.get("x-content-type-options") == "nosniff", "no X-Content-Type-Options: nosniff"
    assert headers.get("x-request-id"), "no X-Request-ID"
    server = headers.get("server", "")
    assert not any(ch.isdigit() for ch in server) and "gunicorn" not in server.lower(), f"Server banner {server!r}"
    if status == 401:
        assert headers.get("www-authenticate") == "Bearer", "a 401 without WWW-Authenticate: Bearer"
    if status == 429:
        assert headers.get("retry-after", "").isdigit(), "a 429 without Retry-After"
    if status == 201:
        assert headers.get("location", "").startswith("/v1/internal/"), "a 201 without Location"
    if status >= 400:
        body = json.loads(response.content)
        assert isinstance(body, dict) and body, f"error body is not a JSON object: {body!r}"
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in body.items()), f"not str->str: {body!r}"
        if status != 400:
            assert "title" in body and set(body) <= {"title", "description"}, f"not Falcon's error object: {body!r}"
    if status == 200 and "access_token" in (response.content or b"")[:200].decode("latin-1"):
        assert headers.get("cache-control") == "no-store", "a token response without Cache-Control: no-store"
    return None


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    documented_content_type,
    response_headers_conformance,
    response_schema_conformance,
    ignored_auth,
    contract,
]


@dataclass
class Run:
    cases: int = 0
    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    operations: set[str] = field(default_factory=set)
    call_time: float = 0.0
    #: The request the server left unanswered (a timeout, a closed connection), if any:
    #: the run stops there, since every later call would wait as long.
    unanswered: str | None = None


#: The fuzzer logs in with a thousand made-up emails from one address: the per-address
#: login limit (tested in test_login_limits) would lock its callers out mid-run.
FUZZ_LIMITS = {"LOCKY_LOGIN_MAX_FAILURES_PER_IP": "1000000"}


def seed(server) -> dict[str, dict]:
    """An admin and a plain user (who owns a group), plus records for ids to find."""
    user = account(server, "fuzz-user@example.com", STRONG)
    admin = account(server, ADMIN_EMAIL, STRONG, verified=True)
    for n in range(3):
        http(server, "POST", "/v1/public/users/register",
             {"name": f"Seed {n}", "email": f"seed{n}@example.com", "password": STRONG})
        group = http(server, "POST", "/v1/private/groups", {"name": f"seed-{n}"}, token=user["access_token"]).json
        http(server, "POST", "/v1/private/roles",
             {"name": f"seed-role-{n}", "permissions": [{"resource": "docs", "action": "read"}]},
             token=admin["access_token"])
        http(server, "POST", "/v1/private/members",
             {"group_uuid": group["uuid"], "user_uuid": admin["user"]["uuid"], "role": "viewer"},
             token=user["access_token"])
    return {"user": user, "admin": admin}


def fuzz(server, examples: int) -> Run:
    schema = schemathesis.openapi.from_url(server.url + "/swagger/doc.json")
    callers = seed(server)
    protected = {c["user"]["id"] for c in callers.values()}
    session = requests.Session()
    run = Run()
    base_url = server.url + "/v1"

    def fresh_token(email: str) -> str:
        return http(server, "POST", "/v1/public/users/login", {"email": email, "password": STRONG}).json["access_token"]

    for name in ("user", "admin"):  # the admin's deletes come last
        caller = callers[name]
        for result in schema.get_all_operations():
            operation = result.ok()
            run.operations.add(operation.label)
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                # gunicorn answers request lines over 4 KiB itself (414); the API's longest
                # valid query (a 255-character name, percent-encoded) stays far below.
                strategy = operation.as_strategy(generation_mode=mode).filter(
                    lambda c: len(urlencode(c.query or {}, doseq=True)) < REQUEST_LINE)
                if operation.path == "/private/users/{id}":
                    # Keep the two callers alive: deleting or re-passwording them would end the run.
                    strategy = strategy.filter(lambda c: c.path_parameters.get("id") not in protected)

                @hypothesis.seed(SEED)
                @given(case=strategy)
                @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
                          suppress_health_check=list(HealthCheck))
                def one(case):
                    token = caller["access_token"]
                    if operation.path == "/private/users/logout":
                        token = fresh_token(caller["user"]["email"])  # log out a login of its own
                    run.cases += 1
                    t0 = time.perf_counter()
                    try:
                        response = case.call_and_validate(
                            base_url=base_url, session=session, headers={"Authorization": f"Bearer {token}"},
                            checks=CHECKS, timeout=ANSWER_WITHIN,
                        )
                    except requests.RequestException as exc:
                        run.unanswered = (f"{operation.label} as {name}, {mode.value}: no answer within "
                                          f"{ANSWER_WITHIN} s ({type(exc).__name__}) to\n{case.as_curl_command()}")
                        raise
                    run.statuses[response.status_code] += 1
                    run.call_time += time.perf_counter() - t0
                    EVIDENCE.response(f"{operation.label} (fuzz as {name})", response.status_code,
                                      response.text if isinstance(response.text, str) else "")

                try:
                    one()
                except Unsatisfiable:
                    pass  # nothing to negate: an operation without parameters
                except (Exception, BaseExceptionGroup) as exc:  # schemathesis' failures, with a curl line
                    if run.unanswered is not None:
                        run.failures.append(run.unanswered)
                        return run
                    run.failures.append(f"{operation.label} as {name}, {mode.value}:\n{str(exc)[:3000]}")
    return run


def no_hash_left_the_server(database_url: str) -> None:
    """The stored hashes themselves appear in no body the fuzzer got back."""
    hashes = [row[0] for row in query(database_url, "SELECT password_hash FROM locky_users")]
    assert len(hashes) >= 5
    for seen in EVIDENCE.bodies:
        assert not any(h in seen.text for h in hashes), f"a password hash in {seen.where}"


def test_fuzz_sqlite(tmp_path):
    url = f"sqlite:///{tmp_path / 'locky.sqlite'}"
    started = time.monotonic()
    with served(tmp_path, url, workers=2, **FUZZ_LIMITS) as server:
        run = fuzz(server, EXAMPLES)
    print(f"\nfuzz (SQLite, seed {SEED}): {run.cases} cases over {len(run.operations)} operations in "
          f"{time.monotonic() - started:.0f}s ({run.call_time:.0f}s in calls); statuses {dict(sorted(run.statuses.items()))}")
    assert not run.failures, f"LOCKY_FUZZ_SEED={SEED}\n\n" + "\n\n".join(run.failures)
    assert len(run.operations) >= 25
    assert run.cases >= MIN_CASES * EXAMPLES // 20
    assert not any(status >= 500 for status in run.statuses)
    no_hash_left_the_server(url)


@pytest.mark.backend
def test_fuzz_postgres(tmp_path):
    """A shorter run on PostgreSQL, which refuses some strings SQLite stores."""
    with fresh_database("postgres", tmp_path) as url:
        with served(tmp_path, url, workers=2, **FUZZ_LIMITS) as server:
            run = fuzz(server, max(5, EXAMPLES // 3))
        print(f"\nfuzz (PostgreSQL, seed {SEED}): {run.cases} cases; statuses {dict(sorted(run.statuses.items()))}")
        assert not run.failures, f"LOCKY_FUZZ_SEED={SEED}\n\n" + "\n\n".join(run.failures)
        no_hash_left_the_server(url)
