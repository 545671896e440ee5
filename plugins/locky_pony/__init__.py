"""Locky's bundled storage: Pony ORM on SQLite, PostgreSQL or MariaDB/MySQL.

Registered as the storage provider ``pony``; the engine is chosen by
``LOCKY_DATABASE_URL`` alone. This module assembles the provider from its parts:

- :mod:`.database` binds the ``Database`` and maps :mod:`.entities`; :mod:`.schema`
  migrates it;
- :mod:`.guard`: transactions, retries, and database failures as Locky's errors;
- :mod:`.reader` (where a plain-SQL read runs) and :mod:`.reads` (the read layer: every
  read of a record, one statement each, and how a record is built from stored values);
  :mod:`.inserts` (a create's record built from the values it wrote);
- :mod:`.stores` (users, groups, members, roles: what reads mean, and the writes), with
  :mod:`.member_reads` (the roles of many memberships in one read, for a batch of checks),
  :mod:`.sessions` (login sessions, the login throttle, grants), :mod:`.lifecycle`
  (single-use codes, the mail outbox, TOTP, signing keys), :mod:`.audit` (the audit
  trail, webhooks and their deliveries), :mod:`.oauth` (the OpenID provider's clients,
  consents and authorization codes) and :mod:`.passkeys` (users' WebAuthn credentials);
- :mod:`.compat`: every use of Pony's private API, each said why and tested against the
  installed Pony (``tests/test_pony_compat.py``);
- :mod:`.pool` and :mod:`.replicas`: where statements run; :mod:`.notify`,
  :mod:`.data_version` and :mod:`.revision_bus`: the change buses of ``LOCKY_AUTH_CACHE``
  (PostgreSQL, SQLite, any engine);
- :mod:`.settings`: the storage's own ``LOCKY_*`` settings (pool, pooler, replicas, auth
  cache), declared through ``locky_add_settings``.
"""

from __future__ import annotations

from contextlib import contextmanager

from pony.orm import db_session

from locky import Conflict, LockyError, hookimpl
from locky.storage import CachingStorage

from . import data_version, schema, settings as own_settings
from .audit import AuditStore, DeliveryStore, WebhookStore
from .compat import in_db_session
from .database import bind_arguments, open_database
from .deadline import WATCHDOG
from .guard import CONFLICT, classify, from_database, transaction, unavailable, writes_refused
from .lifecycle import CodeStore, KeyStore, Outbox, TotpStore
from .liveness import Liveness
from .member_reads import MemberStore
from .notify import open_bus
from .oauth import AuthorizationCodeStore, ConsentStore, OAuthClientStore
from .passkeys import PasskeyStore
from .reader import Reader
from .replicas import REPLICA_POOL_WAIT, Replicas
from .revision_bus import RevisionBus
from .sessions import GrantStore, LoginThrottle, SessionStore
from .stores import GroupStore, RoleStore, UserStore


class PonyStorage:
    """The ``pony`` storage provider: one Pony ``Database`` per app."""

    def __init__(self, settings):
        self.db, e = open_database(settings)
        self.entities = e
        self.replicas = _replicas(settings)
        self.reader = Reader(self.db, bind_arguments(settings), prepare=settings.database_pooler != "transaction",
                             replicas=self.replicas)
        self.users = UserStore(e, self.reader)
        self.groups = GroupStore(e, self.reader)
        self.members = MemberStore(e, self.reader)
        self.roles = RoleStore(e, self.reader)
        self.sessions = SessionStore(e, self.reader)
        self.throttle = LoginThrottle(e)
        self.grants = GrantStore(e, self.reader)
        self.codes = CodeStore(e, self.reader)
        self.outbox = Outbox(e)
        self.totp = TotpStore(e, self.reader)
        self.keys = KeyStore(e, self.reader)
        self.audit = AuditStore(e)
        self.webhooks = WebhookStore(e, self.reader)
        self.deliveries = DeliveryStore(e, self.reader)
        self.oauth_clients = OAuthClientStore(e, self.reader)
        self.consents = ConsentStore(e, self.reader)
        self.oauth_codes = AuthorizationCodeStore(e, self.reader)
        self.passkeys = PasskeyStore(e, self.reader)
        self.read_committed = self.db.provider.dialect == "MySQL"
        self.liveness = Liveness()

    @contextmanager
    def atomic(self):
        """One ``db_session`` around the block: the store calls in it join it (their own
        transactions are skipped inside a caller's session) and commit together. On
        MariaDB/MySQL the block runs at READ COMMITTED (its first statement says so)."""
        if in_db_session():
            yield
            return
        try:
            with WATCHDOG.call(), db_session:
                if self.read_committed:
                    # MariaDB reads a transaction's plain SELECTs from the snapshot of its
                    # first one: in a block, an earlier read (finding which group to
                    # lock) would fix it before a later store call takes its lock, and
                    # the read that decides after the lock would see the past. READ
                    # COMMITTED, as on PostgreSQL, lets every statement see what the locks
                    # it waited for left (see stores.py).
                    self.db.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
                yield
        except (LockyError, ValueError, TypeError):
            raise
        except Exception as exc:
            if not from_database(exc):
                raise  # the caller's own exception: the block is undone, the exception stays
            kind = classify(exc)
            if kind == CONFLICT:
                raise Conflict("request", "Conflicts with a concurrent change; try again.") from None
            raise unavailable("atomic", exc, kind, database=self.db) from None

    @transaction
    def revision(self) -> int:
        return self.entities.Meta["policy_revision"].number

    def schema(self):
        with WATCHDOG.call():
            return schema.schema_state(self.db)

    def migrate(self, *, dry_run: bool = False):
        return schema.migrate(self.db, dry_run=dry_run)

    def ping(self) -> bool:
        # The database is asked at most once a second per process while it answers
        # (.liveness); whether it refuses writes is known without asking (below).
        if not self.liveness.answers(self._answers):
            return False
        # A database that refused a write (disk full, read-only) is not well either;
        # nothing is written here while writes work (guard.writes_refused).
        return writes_refused(self.db) is None

    def _answers(self) -> bool:
        # PostgreSQL, MySQL/MariaDB: in a transaction (immediate), so that Pony does not
        # reconnect and try again after the watchdog cut a hung connection: health answers
        # within the timeout. SQLite: a plain read of the file (its schema page), not
        # BEGIN IMMEDIATE, which is SQLite's write lock: a long write (another worker's,
        # another process's) does not make storage unavailable, reads go on beside it
        # (WAL), and health probes do not queue behind writers or hold them up.
        sqlite = self.db.provider.dialect == "SQLite"
        try:
            with WATCHDOG.call(), db_session(immediate=not sqlite):
                self.db.select("SELECT count(*) FROM sqlite_master" if sqlite else "SELECT 1")
        except Exception:
            return False
        return True

    def close(self) -> None:
        self.liveness.forget()
        self.reader.close()
        if self.replicas is not None:
            self.replicas.close()
        self.db.disconnect()


def _replicas(settings) -> Replicas | None:
    """The read replicas of ``LOCKY_DATABASE_REPLICA_URLS`` (none connects yet), or ``None``."""
    if not settings.database_replica_urls:
        return None
    binds = []
    for number, url in enumerate(settings.database_replica_urls, start=1):
        arguments = bind_arguments(settings, url, name=f"LOCKY_DATABASE_REPLICA_URLS (replica {number})")
        arguments.pop("provider")
        binds.append((f"{number} ({arguments['host']}:{arguments['port']}/{arguments['database']})", arguments))
    # A replica whose pool is busy is skipped at once: the primary answers instead.
    return Replicas.open(binds, settings.database_pool_size, REPLICA_POOL_WAIT, settings.db_timeout,
                         settings.database_replica_max_lag)


def open_storage(settings):
    """The ``pony`` storage of ``settings``: with an auth cache (``LOCKY_AUTH_CACHE``),
    inside the cache of :mod:`locky.cache`, kept honest by :mod:`.notify`
    (PostgreSQL), :mod:`.data_version` (an SQLite file) or :mod:`.revision_bus` (the
    cache revision every authentication reads)."""
    storage = PonyStorage(settings)
    mode = own_settings.auth_cache_mode(settings)
    if mode == "off":
        return storage
    try:
        if mode in ("version", "revision"):
            # Defaults, so a bound that keeps a worker well within its memory (an entry
            # takes about 1.4 KB: 14 MB at most).
            if mode == "version":
                bus = data_version.open_bus(settings)
            else:
                bus = RevisionBus()
                storage.sessions.watch_cache_revision(bus.observe)
            return CachingStorage(storage, bus, max_entries=10_000)
        bind = bind_arguments(settings, settings.database_listen_url, name="LOCKY_DATABASE_LISTEN_URL")
        return CachingStorage(storage, open_bus(storage.db, settings, bind))
    except BaseException:
        storage.close()
        raise


@hookimpl
def locky_add_settings(settings):
    own_settings.declare(settings)


@hookimpl
def locky_register_storage(registry):
    registry.add("pony", lambda context: open_storage(context.settings))
