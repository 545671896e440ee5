"""Reading request bodies and query strings into validated dicts, with the contract's errors.

A body must be ``application/json`` (else 415), at most ``max_body_bytes`` (else
413), UTF-8 JSON holding one object with no duplicate keys (else 400 ``{"body": ...}``).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

import falcon
from marshmallow import Schema, ValidationError

from locky.errors import Invalid


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"Duplicate key {key!r}.")
        result[key] = value
    return result


#: Text no database stores faithfully: NUL (PostgreSQL refuses it in text) and unpaired
#: surrogates (JSON escapes such as \ud800, which have no UTF-8 encoding).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
UNSTORABLE_TEXT = "Must not contain NUL characters or unpaired surrogates."


def holds_unstorable(value: Any) -> bool:
    """Whether any string in ``value`` holds unstorable text; a loop, not recursion, so
    nesting as deep as the JSON parser allows cannot exhaust the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if UNSTORABLE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON.")


def _stream(req: falcon.Request):
    """The body stream. ``bounded_stream`` stops at Content-Length, which a chunked
    request has none of, so its body would read as empty; gunicorn de-chunks
    ``req.stream`` itself and ends it where the body ends."""
    if req.content_length is None and "chunked" in (req.get_header("Transfer-Encoding") or "").lower():
        return req.stream
    return req.bounded_stream


def _read(req: falcon.Request, size: int) -> bytes:
    """Up to ``size`` bytes of the body. The server's reader raises its own errors for a
    body the client framed wrongly (a bad chunk size, a missing CRLF, a connection closed
    mid-body: gunicorn's ``InvalidChunkSize``, ``NoMoreData`` ...); each is the client's
    fault, a 400, whichever server runs the app, so no type of one server is named here."""
    try:
        return _stream(req).read(size)
    except Exception:
        raise Invalid.one("body", "The body could not be read: malformed chunked encoding or an incomplete body.") from None


def read_json(req: falcon.Request, max_bytes: int) -> dict[str, Any]:
    """The request body as a dict, or the contract's 400/413/415."""
    media_type = (req.content_type or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        # 415 is for a body of another type; no body at all is a missing JSON object.
        if not _read(req, 1):
            raise Invalid.one("body", "A JSON object is required.")
        raise falcon.HTTPUnsupportedMediaType(description="Send the body as application/json.")
    length = req.content_length
    if length is not None and length > max_bytes:
        raise falcon.HTTPContentTooLarge(description=f"The body is larger than {max_bytes} bytes.")
    raw = _read(req, max_bytes + 1)
    if len(raw) > max_bytes:
        raise falcon.HTTPContentTooLarge(description=f"The body is larger than {max_bytes} bytes.")
    if not raw.strip():
        raise Invalid.one("body", "A JSON object is required.")
    try:
        text = raw.decode("utf-8")
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise Invalid.one("body", "The body is not valid UTF-8.") from None
    except RecursionError:
        raise Invalid.one("body", "The body is nested too deeply.") from None
    except ValueError as exc:
        message = str(exc) if str(exc).startswith("Duplicate key") else "The body is not valid JSON."
        raise Invalid.one("body", message) from None
    if not isinstance(data, dict):
        raise Invalid.one("body", "The body must be a JSON object.")
    # A NUL or a lone surrogate can only come from a \u escape: the parser refuses raw
    # control characters in strings, and UTF-8 decoding refuses encoded surrogates.
    if "\\u" in text:
        for key, value in data.items():
            if holds_unstorable(key) or holds_unstorable(value):
                raise Invalid.one("body" if holds_unstorable(key) else key, UNSTORABLE_TEXT)
    return data


def first_message(messages: Any) -> str:
    """The first leaf message of marshmallow's nested error structure."""
    while isinstance(messages, (list, dict)):
        if not messages:
            return "Invalid value."
        messages = messages[0] if isinstance(messages, list) else next(iter(messages.values()))
    return str(messages)


def load(schema: Schema, data: Any, partial: bool = False) -> dict[str, Any]:
    """Validate ``data`` with ``schema``; errors become a one-message-per-field 400."""
    try:
        return schema.load(data, partial=partial)
    except ValidationError as exc:
        messages = exc.messages if isinstance(exc.messages, dict) else {"body": exc.messages}
        raise Invalid({field: first_message(value) for field, value in messages.items()}) from None


def load_query(schema: Schema, req: falcon.Request) -> dict[str, Any]:
    """Validate the query string; repeated parameters are errors."""
    params: dict[str, Any] = {}
    for key, value in req.params.items():
        if isinstance(value, list):
            raise Invalid.one(key, "Give this parameter once.")
        if holds_unstorable(key) or holds_unstorable(value):
            raise Invalid.one("query" if holds_unstorable(key) else key, UNSTORABLE_TEXT)
        params[key] = value
    return load(schema, params)


class QueryLoader:
    """:func:`load_query` for one schema, remembering what the last query strings (up to
    ``size`` of at most ``longest`` characters) loaded to: a list or a check asked with the
    same query again and again (a poller, a gateway) skips marshmallow. Only loads that
    succeeded are kept; each call gets a copy of its own."""

    def __init__(self, schema: Schema, size: int = 1024, longest: int = 512):
        self.schema = schema
        self.size = size
        self.longest = longest
        self._loaded: dict[str, dict[str, Any]] = {}

    def __call__(self, req: falcon.Request) -> dict[str, Any]:
        text = req.query_string
        found = self._loaded.get(text)
        if found is None:
            found = load_query(self.schema, req)
            if len(text) <= self.longest:
                if len(self._loaded) >= self.size:
                    self._loaded.clear()
                self._loaded[text] = found
        return dict(found)


FORM = "application/x-www-form-urlencoded"


def read_form_pairs(req: falcon.Request, max_bytes: int) -> list[tuple[str, str]]:
    """An ``application/x-www-form-urlencoded`` body as its ``(name, value)`` pairs in
    order, repeated names kept (OAuth 2 refuses a repeated parameter itself, with its
    own error); 413 past ``max_bytes``, :class:`~locky.errors.Invalid` for a body that
    is no form. The caller checks the media type."""
    raw = _read(req, max_bytes + 1)
    if len(raw) > max_bytes:
        raise falcon.HTTPContentTooLarge(description=f"The body is larger than {max_bytes} bytes.")
    try:
        return parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(raw.strip()),
                         max_num_fields=100)
    except UnicodeDecodeError:
        raise Invalid.one("body", "The body is not valid UTF-8.") from None
    except ValueError:
        raise Invalid.one("body", "The body is not a valid form.") from None


def read_json_or_form(req: falcon.Request, max_bytes: int) -> dict[str, Any]:
    """A body as JSON (as :func:`read_json`) or as an HTML form, as OAuth's token
    introspection and revocation are sent (RFC 7662, RFC 7009): each field once."""
    media_type = (req.content_type or "").split(";", 1)[0].strip().lower()
    if media_type != FORM:
        return read_json(req, max_bytes)
    pairs = read_form_pairs(req, max_bytes)
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise Invalid.one(key, "Give this field once.")
        if holds_unstorable(key) or holds_unstorable(value):
            raise Invalid.one("body" if holds_unstorable(key) else key, UNSTORABLE_TEXT)
        data[key] = value
    return data
