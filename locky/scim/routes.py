"""The SCIM 2.0 routes (docs/http/scim.md), mounted through ``locky_routes`` like the
OpenID provider's (a bundled plugin in ``DEFAULT_PLUGINS``; ``LOCKY_BLOCK_PLUGINS=
locky.scim.routes`` turns SCIM off). Outside ``/v1`` and the Swagger document (SCIM
JSON is described in its own page).

Falcon routes each request here; Locky's authentication has run (a bearer token of a
user or a machine client, except on the public discovery endpoints); the request is
served by the app's :class:`~locky.scim.protocol.ScimProtocol`.

``scim2-models`` builds its pydantic models when it is imported, which takes longer than
the rest of a worker's start (about a second): so the protocol, and the libraries with
it, load on an app's first SCIM request, once, and an app nobody provisions never loads
them. Whether they are installed is checked when the routes are mounted, so that a
broken installation still stops startup; ``locky check`` loads them.
"""

from __future__ import annotations

import importlib.util
import threading

from locky.plugins import hookimpl
from locky.routes import Operation, Route
from locky.settings import SettingsError

from .error_bodies import PREFIX, ScimErrors

TAG = "scim"
#: What the protocol is built on (pyproject.toml's dependencies).
LIBRARIES = ("scim2_models", "scim2_server")


class LazyProtocol:
    """An app's :class:`~locky.scim.protocol.ScimProtocol`, made on first use: every SCIM
    endpoint of the app shares it."""

    def __init__(self, context):
        self.context = context
        self._protocol = None
        self._lock = threading.Lock()

    def get(self):
        protocol = self._protocol
        if protocol is None:
            with self._lock:  # requests arriving together build it once
                if self._protocol is None:
                    from .protocol import ScimProtocol

                    self._protocol = ScimProtocol(self.context)
                protocol = self._protocol
        return protocol


class ScimEndpoint:
    """The route classes below only say which methods each path has (Falcon answers 405
    to the others); every request is the shared protocol's."""

    def __init__(self, protocol: LazyProtocol):
        self.protocol = protocol

    def serve(self, req, resp) -> None:
        self.protocol.get().serve(req, resp)


class Discovery(ScimEndpoint):
    def on_get(self, req, resp, **params):
        self.serve(req, resp)


class Collection(ScimEndpoint):
    def on_get(self, req, resp, **params):
        self.serve(req, resp)

    def on_post(self, req, resp, **params):
        self.serve(req, resp)


class Root(ScimEndpoint):
    def on_get(self, req, resp, **params):
        self.serve(req, resp)


class Item(ScimEndpoint):
    def on_get(self, req, resp, **params):
        self.serve(req, resp)

    def on_put(self, req, resp, **params):
        self.serve(req, resp)

    def on_patch(self, req, resp, **params):
        self.serve(req, resp)

    def on_delete(self, req, resp, **params):
        self.serve(req, resp)


class Search(ScimEndpoint):
    def on_post(self, req, resp, **params):
        self.serve(req, resp)


def _public(summary: str) -> Operation:
    return Operation("get", summary, TAG, public=True)


def _op(method: str, summary: str, status: int = 200) -> Operation:
    return Operation(method, summary, TAG, status=status)


@hookimpl
def locky_add_settings(settings):
    """``locky check`` loads the SCIM protocol, as a worker's first SCIM request would."""
    settings.add_check(check_protocol)


def check_protocol(settings) -> None:
    """Raise :class:`SettingsError` when SCIM's libraries are missing or do not load
    (a version Locky does not work with), instead of the first SCIM request failing."""
    _require_libraries()
    try:
        importlib.import_module("locky.scim.protocol")  # what a first request imports
        importlib.import_module("locky.scim.discovery").provider()
    except Exception as error:
        raise SettingsError(f"SCIM does not load ({type(error).__name__}: {error}): reinstall Locky with its"
                            " dependencies (pip install locky), or turn SCIM off"
                            " (LOCKY_BLOCK_PLUGINS=locky.scim.routes)") from None


def _require_libraries() -> None:
    missing = [name for name in LIBRARIES if importlib.util.find_spec(name) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise SettingsError(f"SCIM needs {' and '.join(missing)}, which {verb} not installed: reinstall Locky"
                            " (pip install locky), or turn SCIM off (LOCKY_BLOCK_PLUGINS=locky.scim.routes)")


@hookimpl
def locky_routes(context):
    _require_libraries()
    protocol = LazyProtocol(context)
    discovery = Discovery(protocol)
    routes = [
        Route(f"{PREFIX}/ServiceProviderConfig", discovery, (_public("SCIM service provider configuration"),),
              in_spec=False),
        Route(f"{PREFIX}/ResourceTypes", discovery, (_public("SCIM resource types"),), in_spec=False),
        Route(f"{PREFIX}/ResourceTypes/{{resource_id}}", Discovery(protocol), (_public("One SCIM resource type"),),
              in_spec=False),
        Route(f"{PREFIX}/Schemas", discovery, (_public("SCIM schemas"),), in_spec=False),
        Route(f"{PREFIX}/Schemas/{{resource_id}}", Discovery(protocol), (_public("One SCIM schema"),),
              in_spec=False),
    ]
    routes += [
        Route(PREFIX, Root(protocol), (_op("get", "Search users and groups together"),), in_spec=False),
        Route(f"{PREFIX}/.search", Search(protocol), (
            _op("post", "Search users and groups together with a SearchRequest body"),
        ), in_spec=False),
    ]
    for endpoint, kind in (("Users", "user"), ("Groups", "group")):
        routes += [
            Route(f"{PREFIX}/{endpoint}", Collection(protocol), (
                _op("get", f"Search {kind}s (filter, sort, page)"),
                _op("post", f"Create a {kind}", 201),
            ), in_spec=False),
            Route(f"{PREFIX}/{endpoint}/.search", Search(protocol), (
                _op("post", f"Search {kind}s with a SearchRequest body"),
            ), in_spec=False),
            Route(f"{PREFIX}/{endpoint}/{{resource_id}}", Item(protocol), (
                _op("get", f"Read a {kind}"),
                _op("put", f"Replace a {kind}"),
                _op("patch", f"Modify a {kind}"),
                _op("delete", f"Delete a {kind} (soft)", 204),
            ), in_spec=False),
        ]
    return routes


@hookimpl
def locky_middleware(context):
    return [ScimErrors()]
