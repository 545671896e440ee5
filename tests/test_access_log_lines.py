"""The access log's direct path (``JsonLineHandler.write_access_line``) writes exactly the
line the logging path (a record through ``JsonFormatter``) writes, and is only taken
when Locky's JSON handler alone takes the access log's lines."""

from __future__ import annotations

import io
import json
import logging

import pytest

from locky.cli.logs import ACCESS_LOGGER, JsonFormatter, access_json, json_handler
from locky.http.middleware import direct_access_writer

DOCUMENTS = [
    {"method": "GET", "path": "/v1/internal/users", "status": 200, "duration_ms": 0.25,
     "request_id": "r-1", "ip": "127.0.0.1", "user": "7c4a3b6e-0b4c-4f5e-9d7a-1c2b3d4e5f60"},
    {"method": "GET", "path": "/v1/\u00fc/\U0001f600/\"quoted\"", "status": 404, "duration_ms": 1, "request_id": "r",
     "ip": "", "user": None},
    {"method": "GET", "path": "/v1/\udcff", "status": 404, "duration_ms": 0.0, "request_id": "r", "ip": "::1",
     "user": None},  # a lone surrogate: orjson refuses it, the json module escapes it
    {},
]


def without_time(line: str) -> dict:
    document = json.loads(line)
    assert document.pop("time").endswith("Z")
    return document


@pytest.mark.parametrize("document", DOCUMENTS)
def test_direct_lines_equal_the_formatters(document):
    handler = json_handler()
    handler.stream = direct = io.StringIO()
    handler.write_access_line(document)
    logged = io.StringIO()
    plain = logging.StreamHandler(logged)
    plain.setFormatter(JsonFormatter())
    message = access_json(document)  # as the middleware's logging path
    plain.emit(logging.makeLogRecord({"name": ACCESS_LOGGER, "levelname": "INFO", "levelno": logging.INFO,
                                      "msg": message}))
    (line,), (expected,) = direct.getvalue().splitlines(), logged.getvalue().splitlines()
    assert without_time(line) == without_time(expected)
    assert list(json.loads(line)) == list(json.loads(expected))  # same key order: time, level, ...
    assert list(json.loads(line))[:2] == ["time", "level"] and json.loads(line)["level"] == "INFO"


def test_the_direct_path_is_taken_only_for_lockys_own_handler(monkeypatch):
    logger = logging.getLogger(ACCESS_LOGGER)
    handler = json_handler()
    monkeypatch.setattr(logger, "handlers", [handler])
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "filters", [])
    assert direct_access_writer() == handler.write_access_line
    monkeypatch.setattr(logger, "propagate", True)  # the embedding app's root handlers want records
    assert direct_access_writer() is None
    monkeypatch.setattr(logger, "propagate", False)
    handler.addFilter(lambda record: True)
    assert direct_access_writer() is None
    handler.filters.clear()
    handler.setLevel(logging.WARNING)
    assert direct_access_writer() is None
    handler.setLevel(logging.NOTSET)
    monkeypatch.setattr(logger, "handlers", [handler, logging.StreamHandler(io.StringIO())])
    assert direct_access_writer() is None
    monkeypatch.setattr(logger, "handlers", [logging.StreamHandler(io.StringIO())])
    assert direct_access_writer() is None


def test_a_broken_stream_does_not_fail_the_request(monkeypatch):
    class Broken(io.StringIO):
        def write(self, text):
            raise OSError("gone")

    handler = json_handler()
    handler.stream = Broken()
    monkeypatch.setattr(logging, "raiseExceptions", False)
    handler.write_access_line(DOCUMENTS[0])  # no exception


def test_the_handler_follows_stderr_as_it_is_now(monkeypatch):
    """A thread logging after ``sys.stderr`` was swapped (a captured command's output
    closed since) writes to the stderr of now, not into the closed stream."""
    handler = json_handler()
    first = io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    handler.handle(logging.makeLogRecord({"name": "locky", "levelname": "WARNING", "msg": "one"}))
    first.close()
    second = io.StringIO()
    monkeypatch.setattr("sys.stderr", second)
    handler.handle(logging.makeLogRecord({"name": "locky", "levelname": "WARNING", "msg": "two"}))
    assert without_time(second.getvalue()) == {"level": "WARNING", "logger": "locky", "message": "two"}
