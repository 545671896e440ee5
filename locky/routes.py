"""The route table: each route's resource plus the Swagger description of its operations.

One declaration mounts the route on Falcon and writes its part of ``/swagger/doc.json``,
so the two cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from marshmallow import Schema

BASE_PATH = "/v1"
ID_PARAMETER = {
    "in": "path",
    "name": "id",
    "required": True,
    "type": "integer",
    "format": "int64",
    "minimum": 1,
    "maximum": 2**63 - 1,
    "description": "The record's id.",
}


@dataclass(frozen=True)
class Operation:
    """One HTTP method on a route, as the Swagger document shows it."""

    method: str
    summary: str
    tag: str
    status: int = 200
    response: type[Schema] | str | None = None
    body: type[Schema] | str | None = None
    query: type[Schema] | None = None
    public: bool = False
    errors: tuple[int, ...] = ()
    description: str = ""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    """A URI template, its Falcon resource and ``suffix``, and its operations."""

    path: str
    resource: Any
    operations: tuple[Operation, ...]
    suffix: str | None = None
    in_spec: bool = True

    @property
    def spec_path(self) -> str:
        """The Swagger path: relative to ``basePath``, ``{id:id}`` written ``{id}``."""
        path = re.sub(r"\{(\w+):[^}]*\}", r"{\1}", self.path)
        return path[len(BASE_PATH):] if path.startswith(BASE_PATH + "/") else path
