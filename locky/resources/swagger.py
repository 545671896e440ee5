"""The Swagger 2.0 document and the Swagger UI, served from files inside the package."""

from __future__ import annotations

import json
from pathlib import Path

import falcon

from locky.http.middleware import JSON_UTF8
from locky.routes import Operation, Route

STATIC = Path(__file__).resolve().parent.parent / "static" / "swagger"
ASSET_TYPES = {".js": "application/javascript", ".css": "text/css", ".png": "image/png", ".html": "text/html; charset=utf-8"}


class SwaggerDocument:
    """The document, written out on its first request and kept: most apps (a worker, a
    command, a test) never serve it, and writing it costs as much as building the app."""

    def __init__(self, document: dict):
        self.document = document
        self._body: bytes | None = None

    @property
    def body(self) -> bytes:
        if self._body is None:
            self._body = json.dumps(self.document, indent=2).encode()
        return self._body

    def on_get(self, req, resp):
        resp.content_type = JSON_UTF8
        resp.data = self.body


class SwaggerUI:
    """``/swagger/index.html`` and its assets; nothing is fetched from the network."""

    def on_get(self, req, resp):
        raise falcon.HTTPMovedPermanently("/swagger/index.html")

    def on_get_file(self, req, resp, name: str):
        path = STATIC / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise falcon.HTTPNotFound()
        resp.content_type = ASSET_TYPES.get(path.suffix, "application/octet-stream")
        resp.data = path.read_bytes()
        resp.cache_control = ["public", "max-age=3600"] if path.suffix != ".html" else ["no-store"]


def routes(document: dict) -> list[Route]:
    ui = SwaggerUI()
    return [
        Route("/swagger/doc.json", SwaggerDocument(document),
              (Operation("get", "Swagger document", "meta", public=True),), in_spec=False),
        Route("/swagger", ui, (Operation("get", "Swagger UI", "meta", public=True),), in_spec=False),
        Route("/swagger/{name}", ui, (Operation("get", "Swagger UI file", "meta", public=True),),
              suffix="file", in_spec=False),
    ]
