"""What the audit trail costs a write: login and group create with and without it.

Two apps in one process, each on its own fresh database (SQLite by default, or
``--database-url`` for a server: give two databases with ``--baseline-url``): one as
shipped, one whose audit trail records nothing (the baseline). The rounds alternate
between the two, so drift (disk cache, CPU frequency) hits both alike; prints median and
p95 per operation and the difference the audit write makes. With ``--webhooks N`` the
audited app also has N subscriptions matching every event (deliveries queued in the
same transaction; their sending is not measured: the receivers' address is closed).

    python -m benchmarks.audit --rounds 300
    python -m benchmarks.audit --rounds 300 --webhooks 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from falcon import testing

from locky import create_app
from locky.settings import Settings

PASSWORD = "correct horse battery"
SECRET = "benchmark-secret-0123456789-abcdefghijklmnop"
ADMIN = "admin@example.com"


class Silent:
    """An audit trail that records nothing: the baseline."""

    def record(self, *args, **kwargs):
        return None


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def build(url: str, workdir: Path, name: str):
    settings = Settings.from_mapping({
        "database_url": url, "jwt_secret": SECRET, "bcrypt_rounds": 4, "log_requests": False,
        "login_max_failures_per_ip": 1_000_000, "autoload_plugins": False, "admin_emails": [ADMIN],
        "mail_dir": str(workdir / f"mail-{name}"), "webhook_allow_private": True,
    })
    app = create_app(settings, background=False)
    return app, testing.TestClient(app)


def admin_token(app, client) -> str:
    answer = client.simulate_post("/v1/public/users/register",
                                  json={"name": "Admin", "email": ADMIN, "password": PASSWORD})
    assert answer.status_code == 201, answer.text
    app.context.storage.users.mark_verified(answer.json["uuid"], ADMIN)
    answer = client.simulate_post("/v1/public/users/login", json={"email": ADMIN, "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    return answer.json["access_token"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--database-url", help="the audited app's database (default: a fresh SQLite file)")
    parser.add_argument("--baseline-url", help="the baseline app's database (another one)")
    parser.add_argument("--webhooks", type=int, default=0, help="subscriptions to every event on the audited app")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="locky-bench-audit-"))
    audited, audited_client = build(args.database_url or f"sqlite:///{workdir / 'audited.sqlite'}", workdir, "a")
    baseline, baseline_client = build(args.baseline_url or f"sqlite:///{workdir / 'baseline.sqlite'}", workdir, "b")
    baseline.context.audit = Silent()
    apps = {"audited": (audited, audited_client), "baseline": (baseline, baseline_client)}
    tokens = {name: admin_token(app, client) for name, (app, client) in apps.items()}
    for i in range(args.webhooks):
        answer = audited_client.simulate_post("/v1/private/webhooks", json={
            "url": f"http://127.0.0.1:9/hook-{i}", "events": ["*"]}, headers={"Authorization": f"Bearer {tokens['audited']}"})
        assert answer.status_code == 201, answer.text
    for name, (app, client) in apps.items():
        for i in range(args.rounds):
            answer = client.simulate_post("/v1/public/users/register",
                                          json={"name": f"U {i}", "email": f"u{i}@example.com", "password": PASSWORD})
            assert answer.status_code == 201, answer.text

    times: dict[tuple[str, str], list[float]] = {}

    def timed(operation: str, name: str, call) -> None:
        start = time.perf_counter()
        answer = call()
        times.setdefault((operation, name), []).append(time.perf_counter() - start)
        assert answer.status_code in (200, 201), answer.text

    for i in range(args.rounds):
        for name, (app, client) in apps.items():
            auth = {"Authorization": f"Bearer {tokens[name]}"}
            timed("login (bcrypt cost 4)", name, lambda: client.simulate_post(
                "/v1/public/users/login", json={"email": f"u{i}@example.com", "password": PASSWORD}))
            timed("group create", name, lambda: client.simulate_post(
                "/v1/private/groups", json={"name": f"group {i}"}, headers=auth))

    engine = (args.database_url or "sqlite").split(":", 1)[0]
    print(f"{args.rounds} rounds, {engine}, {args.webhooks} webhooks on every event; times in ms")
    print(f"{'operation':<24} {'baseline p50':>12} {'audited p50':>12} {'added p50':>10} "
          f"{'baseline p95':>13} {'audited p95':>12}")
    for operation in ("login (bcrypt cost 4)", "group create"):
        base, with_audit = times[(operation, "baseline")], times[(operation, "audited")]
        b50, a50 = statistics.median(base) * 1000, statistics.median(with_audit) * 1000
        print(f"{operation:<24} {b50:>12.3f} {a50:>12.3f} {a50 - b50:>+10.3f} "
              f"{percentile(base, 0.95) * 1000:>13.3f} {percentile(with_audit, 0.95) * 1000:>12.3f}")
    events = audited.context.storage.audit.list(limit=1, event="group.created")
    assert events.items, "the audited app recorded no group.created"
    print(f"deliveries queued: {audited.context.storage.deliveries.pending()}")
    for app, _ in apps.values():
        app.close()


if __name__ == "__main__":
    main()
