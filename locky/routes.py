"""The route table: each route's resource plus the Swagger description of its operations.

One declaration mounts the route on Falcon, writes its part of ``/swagger/doc.json``
and says whether each operation is public (answered without credentials), so the
three cannot drift apart. :class:`Router` mounts it: wherever a route serves GET it
answers HEAD too (the same responder, headers without the body).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import falcon
from marshmallow import Schema

from locky.records import MAX_ID

BASE_PATH = "/v1"
#: The methods an :class:`Operation` may declare, as Swagger 2.0 writes them.
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
ID_PARAMETER = {
    "in": "path",
    "name": "id",
    "required": True,
    "type": "integer",
    "format": "int64",
    "minimum": 1,
    "maximum": MAX_ID,
    "description": "The record's id.",
}


@dataclass(frozen=True)
class Operation:
    """One HTTP method on a route, as the Swagger document shows it.

    ``public`` is the one place an operation is declared open to callers without
    credentials: Locky's authentication skips it and the Swagger document gives it no
    ``security``. Every other operation, and any method a route does not declare,
    needs an authenticated caller.
    """

    method: str
    summary: str
    tag: str
    status: int = 200
    response: type[Schema] | str | None = None
    body: type[Schema] | str | None = None
    #: Whether a request may leave the body out (then it is read as ``{}``).
    body_required: bool = True
    query: type[Schema] | None = None
    public: bool = False
    errors: tuple[int, ...] = ()
    description: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Swagger keys operations by the lowercase method; "POST" would reach apispec and
        # fail there, far from the route that declared it, so it is written as "post".
        method = self.method.lower() if isinstance(self.method, str) else self.method
        if method not in METHODS:
            raise ValueError(f"Operation({self.method!r}, {self.summary!r}): the method must be one of"
                             f" {', '.join(METHODS)} (any case)")
        object.__setattr__(self, "method", method)


@dataclass(frozen=True)
class Route:
    """A URI template, its Falcon resource and ``suffix``, and its operations.

    ``parameters`` describes a path parameter that is not a record's id (the Swagger
    parameter object, by name): ``{id}`` of a client may be its client_id."""

    path: str
    resource: Any
    operations: tuple[Operation, ...]
    suffix: str | None = None
    in_spec: bool = True
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def spec_path(self) -> str:
        """The Swagger path: relative to ``basePath``, ``{id:id}`` written ``{id}``. A path
        outside ``/v1`` (``/.well-known/jwks.json``) climbs out of it with a dot segment,
        ``/../.well-known/jwks.json``: Swagger 2.0 has one ``basePath`` for the whole
        document, and ``/v1/../.well-known/jwks.json`` resolves to the served path
        (RFC 3986, section 5.2.4), in Swagger UI's "Try it out" too."""
        path = re.sub(r"\{(\w+):[^}]*\}", r"{\1}", self.path)
        return path[len(BASE_PATH):] if path.startswith(BASE_PATH + "/") else "/.." + path


def public_requests(routes: Iterable[Route]) -> frozenset[tuple[str, str]]:
    """The requests answered without credentials, keyed as Falcon names a request:
    ``(req.uri_template, req.method)``, e.g. ``("/v1/public/users/login", "POST")``.

    Every operation declared ``public``, plus the methods a route's resource has no
    responder for: Falcon answers those itself (405, or the list of allowed methods
    for ``OPTIONS``) and runs no resource code. A method the resource implements but
    the route does not declare public needs credentials (fail closed).
    """
    found: set[tuple[str, str]] = set()
    for route in routes:
        found.update((route.path, op.method.upper()) for op in route.operations if op.public)
        # HEAD is GET without the body (Router): as open as GET, never more.
        found.update((route.path, "HEAD") for op in route.operations if op.public and op.method.upper() == "GET")
        suffix = f"_{route.suffix}" if route.suffix else ""
        found.update((route.path, method) for method in falcon.COMBINED_METHODS
                     if not _serves(route.resource, method, suffix))
    return frozenset(found)


def _serves(resource: Any, method: str, suffix: str) -> bool:
    """Whether ``resource`` has a responder for ``method`` once mounted by :class:`Router`."""
    if hasattr(resource, f"on_{method.lower()}{suffix}"):
        return True
    return method == "HEAD" and hasattr(resource, f"on_get{suffix}")


class Router(falcon.routing.CompiledRouter):
    """Falcon's router, answering HEAD wherever a route serves GET (RFC 9110 section
    9.3.2: the same status and headers, no body): Falcon calls the route's GET
    responder and drops the body itself for a HEAD request, keeping ``Content-Length``.
    Falcon answers 405 to HEAD on its own; ``map_http_methods`` is its documented
    seam for a different mapping. A resource's own ``on_head`` still wins."""

    def map_http_methods(self, resource: object, **kwargs: Any) -> dict[str, Any]:
        method_map = super().map_http_methods(resource, **kwargs)
        if "GET" in method_map and "HEAD" not in method_map:
            method_map["HEAD"] = method_map["GET"]
        return method_map
