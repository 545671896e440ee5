"""Locky's settings: one validated, immutable object built from ``LOCKY_*`` variables.

Sources, lowest priority first: defaults, a TOML file (``LOCKY_CONFIG`` or
``Settings.load(config=...)``), environment variables, explicit keyword overrides.
Every value is checked once, at startup; a bad one raises :class:`SettingsError`
with a message that says what to fix.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

DEFAULT_DATABASE_FILE = "locky.sqlite"
MIN_SECRET_BYTES = 32


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
    jwt_algorithm: str = "HS256"
    jwt_issuer: str = "locky"
    jwt_audience: str = "locky"
    access_ttl: int = 15 * 60
    refresh_ttl: int = 7 * 24 * 3600
    admin_emails: tuple[str, ...] = ()
    policy_dir: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 2
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
    bcrypt_rounds: int = 12
    login_max_failures: int = 5
    login_window: int = 15 * 60
    max_body_bytes: int = 64 * 1024
    log_requests: bool = True
    # Free-form section for third-party plugins: ``[plugins.NAME]`` in TOML.
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def load(
        cls,
        environ: Mapping[str, str] | None = None,
        config: str | os.PathLike | None = None,
        **overrides: Any,
    ) -> "Settings":
        """Build settings from a TOML file, ``LOCKY_*`` variables and overrides."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        config = config or environ.get("LOCKY_CONFIG")
        if config:
            values.update(_read_toml(Path(config)))
        for f in dataclasses.fields(cls):
            key = "LOCKY_" + f.name.upper()
            if f.name != "extra" and key in environ:
                values[f.name] = environ[key]
        values.update(overrides)
        return cls.from_mapping(values)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "Settings":
        """Coerce and validate raw values (strings from the environment or TOML types)."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")
        coerced = {name: _coerce(name, known[name].type, raw) for name, raw in values.items()}
        settings = cls(**coerced)
        settings.validate()
        return settings

    def replace(self, **changes: Any) -> "Settings":
        """A copy with ``changes`` applied and validated."""
        return type(self).from_mapping({**dataclasses.asdict(self), **changes})

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
        if self.jwt_algorithm not in ("HS256", "HS384", "HS512"):
            raise SettingsError("LOCKY_JWT_ALGORITHM must be one of HS256, HS384, HS512")
        for name, low, high in (
            ("access_ttl", 10, 24 * 3600),
            ("refresh_ttl", 60, 365 * 24 * 3600),
            ("port", 0, 65535),
            ("workers", 1, 256),
            ("bcrypt_rounds", 4, 31),
            ("login_max_failures", 1, 1000),
            ("login_window", 1, 7 * 24 * 3600),
            ("max_body_bytes", 1024, 16 * 1024 * 1024),
        ):
            value = getattr(self, name)
            if not low <= value <= high:
                raise SettingsError(f"LOCKY_{name.upper()} must be between {low} and {high}")
        for name in ("storage", "tokens", "password_hasher", "authorizer"):
            if not getattr(self, name):
                raise SettingsError(f"LOCKY_{name.upper()} must name a provider")

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
        return dataclasses.replace(self, jwt_secret=_stored_secret(path.with_name(path.name + ".secret")))


def _stored_secret(path: Path) -> str:
    try:
        secret = path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_urlsafe(32)  # 256 bits
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process won the race: use its secret
            return path.read_text().strip()
        with os.fdopen(fd, "w") as handle:
            handle.write(secret + "\n")
        import logging

        logging.getLogger("locky").warning(
            "LOCKY_JWT_SECRET is not set: generated a random secret and stored it in %s", path
        )
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise SettingsError(f"the secret in {path} is shorter than {MIN_SECRET_BYTES} bytes")
    return secret


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
    data = dict(data.get("locky", data))
    if "plugins" in data and isinstance(data["plugins"], dict):
        data["extra"] = data.pop("plugins")
    return data


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
