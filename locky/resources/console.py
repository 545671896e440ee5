"""The admin console (docs/http/console.md): a single-page app served from files inside the
package, under a strict Content-Security-Policy.

The files are read once, when the app is built, into a table keyed by file name: a
request names an entry of that table or gets a 404, so no path the client writes
ever reaches the file system (no traversal, encoded or not).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import falcon

from locky.routes import Operation, Route

FILES = Path(__file__).resolve().parent.parent / "console"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
# The console runs only its own files and talks only to this service: no inline
# script or style, no other origin, no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}
INDEX = "index.html"


class ConsoleFile:
    """One shipped file: its bytes, content type and validator."""

    def __init__(self, path: Path):
        self.data = path.read_bytes()
        self.content_type = CONTENT_TYPES[path.suffix]
        self.etag = hashlib.sha256(self.data).hexdigest()[:32]
        # The page itself is never stored; its assets are revalidated on every use (they
        # carry no version in their names), which costs a 304 once the ETag matches.
        self.cache_control = ["no-store"] if path.name == INDEX else ["no-cache"]


@functools.cache
def load(directory: Path = FILES) -> dict[str, ConsoleFile]:
    """The servable files of ``directory`` by name (known types only, no hidden files),
    read once per process: every app built in it serves the same shipped files."""
    return {path.name: ConsoleFile(path) for path in sorted(directory.iterdir())
            if path.is_file() and not path.name.startswith(".") and path.suffix in CONTENT_TYPES}


class Console:
    """``/console`` and ``/console/`` answer the page; ``/console/{name}`` its files."""

    def __init__(self, files: dict[str, ConsoleFile] | None = None):
        self.files = load() if files is None else files

    def on_get(self, req, resp):
        self._send(req, resp, INDEX)

    def on_get_file(self, req, resp, name: str):
        self._send(req, resp, name)

    def _send(self, req, resp, name: str) -> None:
        resp.set_headers(HEADERS)
        found = self.files.get(name)
        if found is None:
            raise falcon.HTTPNotFound(description="No such console file.")
        resp.cache_control = found.cache_control
        resp.etag = found.etag
        if name != INDEX and found.etag in (req.if_none_match or ()):
            resp.status = falcon.HTTP_304
            return
        resp.content_type = found.content_type
        resp.data = found.data


def routes() -> list[Route]:
    console = Console()
    return [
        Route("/console", console, (Operation("get", "Admin console", "meta", public=True),), in_spec=False),
        Route("/console/{name}", console, (Operation("get", "Admin console file", "meta", public=True),),
              suffix="file", in_spec=False),
    ]
