"""What accounts and tokens cost a request: in-process latencies of the account routes.

Runs the app under Falcon's test client (no HTTP server: the figures are Locky's own
work and the database's) on a fresh SQLite database, or on ``--database-url``, and
prints median and p95 per operation. Run it from two checkouts (``PYTHONPATH`` pointing
at the older one) to compare releases: operations a release does not have are skipped.

    python -m benchmarks.lifecycle --rounds 200
    python -m benchmarks.lifecycle --rounds 200 --algorithm HS256   # tokens: ES256 (default) vs HS256
    PYTHONPATH=/tmp/locky-old:/tmp/locky-old/plugins python -m benchmarks.lifecycle --rounds 200
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


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(name: str, call, rounds: int, results: dict[str, list[float]]) -> None:
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - start)
    results[name] = times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--database-url")
    parser.add_argument("--algorithm", help="LOCKY_JWT_ALGORITHM (default: the release's own)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="locky-bench-lifecycle-"))
    values = {"database_url": args.database_url or f"sqlite:///{workdir / 'locky.sqlite'}",
              "jwt_secret": SECRET, "bcrypt_rounds": 4, "log_requests": False,
              "login_max_failures_per_ip": 1_000_000, "autoload_plugins": False}
    fields = {f for f in Settings.__dataclass_fields__}
    if args.algorithm:
        values["jwt_algorithm"] = args.algorithm
    if "mail_dir" in fields:
        values["mail_dir"] = str(workdir / "mail")
    app = create_app(Settings.from_mapping(values))
    client = testing.TestClient(app)
    routes = {route.path for route in app.routes}
    results: dict[str, list[float]] = {}

    def register(i):
        answer = client.simulate_post("/v1/public/users/register",
                                      json={"name": f"Bench {i}", "email": f"b{i}@example.com", "password": PASSWORD})
        assert answer.status_code == 201, answer.text

    def login(i):
        answer = client.simulate_post("/v1/public/users/login", json={"email": f"b{i}@example.com", "password": PASSWORD})
        assert answer.status_code == 200, answer.text
        tokens.append(answer.json["access_token"])

    tokens: list[str] = []
    measure("register (bcrypt cost 4)", register, args.rounds, results)
    measure("login (bcrypt cost 4)", login, args.rounds, results)
    # Each token's first use verifies its signature; later uses hit the verified-token cache.
    measure("me, first use of a token", lambda i: client.simulate_get(
        "/v1/internal/users/me", headers={"Authorization": f"Bearer {tokens[i]}"}), args.rounds, results)
    measure("me, token used before", lambda i: client.simulate_get(
        "/v1/internal/users/me", headers={"Authorization": f"Bearer {tokens[i % 8]}"}), args.rounds, results)
    if "/v1/public/users/password/forgot" in routes:
        measure("forgot, known email", lambda i: client.simulate_post(
            "/v1/public/users/password/forgot", json={"email": f"b{i}@example.com"}), args.rounds, results)
        measure("forgot, unknown email", lambda i: client.simulate_post(
            "/v1/public/users/password/forgot", json={"email": f"nobody{i}@example.com"}), args.rounds, results)
    app.close()
    print(f"{args.rounds} rounds each, database {values['database_url'].split(':', 1)[0]},"
          f" tokens {app.context.settings.jwt_algorithm}")
    for name, times in results.items():
        print(f"  {name:<28} median {statistics.median(times) * 1e3:7.2f} ms   p95 {percentile(times, 0.95) * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
