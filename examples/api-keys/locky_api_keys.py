"""A second kind of credential beside JWTs: API keys that users issue for themselves.

Load it by module name (``LOCKY_PLUGINS=locky_api_keys`` with this folder on
``PYTHONPATH``). It adds three routes and one authentication hook:

- ``POST /v1/private/api-keys`` ``{"name"}``: issue a key for the caller. The answer is
  the only time the key is shown: ``{"id", "name", "key", "prefix", "created_at"}``.
- ``GET /v1/internal/api-keys``: the caller's live keys (never the secret).
- ``DELETE /v1/private/api-keys/{id}``: revoke one of the caller's keys.
- ``locky_authenticate``: a request carrying ``Authorization: Bearer lk_...`` is ours.
  A good key authenticates as its user (``Identity.scheme == "api-key"``, no session);
  a bad, revoked or malformed one, or one whose user was deleted, is a 401. Anything
  else (a JWT) is not ours: we return ``None`` and the token backend gets it.

Where the keys live, and why: Locky's ``Storage`` protocol has no generic table for
plugins, and a plugin must not reach into the storage provider's database. So the keys
are kept by this plugin's own :class:`KeyStore`: a SQLite file of its own (``sqlite3``
from the standard library) named by ``[plugins.api_keys] path`` in the TOML settings or
``LOCKY_API_KEYS_DB``; default: beside Locky's SQLite database, else in memory (for
tests). SQLite works for several worker processes of one host; for several hosts, put
the same four methods on your shared database.

Only a SHA-256 digest of each key's secret is stored. Keys carry 256 random bits, so a
slow password hash would add nothing but latency; a lookup is by the key's public id,
then a constant-time comparison of digests.

Policy: issuing and revoking a key changes the caller's own account, so it needs
``users``/``update`` (resp. ``delete``) on their own record (``own=True``), which the
default policy gives every user. A request authenticated *by an API key* cannot issue
further keys (403): a leaked key must not mint more.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime, timezone

import falcon
from marshmallow import Schema, fields, validate

from locky import (
    Forbidden,
    Identity,
    NotFound,
    Operation,
    Route,
    SettingsError,
    Unauthorized,
    hookimpl,
    load,
    read_json,
)

PREFIX = "lk_"
SCHEME = "api-key"
STATE = "api_keys"
RFC3339 = "%Y-%m-%dT%H:%M:%S.%fZ"  # as Locky writes timestamps; values are UTC


@dataclass(frozen=True)
class ApiKey:
    id: int
    public_id: str
    user_uuid: str
    name: str
    created_at: datetime

    @property
    def prefix(self) -> str:
        return f"{PREFIX}{self.public_id}"


class KeyStore:
    """The plugin's own table of keys: ``(id, public_id, user_uuid, name, digest, created_at, revoked)``."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        if path != ":memory:":
            # The digests of every key: readable by the service's user alone, whatever the
            # umask (SQLite gives its -wal and -shm files the database file's mode).
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600))
            os.chmod(path, 0o600)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        if path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")  # readers beside another worker's writer
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS api_keys ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT, public_id TEXT NOT NULL UNIQUE,"
            " user_uuid TEXT NOT NULL, name TEXT NOT NULL, digest TEXT NOT NULL,"
            " created_at TEXT NOT NULL, revoked INTEGER NOT NULL DEFAULT 0)"
        )

    @staticmethod
    def _key(row) -> ApiKey:
        return ApiKey(id=row[0], public_id=row[1], user_uuid=row[2], name=row[3],
                      created_at=datetime.fromisoformat(row[4]))

    def issue(self, user_uuid: str, name: str) -> tuple[ApiKey, str]:
        """A new key for the user and its full text (shown once)."""
        public_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        created = datetime.now(timezone.utc)
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO api_keys (public_id, user_uuid, name, digest, created_at) VALUES (?, ?, ?, ?, ?)",
                (public_id, user_uuid, name, _digest(secret), created.isoformat()),
            )
        key = ApiKey(id=cursor.lastrowid, public_id=public_id, user_uuid=user_uuid, name=name, created_at=created)
        return key, f"{PREFIX}{public_id}_{secret}"

    def check(self, text: str) -> str | None:
        """The user uuid of a live key, or ``None``."""
        public_id, _, secret = text[len(PREFIX):].partition("_")
        if not public_id or not secret:
            return None
        with self._lock:
            row = self._db.execute(
                "SELECT user_uuid, digest FROM api_keys WHERE public_id = ? AND revoked = 0", (public_id,)
            ).fetchone()
        if row is None or not hmac.compare_digest(row[1], _digest(secret)):
            return None
        return row[0]

    def list(self, user_uuid: str) -> list[ApiKey]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, public_id, user_uuid, name, created_at FROM api_keys"
                " WHERE user_uuid = ? AND revoked = 0 ORDER BY id", (user_uuid,)
            ).fetchall()
        return [self._key(row) for row in rows]

    def revoke(self, user_uuid: str, id: int) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "UPDATE api_keys SET revoked = 1 WHERE id = ? AND user_uuid = ? AND revoked = 0", (id, user_uuid)
            )
        return cursor.rowcount == 1

    def close(self) -> None:
        self._db.close()


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# -- HTTP ---------------------------------------------------------------------


class Timestamp(fields.DateTime):
    """RFC 3339 in UTC ending in ``Z``, as Locky writes every timestamp."""

    def _serialize(self, value, attr, obj, **kwargs):
        return None if value is None else value.astimezone(timezone.utc).strftime(RFC3339)


class ApiKeyRequestSchema(Schema):
    class Meta:
        ordered = True

    name = fields.String(required=True, validate=validate.Length(1, 100),
                         metadata={"description": "What the key is for."})


class ApiKeySchema(Schema):
    class Meta:
        ordered = True

    id = fields.Integer(metadata={"description": "The key's id."})
    name = fields.String(metadata={"description": "What the key is for."})
    prefix = fields.String(metadata={"description": "The key's public beginning, to recognise it."})
    created_at = Timestamp(metadata={"description": "When the key was issued."})


class IssuedKeySchema(ApiKeySchema):
    key = fields.String(metadata={"description": "The whole key: shown once, never again."})


class ApiKeysListSchema(Schema):
    api_keys = fields.List(fields.Nested(ApiKeySchema), metadata={"description": "The caller's live keys."})


def _owner_check(context, req, action: str) -> Identity:
    identity = req.context.identity
    context.require(identity, "users", action, own=True)
    return identity


class ApiKeys:
    """``POST /v1/private/api-keys`` and ``DELETE /v1/private/api-keys/{id}``."""

    def __init__(self, context, store: KeyStore):
        self.context, self.store = context, store

    def on_post(self, req, resp):
        identity = _owner_check(self.context, req, "update")
        if identity.scheme == SCHEME:
            raise Forbidden("An API key cannot issue API keys; log in with a password.")
        # Locky's own body rules: 415, 413, 400 {"field": "message"}.
        data = load(ApiKeyRequestSchema(), read_json(req, self.context.settings.max_body_bytes))
        key, text = self.store.issue(identity.user.uuid, data["name"])
        resp.status = falcon.HTTP_201
        resp.media = {**ApiKeySchema().dump(key), "key": text}

    def on_delete_item(self, req, resp, id: int):
        identity = _owner_check(self.context, req, "delete")
        if not self.store.revoke(identity.user.uuid, id):
            raise NotFound()
        resp.status = falcon.HTTP_204


class ApiKeyList:
    def __init__(self, context, store: KeyStore):
        self.context, self.store = context, store

    def on_get(self, req, resp):
        identity = _owner_check(self.context, req, "read")
        resp.media = ApiKeysListSchema().dump({"api_keys": self.store.list(identity.user.uuid)})


# -- hooks ------------------------------------------------------------------------


@hookimpl
def locky_add_settings(settings):
    """``[plugins.api_keys]``: where the keys are kept."""
    settings.add_table("api_keys", {"path": "the SQLite file of the keys (or LOCKY_API_KEYS_DB)"})


def _store_path(settings) -> str:
    path = settings.extra.get("api_keys", {}).get("path") or os.environ.get("LOCKY_API_KEYS_DB")
    if path:
        return str(path)
    sqlite = settings.sqlite_path
    return str(sqlite.with_name(sqlite.name + ".api-keys")) if sqlite else ":memory:"


@hookimpl
def locky_routes(context):
    try:
        store = KeyStore(_store_path(context.settings))
    except sqlite3.Error as exc:
        raise SettingsError(f"locky_api_keys: cannot open its key store: {exc}") from None
    context.state[STATE] = store
    keys, listing = ApiKeys(context, store), ApiKeyList(context, store)
    tag = "api-keys"
    return [
        Route("/v1/private/api-keys", keys, (
            Operation("post", "Issue an API key for the caller", tag, status=201, body=ApiKeyRequestSchema,
                      response=IssuedKeySchema, errors=(400, 401, 403, 503),
                      description="The key is shown in this answer only. Send it as"
                                  " `Authorization: Bearer lk_...`. Needs a password login."),
        )),
        Route("/v1/private/api-keys/{id:id}", keys, (
            Operation("delete", "Revoke one of the caller's API keys", tag, status=204,
                      errors=(401, 403, 404, 503)),
        ), suffix="item"),
        Route("/v1/internal/api-keys", listing, (
            Operation("get", "The caller's API keys (without their secrets)", tag,
                      response=ApiKeysListSchema, errors=(401, 403, 503)),
        )),
    ]


@hookimpl
def locky_authenticate(req, context):
    header = req.get_header("Authorization") or ""
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential.startswith(PREFIX):
        return None  # not ours: a JWT, or no credential at all
    store: KeyStore = context.state[STATE]
    user_uuid = store.check(credential)
    user = context.storage.users.get_by_uuid(user_uuid) if user_uuid else None
    if user is None:
        raise Unauthorized("The API key is invalid or revoked.")
    return Identity(user=user, session_uuid=None, scheme=SCHEME)


@hookimpl
def locky_shutdown(context):
    store = context.state.pop(STATE, None)
    if store is not None:
        store.close()
