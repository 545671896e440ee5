"""Locky's settings: one validated, immutable object built from ``LOCKY_*`` variables.

Sources, lowest priority first: defaults, a TOML file (``LOCKY_CONFIG`` or
``Settings.load(config=...)``), environment variables, explicit keyword overrides.
Every value is checked once, at startup; a bad one raises :class:`SettingsError`
with a message that says what to fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
import secrets
import shlex
import sqlite3
import stat
import string
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import urlsplit
import ipaddress

from locky.http.client_address import parse_networks

DEFAULT_DATABASE_FILE = "locky.sqlite"
#: Token algorithms: asymmetric ones first (keys in storage, published as JWKS).
JWT_ALGORITHMS = ("ES256", "EdDSA", "RS256", "HS256", "HS384", "HS512")
ASYMMETRIC_ALGORITHMS = ("ES256", "EdDSA", "RS256")
MIN_SECRET_BYTES = 32
#: A secret with fewer different characters is a placeholder, not a random value.
MIN_SECRET_DISTINCT = 8
SECRET_ADVICE = "e.g. `python -c 'import secrets; print(secrets.token_urlsafe(48))'`"
#: ``LOCKY_*`` variables that are not settings but are read elsewhere: the TOML file's
#: name, the command-line clients, and the documented variables of the contrib and
#: example plugins; ``LOCKY_TEST_*`` and ``LOCKY_BENCH_*`` belong to the test kit and
#: the benchmarks, ``LOCKY_REQUIRE_*`` (backends, browser, Node), ``LOCKY_SCHEMATHESIS_*``,
#: ``LOCKY_SCREENSHOTS`` and ``LOCKY_FUZZ_EXAMPLES`` to the test suite.
OTHER_VARIABLES = frozenset({
    "LOCKY_CONFIG", "LOCKY_URL", "LOCKY_REDIS_URL", "LOCKY_API_KEYS_DB", "LOCKY_AUDIT_LOG",
    "LOCKY_FUZZ_EXAMPLES", "LOCKY_SCREENSHOTS",
})
OTHER_PREFIXES = ("LOCKY_TEST_", "LOCKY_BENCH_", "LOCKY_REQUIRE_", "LOCKY_SCHEMATHESIS_")
log = logging.getLogger("locky")
#: A passkeys' relying party ID as LOCKY_WEBAUTHN_RP_ID may set it: a lowercase DNS name.
WEBAUTHN_RP_ID = re.compile(r"(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")
#: An origin of LOCKY_WEBAUTHN_ORIGINS: scheme, host, optional port; nothing else.
WEBAUTHN_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?")
#: The origins accepted while the RP ID is ``localhost`` and none is configured: a
#: browser on this machine, on any port (browsers treat localhost as a secure context).
LOCALHOST_ORIGIN = re.compile(r"https?://localhost(:[0-9]{1,5})?")


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True



class SettingsError(ValueError):
    """A setting is missing or invalid; the message says which and how to fix it."""


@dataclass(frozen=True)
class Settings:
    """Everything an app needs to know about its deployment.

    Field names map to environment variables by upper-casing and prefixing
    ``LOCKY_`` (``access_ttl`` is ``LOCKY_ACCESS_TTL``).
    """

    database_url: str = f"sqlite:///{DEFAULT_DATABASE_FILE}"
    jwt_secret: str | None = field(default=None, repr=False)
    # ES256, EdDSA, RS256 (keys made and kept in storage, published as JWKS) or
    # HS256/HS384/HS512 (the shared secret: one service only).
    jwt_algorithm: str = "ES256"
    # None: LOCKY_PUBLIC_URL when set, else http://<host>:<port> (see ``issuer``).
    jwt_issuer: str | None = None
    access_ttl: int = 15 * 60
    refresh_ttl: int = 7 * 24 * 3600
    admin_emails: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 2
    threads: int = 1
    storage: str = "pony"
    tokens: str = "jwt"
    password_hasher: str = "bcrypt"
    authorizer: str = "casbin"
    plugins: tuple[str, ...] = ()
    # Plugin loading: names kept out, hook-call tracing, installed entry points.
    block_plugins: tuple[str, ...] = ()
    trace_plugins: bool = False
    autoload_plugins: bool = True
    # Storage schema: migrate at startup (under a database lock) or refuse.
    auto_migrate: bool = True
    # Seconds any one database call may take (connecting, a statement, a lock wait): a
    # bound every storage keeps to, and what the server's worker timeout is sized by
    # (locky/cli/server.py). The Pony storage's pool, replica and auth-cache settings are
    # its own (plugins/locky_pony/settings.py).
    db_timeout: int = 5
    login_max_failures: int = 5
    login_window: int = 15 * 60
    # Failed logins one client address may make per window, over all emails.
    login_max_failures_per_ip: int = 50
    # Failed password (or code) checks one account gets evaluated per hour, over every
    # address; past it only addresses that signed in to it in the last 30 days are heard.
    login_max_guesses_per_hour: int = 100
    # Per client address and hour (docs/http/accounts.md): registrations, and password-forgot and
    # verification-resend requests together; over it 429 with Retry-After.
    signup_max_per_ip: int = 30
    recovery_max_per_ip: int = 30
    # CIDRs of the reverse proxies whose X-Forwarded-For names the client (see client_address).
    trusted_proxies: tuple[str, ...] = ()
    max_body_bytes: int = 64 * 1024
    log_requests: bool = True
    # The service's public address (links in mail, metadata); None: none is known.
    public_url: str | None = None
    # Account lifecycle (docs/http/accounts.md): mail, codes, verified emails.
    mailer: str = "file"
    # Where the ``file`` mailer writes; None: a ``mail/`` folder beside the SQLite
    # database (``./mail`` with another engine).
    mail_dir: str | None = None
    mail_from: str = "Locky <locky@localhost>"
    verify_ttl: int = 24 * 3600
    reset_ttl: int = 30 * 60
    require_verified_email: bool = False
    # Audit trail and webhooks (docs/http/audit.md): days events are kept (0: for ever),
    # whether webhooks may target private addresses, seconds a receiver has to answer,
    # and for how long a failing delivery is retried.
    audit_retention_days: int = 365
    webhook_allow_private: bool = False
    webhook_timeout: int = 10
    webhook_retry_seconds: int = 24 * 3600
    # Passkeys (docs/http/accounts.md#passkeys): the relying party ID (None: the host of
    # ``public_url``, else ``localhost``), the name authenticators show, and origins
    # accepted besides ``public_url``'s (see ``webauthn_rp`` and ``webauthn_allowed_origins``).
    webauthn_rp_id: str | None = None
    webauthn_rp_name: str = "Locky"
    webauthn_origins: tuple[str, ...] = ()
    # Free-form section for third-party plugins: ``[plugins.NAME]`` in TOML.
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # The values of the settings the bundled plugins declare (``locky_add_settings``:
    # ``LOCKY_POLICY_DIR``, ``LOCKY_SMTP_URL``, ...), by name; read as attributes,
    # ``settings.policy_dir``, like the fields above.
    plugin_values: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not fields: a bundled plugin's setting.
        if name.startswith("_") or name == "plugin_values":
            raise AttributeError(name)
        values = self.__dict__.get("plugin_values") or {}
        if name in values:
            return values[name]
        declared = bundled_declarations()
        if name in declared:
            return declared[name].default
        raise AttributeError(f"'Settings' object has no attribute {name!r}")

    @classmethod
    def names(cls) -> list[str]:
        """Every setting's name, ``LOCKY_`` + the name upper-cased being its variable: the
        fields above and the settings the bundled plugins declare."""
        own = [f.name for f in dataclasses.fields(cls) if f.name not in ("extra", "plugin_values")]
        return own + [name for name in bundled_declarations() if name not in own]

    @classmethod
    def default_of(cls, name: str) -> Any:
        """The default of the setting ``name`` (:meth:`names`)."""
        for f in dataclasses.fields(cls):
            if f.name == name:
                return f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        return bundled_declarations()[name].default

    @classmethod
    def load(
        cls,
        environ: Mapping[str, str] | None = None,
        config: str | os.PathLike | None = None,
        **overrides: Any,
    ) -> "Settings":
        """Build settings from a TOML file, ``LOCKY_*`` variables and overrides."""
        environ = os.environ if environ is None else environ
        names = cls.names()
        _warn_unknown_variables(environ, names)
        values: dict[str, Any] = {}
        config = config or environ.get("LOCKY_CONFIG")
        if config:
            values.update(_read_toml(Path(config)))
        for name in names:
            key = "LOCKY_" + name.upper()
            if key in environ:
                values[name] = environ[key]
        values.update(overrides)
        return cls.from_mapping(values)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "Settings":
        """Coerce and validate raw values (strings from the environment or TOML types)."""
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "plugin_values"}
        declared = bundled_declarations()
        unknown = sorted(set(values) - set(known) - set(declared) - {"plugin_values"})
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")
        coerced = {name: _coerce(name, known[name].type, raw) for name, raw in values.items() if name in known}
        # A copy's values (replace) first, then the ones named outright.
        given = {**{k: v for k, v in (values.get("plugin_values") or {}).items() if k in declared},
                 **{k: v for k, v in values.items() if k in declared}}
        plugin_values = {name: setting.default for name, setting in declared.items()}
        plugin_values.update({name: _coerce(name, declared[name].type, raw) for name, raw in given.items()})
        settings = cls(**coerced, plugin_values=plugin_values)
        settings.validate()
        return settings

    def replace(self, **changes: Any) -> "Settings":
        """A copy with ``changes`` applied and validated."""
        return type(self).from_mapping({**dataclasses.asdict(self), **changes})

    def in_memory(self, url: str) -> "Settings":
        """A copy on the in-memory database ``url``, the settings about the database they were
        set for (declared ``about_database``: replicas, the auth cache) at their defaults."""
        about = {name: setting.default for name, setting in bundled_declarations().items() if setting.about_database}
        return self.replace(database_url=url, **about)

    def validate(self) -> None:
        """Check ranges and cross-field rules; raise :class:`SettingsError`."""
        scheme = self.database_url.split(":", 1)[0]
        if scheme not in ("sqlite", "postgres", "postgresql", "mysql"):
            raise SettingsError(
                "LOCKY_DATABASE_URL must start with sqlite:///, postgres:// or mysql://"
                f" (got scheme {scheme!r})"
            )
        if self.jwt_secret is not None and len(self.jwt_secret.encode()) < MIN_SECRET_BYTES:
            raise SettingsError(
                f"LOCKY_JWT_SECRET must be at least {MIN_SECRET_BYTES} bytes long"
            )
        if self.jwt_secret is not None and _low_entropy(self.jwt_secret):
            raise SettingsError(
                f"LOCKY_JWT_SECRET is not random: it has fewer than {MIN_SECRET_DISTINCT} different"
                f" characters (not counting spaces); use a random value, {SECRET_ADVICE}"
            )
        if self.jwt_algorithm not in JWT_ALGORITHMS:
            raise SettingsError(f"LOCKY_JWT_ALGORITHM must be one of {', '.join(JWT_ALGORITHMS)}")
        for name, low, high in (
            ("access_ttl", 10, 24 * 3600),
            ("refresh_ttl", 60, 365 * 24 * 3600),
            ("port", 0, 65535),
            ("workers", 1, 256),
            ("threads", 1, 256),
            ("login_max_failures", 1, 1000),
            ("login_window", 1, 7 * 24 * 3600),
            ("login_max_failures_per_ip", 1, 1_000_000),
            ("login_max_guesses_per_hour", 1, 1_000_000),
            ("signup_max_per_ip", 1, 1_000_000),
            ("recovery_max_per_ip", 1, 1_000_000),
            ("max_body_bytes", 1024, 16 * 1024 * 1024),
            ("db_timeout", 1, 300),
            ("verify_ttl", 60, 30 * 24 * 3600),
            ("reset_ttl", 60, 7 * 24 * 3600),
            ("audit_retention_days", 0, 100 * 366),
            ("webhook_timeout", 1, 60),
            ("webhook_retry_seconds", 0, 30 * 24 * 3600),
        ):
            value = getattr(self, name)
            if not low <= value <= high:
                raise SettingsError(f"LOCKY_{name.upper()} must be between {low} and {high}")
        if self.public_url is not None and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", self.public_url):
            raise SettingsError("LOCKY_PUBLIC_URL must be an http:// or https:// URL such as"
                                " https://auth.example.com (no query or fragment)")
        self._validate_webauthn()
        for name in ("storage", "tokens", "password_hasher", "authorizer", "mailer"):
            if not getattr(self, name):
                raise SettingsError(f"LOCKY_{name.upper()} must name a provider")
        try:
            parse_networks(self.trusted_proxies)
        except ValueError as exc:
            raise SettingsError(f"LOCKY_TRUSTED_PROXIES: {exc} (comma-separated CIDRs, e.g. 10.0.0.0/8)") from None
        for setting in bundled_declarations().values():  # the bundled plugins' own, in their order
            if setting.check is not None:
                setting.check(getattr(self, setting.name))
        for rule in bundled_rules():  # then what must go together (LOCKY_AUTH_CACHE=notify: PostgreSQL)
            rule(self)

    def _validate_webauthn(self) -> None:
        if self.webauthn_rp_id is not None and (not WEBAUTHN_RP_ID.fullmatch(self.webauthn_rp_id)
                                                 or _is_ip_address(self.webauthn_rp_id)):
            raise SettingsError("LOCKY_WEBAUTHN_RP_ID must be a host name such as auth.example.com or example.com"
                                " (lowercase, no scheme, port or path; browsers refuse an IP address)")
        if not self.webauthn_rp_name.strip() or len(self.webauthn_rp_name) > 64:
            raise SettingsError("LOCKY_WEBAUTHN_RP_NAME must be 1 to 64 characters")
        for origin in self.webauthn_origins:
            if not WEBAUTHN_ORIGIN.fullmatch(origin):
                raise SettingsError(f"LOCKY_WEBAUTHN_ORIGINS: {origin!r} is no origin: write scheme://host[:port],"
                                    " e.g. https://app.example.com (no path, no trailing slash)")

    @property
    def webauthn_rp(self) -> str:
        """The passkeys' relying party ID: ``webauthn_rp_id``, else the host of
        ``public_url`` unless that is an IP address (browsers refuse those), else
        ``localhost``."""
        if self.webauthn_rp_id:
            return self.webauthn_rp_id
        host = urlsplit(self.public_url).hostname if self.public_url else None
        if host and not _is_ip_address(host):
            return host
        return "localhost"

    @property
    def webauthn_allowed_origins(self) -> tuple[str, ...]:
        """The origins a passkey ceremony may come from, exactly: ``public_url``'s
        origin (scheme, host, port) and ``webauthn_origins``. While the RP ID is
        ``localhost``, any ``http(s)://localhost[:port]`` origin is accepted besides
        (:data:`LOCALHOST_ORIGIN`): a browser lets only pages on this machine use that
        RP ID, so the port is no boundary worth keeping."""
        found = []
        if self.public_url:
            parts = urlsplit(self.public_url)
            found.append(f"{parts.scheme}://{parts.netloc}".lower())
        found.extend(origin.lower() for origin in self.webauthn_origins)
        return tuple(dict.fromkeys(found))

    @property
    def sqlite_path(self) -> Path | None:
        """The absolute SQLite file path, or ``None`` for other engines and ``:memory:``."""
        if not self.database_url.startswith("sqlite:"):
            return None
        # As in SQLAlchemy: sqlite:///relative.db, sqlite:////absolute/path.db
        raw = self.database_url.removeprefix("sqlite:").removeprefix("//")
        raw = raw[1:] if raw.startswith("/") else raw
        if raw in ("", ":memory:"):
            return None
        return Path(raw).expanduser().resolve()

    @property
    def mail_path(self) -> Path:
        """Where the ``file`` mailer writes: ``mail_dir``, else ``mail/`` beside the
        SQLite database, else ``./mail``."""
        if self.mail_dir:
            return Path(self.mail_dir).expanduser().resolve()
        database = self.sqlite_path
        return (database.parent if database is not None else Path.cwd()) / "mail"

    @property
    def issuer(self) -> str:
        """The tokens' ``iss``: ``jwt_issuer``, else ``public_url``, else
        ``http://<host>:<port>`` (docs/http/tokens.md#published-keys-and-metadata)."""
        return self.jwt_issuer or self.public_base or f"http://{self.host}:{self.port}"

    @property
    def public_base(self) -> str | None:
        """``public_url`` without a trailing slash, or ``None``."""
        return self.public_url.rstrip("/") if self.public_url else None

    def with_secret(self) -> "Settings":
        """Settings whose ``jwt_secret`` is set, generating one where that is allowed.

        With SQLite the secret is made once and kept beside the database file (mode
        0600); with an in-memory database it lives as long as the process; any other
        database refuses to start without ``LOCKY_JWT_SECRET``.
        """
        if self.jwt_secret:
            return self
        if not self.database_url.startswith("sqlite:"):
            raise SettingsError(
                "LOCKY_JWT_SECRET is required with a PostgreSQL or MySQL database"
                f" (at least {MIN_SECRET_BYTES} bytes; e.g. `python -c 'import secrets;"
                " print(secrets.token_urlsafe(48))'`)"
            )
        path = self.sqlite_path
        if path is None:
            return dataclasses.replace(self, jwt_secret=secrets.token_urlsafe(32))
        secret_file = path.with_name(path.name + ".secret")
        if not secret_file.exists() and _holds_sealed_values(path):
            raise SettingsError(
                f"the database {path} holds values sealed with its secret (signing keys, TOTP or webhook"
                f" secrets) but its secret file {secret_file} is missing: put back the locky.sqlite.secret"
                " that belongs to this database (from the same backup; mode 0600, owned by the user running"
                " Locky), or set LOCKY_JWT_SECRET to it. Locky makes no new secret for such a database"
                " (docs/operating.md, \"Backup and restore\")"
            )
        return dataclasses.replace(self, jwt_secret=_stored_secret(secret_file))


#: Tables of the bundled storage whose rows hold values sealed with the secret.
SEALED_TABLES = ("locky_signing_keys", "locky_totp", "locky_webhooks")


def _holds_sealed_values(database: Path) -> bool:
    """Whether the SQLite file ``database`` already holds values sealed with a secret (a
    restored database whose secret file was not restored with it): read-only, and
    ``False`` when the file is missing, new, or cannot be read here."""
    if not database.is_file() or database.stat().st_size == 0:
        return False
    try:
        # immutable: no -wal or -shm file made beside it. No server writes to a database
        # without its secret, so there is nothing in flight to miss.
        db = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro&immutable=1", uri=True, timeout=5)
    except sqlite3.Error:
        return False
    try:
        for table in SEALED_TABLES:
            try:
                if db.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is not None:
                    return True
            except sqlite3.Error:  # no such table (a new database, another storage)
                continue
        return False
    finally:
        db.close()


def _stored_secret(path: Path) -> str:
    """The secret kept in ``path``, made there (mode 0600) when the file is missing.

    The file is refused when it is a symbolic link, not owned by the server's user, or
    open to its group or to others, and when its secret is empty, short or not random.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return _new_secret(path)
    except OSError as exc:
        if path.is_symlink():
            raise SettingsError(
                f"the secret file {path} is a symbolic link: replace it with a regular file"
                " (mode 0600, owned by the user running Locky)"
            ) from None
        raise SettingsError(f"cannot read the secret file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        problems = _file_problems(path, os.fstat(handle.fileno()))
        secret = _read_secret(handle)
    if not secret:
        raise SettingsError(f"the secret file {path} is refused: it is empty. {_lost_secret_advice(path)}")
    if len(secret.encode()) < MIN_SECRET_BYTES:
        problems.append(f"its secret is shorter than {MIN_SECRET_BYTES} bytes")
    elif _low_entropy(secret):
        problems.append(f"its secret has fewer than {MIN_SECRET_DISTINCT} different characters")
    if problems:
        raise SettingsError(
            f"the secret file {path} is refused: {'; '.join(problems)}. Fix it; to replace its secret,"
            f" see docs/operating.md, \"A lost or replaced secret file\" (removing the file alone leaves"
            f" the stored signing keys sealed with the old secret, and Locky does not start)"
        )
    return secret


def _lost_secret_advice(path: Path) -> str:
    """What to do about a secret file whose secret is gone (the one case Locky's own
    writing could leave before it wrote the file atomically: a crash right after the
    first start). The commands are exact, for this file and its database."""
    database = path.with_name(path.name.removesuffix(".secret"))
    forget_keys = ("python3 -c \"import sqlite3, sys; db = sqlite3.connect(sys.argv[1]);"
                   " db.execute('DELETE FROM locky_signing_keys'); db.commit()\" " + shlex.quote(str(database)))
    return (
        "The machine stopped while Locky was first writing it, before the secret reached the disk: the"
        " secret is lost. If a backup holds this file, put it back (mode 0600, owned by the user running"
        f" Locky). If none does, remove it and the signing keys sealed with the lost secret: `rm"
        f" {shlex.quote(str(path))} && {forget_keys}`, then start Locky: it makes a new secret and a new"
        " signing key. Tokens issued before stop working (users log in again), and TOTP and webhook"
        " secrets stored before do not open (docs/operating.md, \"A lost or replaced secret file\")"
    )


def _file_problems(path: Path, info: os.stat_result) -> list[str]:
    problems = []
    if not stat.S_ISREG(info.st_mode):
        problems.append("it is not a regular file")
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        problems.append(f"it is owned by uid {info.st_uid}, not by the user running Locky (uid {os.geteuid()}):"
                        f" chown it")
    if stat.S_IMODE(info.st_mode) & 0o077:
        problems.append(f"its mode is {stat.S_IMODE(info.st_mode):04o}, open to group or others: chmod 600 {path}")
    return problems


def _read_secret(handle) -> str:
    # Locky's own file is whole from the moment it exists (_new_secret); an empty one
    # may still be one that a copy (cp, an orchestrator) is filling: wait a moment.
    for _ in range(20):
        text = handle.read().decode("utf-8", "replace").strip()
        if text:
            return text
        time.sleep(0.05)
        handle.seek(0)
    return ""


def _new_secret(path: Path) -> str:
    """Make the secret file, whole, and return its secret.

    The secret is written to a temporary file beside ``path`` (mode 0600), synced to
    disk, and then linked to ``path`` only if no file is there, and the directory is
    synced: a crash leaves no file or the whole secret, never an empty file. A hard link
    is used and not ``rename``, because rename replaces: of several workers making the
    file at once, the first link wins and the others read its secret, so all agree.
    """
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(64)  # 512 bits: enough for HS512 too (RFC 7518 §3.2)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)  # 0600, O_EXCL
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secret + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path, follow_symlinks=False)
        except FileExistsError:  # another process won the race: use its secret
            won = False
        except OSError as exc:
            raise SettingsError(f"cannot make the secret file {path}: {exc.strerror} (the directory must"
                                f" allow hard links; or set LOCKY_JWT_SECRET)") from None
        else:
            won = True
    finally:
        os.unlink(temporary)
    if not won:
        return _stored_secret(path)
    _sync_directory(directory)  # the new name, and the temporary one gone
    log.warning("LOCKY_JWT_SECRET is not set: generated a random secret and stored it in %s", path)
    return secret


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _low_entropy(secret: str) -> bool:
    """Whether ``secret`` has too few different characters to be a random value (one
    character repeated, only whitespace, a word typed a few times)."""
    return len(set(secret) - set(string.whitespace)) < MIN_SECRET_DISTINCT


def _warn_unknown_variables(environ: Mapping[str, str], names: list[str]) -> None:
    """One warning naming every ``LOCKY_*`` variable that nothing reads (a typo such as
    ``LOCKY_DATABSE_URL`` would otherwise be ignored silently)."""
    known = {"LOCKY_" + name.upper() for name in names}
    unknown = sorted(
        key for key in environ
        if key.startswith("LOCKY_") and key not in known and key not in OTHER_VARIABLES
        and not key.startswith(OTHER_PREFIXES)
    )
    if not unknown:
        return
    described = []
    for key in unknown:
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
        described.append(f"{key} (did you mean {close[0]}?)" if close else key)
    log.warning("unknown LOCKY_* environment variable(s), ignored: %s", ", ".join(described))


#: The tables a TOML settings file may have at its top level: the settings, and the
#: plugins' options (``[plugins.NAME]``, also accepted as ``[locky.plugins.NAME]``).
TOML_TABLES = ("locky", "plugins")


def _read_toml(path: Path) -> dict[str, Any]:
    """The settings in TOML file ``path``, plugin options under ``extra``.

    Settings sit in a ``[locky]`` table (or, without one, at the top level); plugin
    options in ``[plugins.NAME]`` tables (or ``[locky.plugins.NAME]``). Any other
    top-level table, or a setting outside ``[locky]`` when the file has one, is refused.
    """
    data = _parse_toml(path)
    unknown = sorted(key for key, value in data.items() if isinstance(value, dict) and key not in TOML_TABLES)
    if unknown:
        tables = ", ".join(f"[{key}]" for key in unknown)
        raise SettingsError(
            f"config file {path}: unknown top-level table(s) {tables}; allowed: [locky] (the settings)"
            " and [plugins.NAME] (a plugin's options)"
        )
    top_plugins = data.pop("plugins") if isinstance(data.get("plugins"), dict) else {}
    if "locky" in data:
        stray = sorted(key for key in data if key != "locky")
        if stray:
            raise SettingsError(
                f"config file {path}: {', '.join(stray)} must go inside the [locky] table (the file has one)"
            )
        if not isinstance(data["locky"], dict):
            raise SettingsError(f"config file {path}: locky must be a table ([locky])")
        data = data["locky"]
    values = dict(data)
    nested = values.pop("plugins") if isinstance(values.get("plugins"), dict) else {}
    options = _plugin_options(path, top_plugins, nested)
    if options:
        values["extra"] = options
    return values


def _parse_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None


def _plugin_options(path: Path, documented: dict[str, Any], nested: dict[str, Any]) -> dict[str, Any]:
    """``[plugins.NAME]`` and ``[locky.plugins.NAME]`` tables as one mapping; the same
    plugin configured differently in both is an error."""
    for name, options in (*documented.items(), *nested.items()):
        if not isinstance(options, dict):
            raise SettingsError(f"config file {path}: plugins.{name} must be a table ([plugins.{name}])")
    merged = dict(documented)
    for name, options in nested.items():
        if name in merged and merged[name] != options:
            raise SettingsError(
                f"config file {path}: plugin {name!r} is configured twice, differently, in [plugins.{name}]"
                f" and [locky.plugins.{name}]: keep one ([plugins.{name}] is the documented form)"
            )
        merged[name] = options
    return merged


def _coerce(name: str, annotation: str, raw: Any) -> Any:
    if annotation.startswith("tuple"):
        if isinstance(raw, str):
            raw = [part.strip() for part in raw.split(",")]
        return tuple(str(part).strip() for part in raw if str(part).strip())
    if annotation == "int":
        if isinstance(raw, bool):
            raise SettingsError(f"LOCKY_{name.upper()} must be an integer")
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise SettingsError(f"LOCKY_{name.upper()} must be an integer (got {raw!r})") from None
    if annotation == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"LOCKY_{name.upper()} must be true or false (got {raw!r})")
    if annotation.startswith("Mapping"):
        if not isinstance(raw, Mapping):
            raise SettingsError(f"{name} must be a table")
        return dict(raw)
    if raw is None:
        return None
    return str(raw).strip() if name != "jwt_secret" else str(raw)


@dataclass(frozen=True)
class Declared:
    """A ``LOCKY_*`` setting a bundled plugin declares (:meth:`PluginSettings.add`)."""

    name: str
    default: Any
    #: As a field of :class:`Settings` is annotated: ``int``, ``bool``, ``str | None``,
    #: ``str``, ``tuple[str, ...]``; says how a variable's text is read.
    type: str
    #: ``check(value)`` raises :class:`SettingsError` for a value out of bounds.
    check: Callable[[Any], None] | None = None
    help: str = ""
    #: About the database ``LOCKY_DATABASE_URL`` names (its replicas, how its changes are
    #: followed): a copy on an in-memory database (:meth:`Settings.in_memory`) takes the default.
    about_database: bool = False


def bundled_declarations() -> dict[str, Declared]:
    """The ``LOCKY_*`` settings the bundled plugins declare, by name, in their order
    (read once per process: the bundled plugins do not change)."""
    return _bundled().settings


def bundled_rules() -> list[Callable[["Settings"], None]]:
    """The rules the bundled plugins declare over several settings (:meth:`PluginSettings.add_rule`),
    in their order."""
    return _bundled().rules


def _bundled() -> "PluginSettings":
    global _DECLARED
    if _DECLARED is None:
        from locky.plugins import bundled_settings  # the plugins' module builds on this one

        _DECLARED = bundled_settings()
    return _DECLARED


_DECLARED: "PluginSettings | None" = None


class PluginSettings:
    """What plugins declare through the ``locky_add_settings`` hook: the ``[plugins.NAME]``
    tables each reads, with the options a table may hold, and the checks ``locky check`` runs;
    the bundled plugins also declare their ``LOCKY_*`` settings here (:meth:`add`).

    A table nobody declares is refused (:meth:`refuse_unknown`) unless it is named after
    a loaded plugin, so that a misspelt ``[plugins.NAME]`` stops startup instead of
    leaving a plugin on its defaults unnoticed.
    """

    def __init__(self) -> None:
        #: Table name -> the options it may hold (``None``: any) with their help.
        self.tables: dict[str, dict[str, str] | None] = {}
        self.checks: list[Callable[["Settings"], None]] = []
        #: The ``LOCKY_*`` settings declared with :meth:`add`, by name.
        self.settings: dict[str, Declared] = {}
        #: What must hold between several settings (:meth:`add_rule`).
        self.rules: list[Callable[["Settings"], None]] = []

    def add(self, name: str, default: Any, *, type: str, bounds: tuple[int, int] | None = None,
            check: Callable[[Any], None] | None = None, help: str = "",
            about_database: bool = False) -> None:
        """Declare the setting ``name``: ``LOCKY_<NAME>`` in the environment, ``name`` in the
        TOML file's ``[locky]`` table and in :meth:`Settings.load`'s overrides, read as
        ``settings.name``. ``bounds=(low, high)``: an integer's range, refused as Locky refuses
        its own (``LOCKY_<NAME> must be between low and high``); ``check(value)`` raises
        :class:`SettingsError` for any other bad value. Checked wherever settings are built.
        ``about_database=True``: the setting is about the database ``LOCKY_DATABASE_URL`` names
        (its replicas, how its changes are followed), left at its default in a copy on an
        in-memory database (:meth:`Settings.in_memory`).
        Only the plugins bundled with Locky declare such settings (the ``LOCKY_`` names are
        Locky's); a plugin of yours uses a ``[plugins.NAME]`` table."""
        if name in self.settings or name in {f.name for f in dataclasses.fields(Settings)}:
            raise SettingsError(f"the setting {name!r} is declared twice")
        if bounds is not None:
            low, high = bounds

            def in_bounds(value: int, then: Callable[[Any], None] | None = check) -> None:
                if not low <= value <= high:
                    raise SettingsError(f"LOCKY_{name.upper()} must be between {low} and {high}")
                if then is not None:
                    then(value)

            check = in_bounds
        self.settings[name] = Declared(name, default, type, check, help, about_database)

    def add_rule(self, rule: Callable[["Settings"], None]) -> None:
        """Add ``rule(settings)``, which raises :class:`SettingsError` when settings that must
        go together do not (``LOCKY_AUTH_CACHE=notify`` needs a PostgreSQL ``LOCKY_DATABASE_URL``).
        Checked wherever settings are built, after every setting's own check; like :meth:`add`,
        for the plugins bundled with Locky (:meth:`add_check` is what ``locky check`` runs)."""
        self.rules.append(rule)

    def add_table(self, name: str, options: Mapping[str, str] | None = None) -> None:
        """Declare the table ``[plugins.NAME]`` and the options it may hold (each with its
        help); declaring a name again adds options to it."""
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise SettingsError(f"a plugin declares the settings table {name!r}: a table name is letters,"
                                " digits, '_' and '-'")
        if options is None or self.tables.get(name, {}) is None:
            self.tables[name] = None
            return
        self.tables[name] = {**(self.tables.get(name) or {}), **dict(options)}

    def add_check(self, check: Callable[["Settings"], None]) -> None:
        """Add ``check(settings)``, run by ``locky check``; it raises :class:`SettingsError`."""
        self.checks.append(check)

    def refuse_unknown(self, extra: Mapping[str, Any], plugin_names: Iterable[str]) -> None:
        """Raise :class:`SettingsError` for a ``[plugins.NAME]`` table in ``extra`` that no
        plugin declares and no loaded plugin is named after, or an option its declared
        table does not hold; the message lists the known names."""
        # Locky's own routes (locky.resources.plugin) read no table.
        plugin_names = [name for name in plugin_names if not name.startswith("locky.")]
        known = dict(self.tables)
        for plugin in plugin_names:
            last = plugin.rsplit(".", 1)[-1]
            for name in (plugin, last, last.removeprefix("locky_")):
                known.setdefault(name, None)
        unknown = sorted(set(extra) - set(known))
        if unknown:
            names = ", ".join(f"[plugins.{name}]" for name in unknown)
            declared = ", ".join(sorted(set(self.tables) | {n.rsplit(".", 1)[-1].removeprefix("locky_")
                                                           for n in plugin_names}))
            hints = [f"[plugins.{close[0]}] for [plugins.{name}]" for name in unknown
                     if (close := difflib.get_close_matches(name, list(known), n=1))]
            maybe = f" (did you mean {', '.join(hints)}?)" if hints else ""
            raise SettingsError(f"no loaded plugin reads {names}{maybe}; the tables known are those of the"
                                f" loaded plugins: {declared or 'none'} (load a plugin with LOCKY_PLUGINS)")
        for name, values in extra.items():
            options = known.get(name)
            if options is None or not isinstance(values, Mapping):
                continue
            strange = sorted(set(values) - set(options))
            if strange:
                raise SettingsError(f"[plugins.{name}] holds unknown option(s): {', '.join(strange)}; known:"
                                    f" {', '.join(sorted(options)) or 'none'}")
