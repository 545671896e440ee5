"""A tiny JSON-over-HTTP client for the Locky API, on :mod:`urllib.request`.

Requests send and receive JSON; an optional bearer token goes in ``Authorization``.
Any non-2xx answer raises :class:`ApiError` carrying the status and the server's
message; a server that cannot be reached raises :class:`ConnectionFailed` naming
the URL that was tried.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping

DEFAULT_TIMEOUT = 30.0
USER_AGENT = "locky-clients"


class ClientError(Exception):
    """Base of every error the clients report: the message is shown to the user."""


class ConnectionFailed(ClientError):
    """The server did not answer at all (refused, unknown host, timeout)."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"cannot connect to {url}: {reason}")
        self.url = url
        self.reason = reason


class ApiError(ClientError):
    """The server answered with an error status.

    ``body`` is the decoded JSON error body (or ``None``); ``message`` is a one-line
    rendering of it: ``field: message`` pairs for a 400, else ``title: description``.
    """

    def __init__(self, status: int, body: Any = None, reason: str = "", headers: Mapping[str, str] | None = None):
        self.status = status
        self.body = body
        self.headers = {str(k).lower(): v for k, v in (headers or {}).items()}
        self.message = _render_error(status, body, reason)
        retry = self.headers.get("retry-after")
        suffix = f" (retry after {retry} s)" if status == 429 and retry else ""
        super().__init__(f"{status}: {self.message}{suffix}")


def _render_error(status: int, body: Any, reason: str) -> str:
    if isinstance(body, dict) and body:
        if status == 400 or "title" not in body:
            return "; ".join(f"{key}: {_one_line(value)}" for key, value in sorted(body.items()))
        title = _one_line(body.get("title") or reason)
        title = title.removeprefix(f"{status} ") or title  # Falcon titles read "404 Not Found"
        description = body.get("description")
        return f"{title}: {_one_line(description)}" if description else title
    return reason or "error"


def _one_line(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return " ".join(text.split())


class HttpClient:
    """JSON calls against one base URL (``http://host:port``; paths start with ``/v1``)."""

    def __init__(self, base_url: str, timeout: float = DEFAULT_TIMEOUT, user_agent: str = USER_AGENT):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.user_agent = user_agent

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        url = self.base_url + path
        pairs = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        return f"{url}?{urllib.parse.urlencode(pairs)}" if pairs else url

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        token: str | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON body (``None`` for an empty one)."""
        url = self.url(path, query)
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json; charset=utf-8"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
        except ValueError as exc:  # not an http(s) URL at all
            raise ConnectionFailed(self.base_url, str(exc)) from None
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return _decode(response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                payload = _decode_error(exc.read())
            raise ApiError(exc.code, payload, exc.reason or "", exc.headers) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            text = getattr(reason, "strerror", None) or str(reason)
            raise ConnectionFailed(self.base_url, text) from None
        except (socket.timeout, TimeoutError):
            raise ConnectionFailed(self.base_url, f"no answer within {self.timeout:g} s") from None
        except OSError as exc:  # connection reset, remote end closed, ...
            raise ConnectionFailed(self.base_url, exc.strerror or str(exc) or type(exc).__name__) from None
        except http.client.HTTPException as exc:  # not speaking HTTP at all
            raise ConnectionFailed(self.base_url, f"bad HTTP answer ({type(exc).__name__})") from None


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _decode(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise ClientError("the server answered with a body that is not JSON") from None


def _decode_error(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return None
