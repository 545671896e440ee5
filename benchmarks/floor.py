"""The database floor: bare Falcon on the same server as ``locky serve``, answering with
the one statement a read cannot do without, and nothing else.

``GET /user/{id}`` selects a user's row by id and ``GET /users`` a page of 50 users by
id (keyset, as Locky's lists), each row a JSON object: one round trip on one connection
kept open by the worker, in autocommit, no token, no session, no decision, no
middleware. On PostgreSQL the statement is prepared once per connection (``PREPARE``,
as Locky's reader does), the cheapest way psycopg2 has (docs/benchmarks.md).

Measured beside hello on the same server kind (``benchmarks.run``), its ratio is the
most any design can reach that asks the database once per request on that engine:
Locky's authorized reads add the token, the session check and the decision to it.

    python -m benchmarks.floor DATABASE_URL HOST PORT WORKERS
"""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

import falcon
import orjson

from .hello import serve

COLUMNS = "id, uuid, name, email, email_verified, disabled, mfa_enabled, created_at, updated_at"
BY_ID = f"SELECT {COLUMNS} FROM locky_users WHERE id = %s AND del_token = 0"
PAGE = f"SELECT {COLUMNS} FROM locky_users WHERE id > %s AND del_token = 0 ORDER BY id LIMIT 51"
NAMES = [name.strip() for name in COLUMNS.split(",")]
#: MySQL/MariaDB: the columns packed into one JSON array per row, as Locky's reader
#: selects them (PyMySQL decodes one value a row much faster than nine).
PACKED = ("JSON_ARRAY(id, CONVERT(uuid USING utf8mb4), CONVERT(name USING utf8mb4), CONVERT(email USING utf8mb4),"
          " email_verified, disabled, mfa_enabled, created_at, updated_at)")


class Rows:
    """One connection per worker process, and the two statements on it."""

    def __init__(self, url: str):
        self.url = url
        self.kind = url.split(":", 1)[0]
        self.connection = None
        self.cursor = None

    def _open(self):
        if self.kind == "sqlite":
            import sqlite3

            self.connection = sqlite3.connect(urlsplit(self.url).path, isolation_level=None,
                                              check_same_thread=False)
            self.cursor = self.connection.cursor()
            return
        from locky.testing.databases import connect

        self.connection = connect(self.url)
        self.cursor = self.connection.cursor()
        if self.kind.startswith("postgres"):
            self.cursor.execute(f"PREPARE floor_by_id (bigint) AS {BY_ID.replace('%s', '$1')}")
            self.cursor.execute(f"PREPARE floor_page (bigint) AS {PAGE.replace('%s', '$1')}")

    def select(self, name: str, sql: str, value: int) -> list[tuple]:
        if self.cursor is None:
            self._open()
        if self.kind.startswith("postgres"):
            self.cursor.execute(f"EXECUTE floor_{name} (%s)", (value,))
        elif self.kind == "sqlite":
            self.cursor.execute(sql.replace("%s", "?"), (value,))
        else:
            self.cursor.execute(sql.replace(COLUMNS, PACKED, 1), (value,))
            return [orjson.loads(row[0]) for row in self.cursor.fetchall()]
        return self.cursor.fetchall()


def _document(row: tuple) -> dict:
    return dict(zip(NAMES, (str(v) if not isinstance(v, (int, str)) else v for v in row)))


class User:
    def __init__(self, rows: Rows):
        self.rows = rows

    def on_get(self, req, resp, id: int):
        found = self.rows.select("by_id", BY_ID, id)
        if not found:
            raise falcon.HTTPNotFound()
        resp.data = orjson.dumps(_document(found[0]))
        resp.content_type = falcon.MEDIA_JSON


class Users:
    def __init__(self, rows: Rows):
        self.rows = rows

    def on_get(self, req, resp):
        found = self.rows.select("page", PAGE, req.get_param_as_int("after_id", default=0))
        page = [_document(row) for row in found[:50]]
        resp.data = orjson.dumps({"users": page, "next_after_id": page[-1]["id"] if len(found) > 50 else None})
        resp.content_type = falcon.MEDIA_JSON


def make_app(url: str) -> falcon.App:
    rows = Rows(url)
    app = falcon.App()
    app.add_route("/user/{id:int}", User(rows))
    app.add_route("/users", Users(rows))
    return app


def main(argv: list[str]) -> None:
    url, host, port, workers = argv[0], argv[1], int(argv[2]), int(argv[3])
    serve(lambda: make_app(url), host, port, workers)


if __name__ == "__main__":
    main(sys.argv[1:])
