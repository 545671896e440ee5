"""The Pony storage's own ``LOCKY_*`` settings, declared through ``locky_add_settings``.

Its connection pool (``LOCKY_DATABASE_POOL_SIZE``, ``LOCKY_DATABASE_POOL_TIMEOUT``), what
stands between it and PostgreSQL (``LOCKY_DATABASE_POOLER``), its read replicas
(``LOCKY_DATABASE_REPLICA_URLS``, ``LOCKY_DATABASE_REPLICA_MAX_LAG``) and its auth cache
(``LOCKY_AUTH_CACHE``, ``LOCKY_AUTH_CACHE_LEASE_MS``, ``LOCKY_DATABASE_LISTEN_URL``): read
like Locky's own settings, as ``settings.database_pool_size``, and checked wherever
settings are built (:func:`check_together` for what must go together). The database
(``LOCKY_DATABASE_URL``) and the time any call may take (``LOCKY_DB_TIMEOUT``) are
Locky's: every storage has them.
"""

from __future__ import annotations

from locky import SettingsError

#: LOCKY_DATABASE_POOLER: none (straight to PostgreSQL), session (a session-pooling
#: proxy) or transaction (PgBouncer's transaction pooling).
POOLERS = ("none", "session", "transaction")
#: LOCKY_AUTH_CACHE: auto (version on an SQLite file, revision on a database server, off in
#: memory), off, notify (PostgreSQL LISTEN/NOTIFY), version (SQLite's data version) or
#: revision (the cache revision read with every session).
AUTH_CACHES = ("off", "notify", "version", "revision", "auto")
POSTGRES = ("postgres", "postgresql")


def declare(settings) -> None:
    """Declare the storage's settings on ``settings`` (a ``PluginSettings``)."""
    # PostgreSQL and MySQL/MariaDB: connections each worker process may hold (idle or in
    # use, for all its threads), and seconds a call waits for a free one before a 503.
    settings.add("database_pool_size", 5, type="int", bounds=(1, 1000),
                 help="connections one worker process may hold, idle or in use (LOCKY_DATABASE_POOL_SIZE)")
    settings.add("database_pool_timeout", 5, type="int", bounds=(1, 300),
                 help="seconds a call waits for a free connection before a 503 (LOCKY_DATABASE_POOL_TIMEOUT)")
    # What stands between Locky and PostgreSQL: "none" or "session" (a session-pooling
    # proxy): reads run as statements prepared on each connection; "transaction"
    # (PgBouncer's transaction pooling): nothing may live on a server session, so reads
    # run plain.
    settings.add("database_pooler", "none", type="str", check=_pooler,
                 help="what stands between Locky and PostgreSQL (LOCKY_DATABASE_POOLER): none, session or"
                      " transaction")
    # PostgreSQL read replicas (comma-separated URLs) for lists, counts and reads by id,
    # which may then be up to ``database_replica_max_lag`` seconds stale; logins,
    # authentication, lockout and every write stay on the primary.
    settings.add("database_replica_urls", (), type="tuple[str, ...]", about_database=True,
                 help="PostgreSQL streaming standbys for lists, counts and reads by id"
                      " (LOCKY_DATABASE_REPLICA_URLS, comma-separated)")
    settings.add("database_replica_max_lag", 5, type="int", bounds=(1, 3600),
                 help="seconds a replica may be behind and still answer (LOCKY_DATABASE_REPLICA_MAX_LAG)")
    # The caller's session and user and the policy revision, read on every request,
    # served from each worker's memory: "off"; "notify" (PostgreSQL; kept honest by
    # LISTEN/NOTIFY: a write returns once every worker has dropped what it replaces);
    # "version" (an SQLite file: emptied whenever SQLite's data version moves, checked
    # on every use); "revision" (only user records, while the cache revision has not
    # moved); "auto": see :func:`auth_cache_mode`.
    settings.add("auth_cache", "auto", type="str", about_database=True,
                 help="what keeps the per-worker auth cache honest (LOCKY_AUTH_CACHE): auto, off, notify,"
                      " version or revision")
    # Milliseconds a worker trusts its cache after it last proved itself caught up: the
    # longest a write waits for a worker that stopped answering.
    settings.add("auth_cache_lease_ms", 1000, type="int", bounds=(100, 60_000),
                 help="milliseconds a worker trusts its notify cache after it last caught up"
                      " (LOCKY_AUTH_CACHE_LEASE_MS)")
    # Where the cache listens (a direct connection: LISTEN cannot pass PgBouncer's
    # transaction pooling); None: LOCKY_DATABASE_URL.
    settings.add("database_listen_url", None, type="str | None", about_database=True,
                 help="where LOCKY_AUTH_CACHE=notify listens (LOCKY_DATABASE_LISTEN_URL); none: the database")
    settings.add_rule(check_together)


def check_together(settings) -> None:
    """Raise :class:`locky.SettingsError` when the storage's settings do not go with each
    other or with ``LOCKY_DATABASE_URL``: replicas and ``notify`` need PostgreSQL,
    ``version`` an SQLite file, ``notify`` behind a transaction pooler a listen URL."""
    scheme = settings.database_url.split(":", 1)[0]
    if settings.database_replica_urls and scheme not in POSTGRES:
        raise SettingsError("LOCKY_DATABASE_REPLICA_URLS needs a PostgreSQL LOCKY_DATABASE_URL"
                            " (read replicas are PostgreSQL's streaming standbys)")
    for url in settings.database_replica_urls:
        if url.split(":", 1)[0] not in POSTGRES:
            raise SettingsError("LOCKY_DATABASE_REPLICA_URLS: each replica must be a postgres:// URL"
                                " (comma-separated)")
    _check_auth_cache(settings, scheme)


def _check_auth_cache(settings, scheme: str) -> None:
    if settings.auth_cache not in AUTH_CACHES:
        raise SettingsError(f"LOCKY_AUTH_CACHE must be one of {', '.join(AUTH_CACHES)}"
                            f" (got {settings.auth_cache!r})")
    listen_url = settings.database_listen_url
    if listen_url is not None and listen_url.split(":", 1)[0] not in POSTGRES:
        raise SettingsError("LOCKY_DATABASE_LISTEN_URL must be a postgres:// URL (the primary, not through"
                            " a transaction-pooling proxy)")
    if settings.auth_cache == "version" and settings.sqlite_path is None:
        raise SettingsError("LOCKY_AUTH_CACHE=version needs an SQLite file as LOCKY_DATABASE_URL (it checks"
                            " SQLite's data version); on PostgreSQL use notify")
    if settings.auth_cache != "notify":
        return
    if scheme not in POSTGRES:
        raise SettingsError("LOCKY_AUTH_CACHE=notify needs a PostgreSQL LOCKY_DATABASE_URL (it listens with"
                            " LISTEN/NOTIFY); on one host, or with Redis, see contrib/locky_redis")
    if settings.database_pooler == "transaction" and listen_url is None:
        raise SettingsError("LOCKY_AUTH_CACHE=notify behind LOCKY_DATABASE_POOLER=transaction needs"
                            " LOCKY_DATABASE_LISTEN_URL: a direct connection to the primary (LISTEN does"
                            " not pass transaction pooling)")


def _pooler(value: str) -> None:
    if value not in POOLERS:
        raise SettingsError(f"LOCKY_DATABASE_POOLER must be one of {', '.join(POOLERS)} (got {value!r})")


def auth_cache_mode(settings) -> str:
    """``LOCKY_AUTH_CACHE`` with ``auto`` resolved: off, notify, version or revision
    (``auto``: version on an SQLite file, revision on PostgreSQL and MySQL/MariaDB,
    off in memory)."""
    if settings.auth_cache != "auto":
        return settings.auth_cache
    if settings.sqlite_path is not None:
        return "version"
    return "off" if settings.database_url.startswith("sqlite:") else "revision"
