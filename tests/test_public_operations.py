"""Whether an operation is public is declared once, on its route's ``Operation``, and
both the authentication middleware and the Swagger document read that declaration.

- a plugin's route declared public answers without a token; one not declared public
  answers 401 without one (and 200 with one);
- a method the resource implements but the route does not declare public needs a token
  (fail closed), whatever other methods of the route are public;
- for every (route, method) the real Falcon router serves, a request without a token is
  refused with 401 exactly when the Swagger document gives the operation ``security``.
"""

from __future__ import annotations

import re

import pytest

from locky import Operation, Route, hookimpl

PUBLIC_PROBE = "/v1/public/probe"
PRIVATE_PROBE = "/v1/internal/probe"
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


class Probe:
    """Answers who called, or ``None`` for an anonymous caller."""

    def on_get(self, req, resp):
        identity = getattr(req.context, "identity", None)
        resp.media = {"caller": identity.user.email if identity else None}

    def on_post(self, req, resp):
        # Implemented but never declared on the public route: must not be reachable anonymously.
        resp.media = {"caller": req.context.identity.user.email}


class ProbePlugin:
    @hookimpl
    def locky_routes(self, context):
        probe = Probe()
        return [
            Route(PUBLIC_PROBE, probe, (Operation("get", "A public probe", "probe", public=True),)),
            Route(PRIVATE_PROBE, Probe(), (
                Operation("get", "A private probe", "probe"),
                Operation("post", "A private probe", "probe"),
            )),
        ]


@pytest.fixture
def locky_plugins():
    return [ProbePlugin()]


def test_a_plugin_route_declared_public_answers_without_a_token(locky_client):
    result = locky_client.simulate_get(PUBLIC_PROBE)
    assert result.status_code == 200, result.text
    assert result.json == {"caller": None}


def test_a_plugin_route_not_declared_public_needs_a_token(locky_client, locky_user):
    refused = locky_client.simulate_get(PRIVATE_PROBE)
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    allowed = locky_client.simulate_get(PRIVATE_PROBE, headers=locky_user.headers)
    assert allowed.status_code == 200 and allowed.json == {"caller": locky_user.email}


def test_an_undeclared_method_of_a_public_route_needs_a_token(locky_client, locky_user):
    refused = locky_client.simulate_post(PUBLIC_PROBE, json={})
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    allowed = locky_client.simulate_post(PUBLIC_PROBE, json={}, headers=locky_user.headers)
    assert allowed.status_code == 200 and allowed.json == {"caller": locky_user.email}


def test_a_method_no_resource_implements_is_405_without_running_resource_code(locky_client):
    result = locky_client.simulate_delete(PUBLIC_PROBE)
    assert result.status_code == 405
    assert "GET" in result.headers["allow"]


def served(app) -> list[tuple[str, str]]:
    """Every (URI template, method) whose responder is the resource's own method."""
    found = []

    def walk(nodes):
        for node in nodes:
            if node.method_map:
                for method, responder in node.method_map.items():
                    if getattr(responder, "__self__", None) is node.resource:
                        found.append((node.uri_template, method))
            walk(node.children)

    walk(app._router._roots)
    return sorted(found)


def example_path(template: str) -> str:
    return re.sub(r"\{(\w+)(:[^}]*)?\}", lambda m: "index.html" if m.group(1) == "name" else "1", template)


def spec_path(template: str) -> str:
    path = re.sub(r"\{(\w+):[^}]*\}", r"{\1}", template)
    return path.removeprefix("/v1")


def test_swagger_security_agrees_with_authentication_for_every_served_operation(locky_app, locky_client):
    document = locky_client.simulate_get("/swagger/doc.json").json
    checked = 0
    for template, method in served(locky_app):
        result = locky_client.simulate_request(method, example_path(template), json={})
        refused = result.status_code == 401
        if template.startswith("/v1/"):
            # HEAD is GET without the body: exactly as open as the GET operation.
            operation = document["paths"][spec_path(template)].get("get" if method == "HEAD" else method.lower())
            if operation is None:  # served but declared nowhere (the probe's POST): closed
                assert refused, (method, template, result.status_code)
                continue
            assert ("security" in operation) == refused, (method, template, result.status_code)
            assert operation.get("security", [{"Bearer": []}]) == [{"Bearer": []}]
        elif template == "/oauth/userinfo":  # the OpenID provider's: RFC 6750's own 401 without a token
            assert refused and result.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
        elif template.startswith("/scim/v2"):  # SCIM: only its discovery documents are open
            discovery = template.removeprefix("/scim/v2/").split("/")[0] in (
                "ServiceProviderConfig", "ResourceTypes", "Schemas")
            assert refused == (not discovery), (method, template, result.status_code)
        else:  # the Swagger document and UI, the provider's routes: outside the document
            assert not refused, (method, template)
        checked += 1
    # Locky's own operations and the two probes' three are all there.
    assert checked >= 30
    assert ("/v1/public/probe", "GET") in served(locky_app)
    assert "security" not in document["paths"]["/public/probe"]["get"]
    assert document["paths"]["/internal/probe"]["get"]["security"] == [{"Bearer": []}]
