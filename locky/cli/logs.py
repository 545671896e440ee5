"""One log format for the operator's commands and ``locky serve``: JSON lines on stderr.

Every record (Locky's, a plugin's, gunicorn's boot and error lines) is one JSON object
with ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message`` (and ``exception``
when one is logged); ``locky serve`` hands gunicorn's loggers the same formatter
(``locky.cli.server.GunicornLogger``). The access log's records are JSON objects
already (see ``locky.middleware``): they are written as they are, with ``time`` and
``level`` added.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

ACCESS_LOGGER = "locky.access"
#: As the access lines (orjson): no spaces.
COMPACT = (",", ":")


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        stamp = datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds")
        head = {"time": stamp.replace("+00:00", "Z"), "level": record.levelname}
        if record.name == ACCESS_LOGGER and message.startswith("{") and message.endswith("}"):
            # Already a JSON object: splice the head in rather than parse it again.
            inner = message[1:-1]
            return json.dumps(head, separators=COMPACT)[:-1] + ("," + inner if inner else "") + "}"
        line = {**head, "logger": record.name, "message": message}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=COMPACT)


def json_handler() -> logging.Handler:
    """A stderr handler writing :class:`JsonFormatter` lines."""
    handler = logging.StreamHandler(sys.stderr)
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
