"""``locky_prometheus``: ``GET /metrics`` with request counts and latencies per route,
failed logins and policy decisions; in one process and across ``locky serve`` workers."""

from __future__ import annotations

import urllib.request

import pytest

from locky.testing import ADMIN_EMAIL, TEST_SECRET, LockyClient
from support.server import locky_server

pytestmark = pytest.mark.extras
pytest.importorskip("prometheus_client", reason="pip install 'locky[metrics]'")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402


def scrape(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample: ``(name, sorted labels) -> value``."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def client(locky_app_factory) -> LockyClient:
    return LockyClient(locky_app_factory(plugins=("locky_prometheus",)))


def metrics(client, **kwargs):
    result = client.simulate_get("/metrics", **kwargs)
    assert result.status_code == 200, result.text
    assert result.headers["content-type"].startswith("text/plain; version=")
    return scrape(result.text)


def test_requests_logins_and_decisions_are_counted(client):
    ada = client.account("ada@example.com")
    bob = client.account("bob@example.com")
    for _ in range(2):
        client.simulate_post("/v1/public/users/login", json={"email": ada.email, "password": "wrong password"})
    group = client.simulate_post("/v1/private/groups", json={"name": "ops"}, headers=ada.headers).json
    assert client.simulate_delete(f"/v1/private/groups/{group['id']}", headers=bob.headers).status_code == 403
    assert client.simulate_get(f"/v1/internal/groups/{group['id']}", headers=bob.headers).status_code == 200
    client.simulate_get("/v1/internal/authz/check", headers=bob.headers,
                        params={"user_uuid": ada.uuid, "resource": "reports", "action": "export"})
    client.simulate_get("/v1/nowhere")

    samples = metrics(client)
    requests = "locky_http_requests_total"
    assert value(samples, requests, method="POST", route="/v1/public/users/login", status="401") == 2
    assert value(samples, requests, method="POST", route="/v1/public/users/login", status="200") == 2
    assert value(samples, requests, method="DELETE", route="/v1/private/groups/{id:id}", status="403") == 1
    assert value(samples, requests, method="GET", route="(unmatched)", status="404") == 1
    assert value(samples, "locky_http_request_duration_seconds_count",
                 method="POST", route="/v1/public/users/register") == 2
    assert value(samples, "locky_http_request_duration_seconds_sum",
                 method="POST", route="/v1/public/users/register") > 0
    assert value(samples, "locky_login_failures_total", reason="credentials") == 2

    decisions = "locky_decisions_total"
    assert value(samples, decisions, resource="groups", action="delete", decision="denied") == 1
    assert value(samples, decisions, resource="groups", action="create", decision="allowed") == 1
    assert value(samples, decisions, resource="groups", action="read", decision="allowed") == 1
    # Client applications' own resources and actions are bounded into "other".
    assert value(samples, decisions, resource="other", action="other", decision="denied") == 1


def test_lockouts_are_counted_apart(client):
    for _ in range(6):
        client.simulate_post("/v1/public/users/login", json={"email": "x@example.com", "password": "wrong password"})
    samples = metrics(client)
    assert value(samples, "locky_login_failures_total", reason="credentials") == 5
    assert value(samples, "locky_login_failures_total", reason="locked") == 1


def test_apps_keep_their_own_numbers(locky_app_factory):
    first = LockyClient(locky_app_factory(plugins=("locky_prometheus",)))
    second = LockyClient(locky_app_factory(plugins=("locky_prometheus",)))
    first.simulate_get("/v1/public/health")
    key = dict(method="GET", route="/v1/public/health", status="200")
    assert value(metrics(first), "locky_http_requests_total", **key) == 1
    assert value(metrics(second), "locky_http_requests_total", **key) == 0


def test_scrape_token(locky_app_factory):
    client = LockyClient(locky_app_factory(plugins=("locky_prometheus",),
                                           extra={"metrics": {"token": "scrape-secret-0123456789"}}))
    refused = client.simulate_get("/metrics")
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert client.simulate_get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    metrics(client, headers={"Authorization": "Bearer scrape-secret-0123456789"})


def test_openmetrics_when_asked(client):
    result = client.simulate_get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("application/openmetrics-text")
    assert result.text.rstrip().endswith("# EOF")


def test_the_same_metrics_all_along(client):
    first = client.app.context.state["metrics"]
    client.account("ada@example.com")
    client.simulate_post("/v1/public/users/login", json={"email": "ada@example.com", "password": "wrong password"})
    assert client.app.context.state["metrics"] is first


def test_not_in_the_swagger_document(client):
    assert "/metrics" not in client.app.swagger["paths"]
    assert not any(path.endswith("metrics") for path in client.app.swagger["paths"])


@pytest.mark.server
def test_workers_are_added_up(tmp_path):
    """Under ``locky serve`` with two workers, one scrape counts every worker's requests."""
    multiproc = tmp_path / "prometheus"
    multiproc.mkdir()
    env = {
        "LOCKY_PLUGINS": "locky_prometheus",
        "PROMETHEUS_MULTIPROC_DIR": str(multiproc),
        "LOCKY_DATABASE_URL": f"sqlite:///{tmp_path / 'locky.sqlite'}",
        "LOCKY_JWT_SECRET": TEST_SECRET,
        "LOCKY_ADMIN_EMAILS": ADMIN_EMAIL,
        "LOCKY_BCRYPT_ROUNDS": "4",
        "LOCKY_LOGIN_MAX_FAILURES": "1000",
    }
    failures = 30
    with locky_server(tmp_path, env=env, workers=2) as server:
        for i in range(failures):
            status, _, _ = server.request("POST", "/v1/public/users/login",
                                          {"email": f"nobody{i}@example.com", "password": "wrong password"})
            assert status == 401
        pids = set()
        for _ in range(4):  # whichever worker answers, the numbers are the same
            with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
                samples = scrape(response.read().decode())
            assert value(samples, "locky_login_failures_total", reason="credentials") == failures
            pids.update(path.name for path in multiproc.iterdir())
    assert len(pids) >= 2  # more than one process wrote numbers
