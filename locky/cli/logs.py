"""One log format for the operator's commands and ``locky serve``: JSON lines on stderr.

Every record (Locky's, a plugin's, gunicorn's boot and error lines) is one JSON object
with ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message`` (and ``exception``
when one is logged); ``locky serve`` hands gunicorn's loggers the same formatter
(``locky.cli.server.GunicornLogger``). The access log's records are JSON objects
already (see ``locky.http.middleware``): they are written as they are, with ``time`` and
``level`` added.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import datetime, timezone

import orjson

ACCESS_LOGGER = "locky.access"
#: As the access lines (orjson): no spaces.
COMPACT = (",", ":")


def utc_stamp(seconds: float) -> str:
    """A log line's ``time``: UTC, ISO 8601 to the millisecond, ``Z`` for the zone."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def access_json(document: dict) -> str:
    """An access line's ``document`` as compact JSON text (orjson; the json module for
    what orjson refuses: a path with a lone surrogate, which it escapes)."""
    try:
        return orjson.dumps(document).decode()
    except TypeError:
        return json.dumps(document, separators=COMPACT)


def _headed(head: str, document: str) -> str:
    """The JSON object ``document`` (its text) with ``head``, the text of an object's
    first members left open (``{"time":...,"level":...``), spliced in front."""
    inner = document[1:-1]
    return head + ("," + inner if inner else "") + "}"


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        head = {"time": utc_stamp(record.created), "level": record.levelname}
        if record.name == ACCESS_LOGGER and message.startswith("{") and message.endswith("}"):
            # Already a JSON object: splice the head in rather than parse it again.
            return _headed(json.dumps(head, separators=COMPACT)[:-1], message)
        line = {**head, "logger": record.name, "message": message}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=COMPACT)


class JsonLineHandler(logging.StreamHandler):
    """A stream handler of :class:`JsonFormatter` lines that also takes access lines
    straight from the middleware (:meth:`write_access_line`), skipping the ``LogRecord``
    (its caller lookup), the formatter and a second JSON encoding: ~20 µs a request.

    Made without a stream, it writes to whatever ``sys.stderr`` is when a line is
    written, not to the stream of the moment it was made: a caller that swaps
    ``sys.stderr`` (a test capturing a command's output, an embedding application) never
    leaves a background thread writing into a stream closed since."""

    def __init__(self, stream=None) -> None:
        logging.Handler.__init__(self)
        self._stream = stream

    @property
    def stream(self):
        return sys.stderr if self._stream is None else self._stream

    @stream.setter
    def stream(self, value) -> None:
        self._stream = value

    def write_access_line(self, document: dict) -> None:
        """Write ``document`` as the access log line :class:`JsonFormatter` would."""
        line = _headed(f'{{"time":"{utc_stamp(time.time())}","level":"INFO"', access_json(document))
        line += self.terminator
        with self.lock:
            try:
                self.stream.write(line)
                self.flush()
            except Exception:  # as logging.Handler.emit: a broken stream never fails a request
                self.handleError(logging.makeLogRecord({"msg": line}))


def json_handler() -> logging.Handler:
    """A stderr handler writing :class:`JsonFormatter` lines."""
    handler = JsonLineHandler()
    handler.setFormatter(JsonFormatter())
    return handler


def configure_logging(level: str = "INFO") -> None:
    """Send Locky's loggers (``locky``, its plugins' ``locky.*``, the access log) and
    Python's warnings to stderr as JSON lines."""
    access = logging.getLogger(ACCESS_LOGGER)
    access.handlers[:] = [json_handler()]
    access.propagate = False
    access.setLevel(level)
    root = logging.getLogger("locky")
    root.handlers[:] = [json_handler()]
    root.setLevel(level)
    # Python's warnings (a library's DeprecationWarning) as JSON lines too.
    logging.captureWarnings(True)
    warnings = logging.getLogger("py.warnings")
    warnings.handlers[:] = [json_handler()]
    warnings.propagate = False
