"""Prometheus metrics for Locky: ``GET /metrics`` in the text exposition format.

Install the extra and load the plugin by name::

    pip install 'locky[metrics]'
    LOCKY_PLUGINS=locky_prometheus locky serve

Metrics (every label has a bounded set of values, so no caller can grow them):

- ``locky_http_requests_total{method, route, status}`` and
  ``locky_http_request_duration_seconds{method, route}`` (a histogram), per route
  template (``/v1/internal/users/{id:id}``; ``(unmatched)`` for paths with no route);
- ``locky_login_failures_total{reason}``: ``credentials`` (each ``login.failed`` event:
  an unknown email, a wrong password or code) or ``locked`` (each ``login.locked``: too
  many failures);
- ``locky_decisions_total{resource, action, decision}``: every policy decision, with
  ``decision`` ``allowed`` or ``denied``. Resources and actions other than Locky's own
  (free strings that clients may ask ``/v1/internal/authz/check`` about) count as ``other``.

``/metrics`` is outside ``/v1`` and answers without a Locky login; set a scrape token to
require ``Authorization: Bearer <token>``::

    [plugins.metrics]
    token = "a long random string"

Several worker processes: each keeps its own numbers, so a scrape would see one worker's
share. Set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory before ``locky serve`` (the
standard prometheus-client multi-process mode) and ``/metrics`` adds up every worker's.
"""

from __future__ import annotations

import hmac
import os
import time

import falcon
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder

from locky import Operation, Route, hookimpl

__all__ = ["Metrics"]

STATE = "metrics"
RESOURCES = frozenset({"users", "groups", "members", "roles", "sessions", "authz"})
ACTIONS = frozenset({"read", "create", "update", "delete", "write"})


class Metrics:
    """One app's metrics, in a registry of its own (two apps in a process share nothing)."""

    def __init__(self):
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("locky_http_requests", "HTTP requests answered, by route and status.",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("locky_http_request_duration_seconds", "Time to answer a request, by route.",
                                 ["method", "route"], registry=self.registry)
        self.login_failures = Counter("locky_login_failures", "Failed logins, by reason.",
                                      ["reason"], registry=self.registry)
        self.decisions = Counter("locky_decisions", "Policy decisions, allowed or denied.",
                                 ["resource", "action", "decision"], registry=self.registry)

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The body and its content type, in the format the scraper accepts."""
        encode, content_type = choose_encoder(accept or "")
        registry = self.registry
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        return encode(registry), content_type


def _metrics(context) -> Metrics:
    """The app's metrics, made once (at startup, by ``locky_routes``)."""
    metrics = context.state.get(STATE)
    if metrics is None:
        metrics = context.state[STATE] = Metrics()
    return metrics


class MetricsMiddleware:
    """Counts and times every request by its route template."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def process_request(self, req, resp) -> None:
        req.context.metrics_started = time.perf_counter()

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        started = getattr(req.context, "metrics_started", None)
        if started is None:
            return
        route = req.uri_template or "(unmatched)"
        method = req.method if req.method in falcon.COMBINED_METHODS else "OTHER"
        self.metrics.requests.labels(method, route, str(resp.status_code)).inc()
        self.metrics.latency.labels(method, route).observe(time.perf_counter() - started)


class MetricsEndpoint:
    """``GET /metrics``: public (see its route); a scraper may use the scrape token."""

    def __init__(self, metrics: Metrics, token: str | None):
        self.metrics, self.token = metrics, token

    def on_get(self, req, resp):
        if self.token:
            given = (req.get_header("Authorization") or "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                raise falcon.HTTPUnauthorized(description="The scrape token is missing or wrong.",
                                              challenges=["Bearer"])
        resp.data, resp.content_type = self.metrics.exposition(req.get_header("Accept"))


@hookimpl
def locky_add_settings(settings):
    """``[plugins.metrics]`` (not named after the plugin, so declared)."""
    settings.add_table("metrics", {"token": "the bearer token a scrape must send (none: /metrics is open)"})


@hookimpl
def locky_routes(context):
    token = context.settings.extra.get("metrics", {}).get("token")
    endpoint = MetricsEndpoint(_metrics(context), str(token) if token else None)
    # Public: Locky's bearer tokens are for users; a scraper may use the scrape token.
    operation = Operation("get", "Prometheus metrics", "metrics", public=True)
    # Outside /v1 and the Swagger document: it is for the scraper, not API clients.
    return [Route("/metrics", endpoint, (operation,), in_spec=False)]


@hookimpl
def locky_middleware(context):
    return [MetricsMiddleware(_metrics(context))]


@hookimpl
def locky_event(event, context):
    if event.name in ("login.failed", "login.locked"):
        _metrics(context).login_failures.labels("locked" if event.name == "login.locked" else "credentials").inc()


@hookimpl
def locky_decision(context, identity, resource, action, scope, allowed):
    _metrics(context).decisions.labels(
        resource if resource in RESOURCES else "other",
        action if action in ACTIONS else "other",
        "allowed" if allowed else "denied",
    ).inc()
