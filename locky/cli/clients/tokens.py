"""Per-audience token storage and the authenticated session that keeps it fresh.

Each client (``anonymous``, ``app``, ``admin``) keeps its own login in
``$XDG_CONFIG_HOME/locky/<audience>.json`` (``~/.config/locky`` without XDG): the
directory is mode 0700 and the file 0600, written atomically. :class:`AuthSession`
sends the stored access token, refreshes it through ``POST /v1/public/users/refresh``
when its ``exp`` has passed (or once after a 401), and stores the rotated pair.
Refresh tokens are single-use, so refreshing holds a file lock: two clients running at
once never present the same refresh token twice (which would revoke the login).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

from .http import ApiError, ClientError, HttpClient

try:  # POSIX only; elsewhere refreshes simply are not serialised
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

REFRESH_PATH = "/v1/public/users/refresh"
LOGIN_PATH = "/v1/public/users/login"
LOGIN_MFA_PATH = "/v1/public/users/login/mfa"
EXPIRY_LEEWAY = 10  # seconds: refresh a little early rather than send a dying token


class NotLoggedIn(ClientError):
    """No usable login is stored for this audience (and server)."""


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/locky``, or ``~/.config/locky`` when XDG is unset or relative."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME", "")
    if not base or not os.path.isabs(base):
        home = environ.get("HOME") or str(Path.home())
        base = os.path.join(home, ".config")
    return Path(base) / "locky"


class TokenStore:
    """The token file of one audience."""

    def __init__(self, audience: str, directory: Path | None = None):
        self.audience = audience
        self.directory = directory or config_dir()
        self.path = self.directory / f"{audience}.json"

    def load(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ClientError(f"cannot read {self.path}: {exc}; run logout to remove it") from None
        return data if isinstance(data, dict) else None

    def save(self, data: Mapping[str, Any]) -> None:
        self._ensure_dir()
        fd, tmp = tempfile.mkstemp(prefix=f".{self.audience}.", dir=self.directory)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(dict(data), handle, indent=2, sort_keys=True)
                handle.write("\n")
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def clear(self) -> bool:
        """Remove the stored tokens; ``True`` when there were some."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold an exclusive lock on this audience's tokens (a no-op without fcntl)."""
        if fcntl is None:  # pragma: no cover
            yield
            return
        self._ensure_dir()
        fd = os.open(self.directory / f".{self.audience}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _ensure_dir(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)


def token_claims(token: str) -> dict[str, Any]:
    """The JWT payload, decoded WITHOUT verification (only to read ``exp``)."""
    try:
        payload = token.split(".")[1]
        payload += "=" * (-len(payload) % 4)
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def is_expired(data: Mapping[str, Any], now: float | None = None) -> bool:
    """Whether the stored access token has expired (``exp`` claim, else ``expires_at``)."""
    now = time.time() if now is None else now
    exp = token_claims(str(data.get("access_token", ""))).get("exp", data.get("expires_at"))
    if not isinstance(exp, (int, float)):
        return False  # unknown: let the server decide (a 401 triggers one refresh)
    return exp - EXPIRY_LEEWAY <= now


def token_record(url: str, body: Mapping[str, Any], previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What is stored from a login or refresh answer."""
    try:
        access, refresh = body["access_token"], body["refresh_token"]
    except (KeyError, TypeError):
        raise ClientError("the server's token answer has no access_token/refresh_token") from None
    expires_in = body.get("expires_in")
    user = body.get("user") or (previous or {}).get("user")
    return {
        "url": url,
        "token_type": body.get("token_type", "Bearer"),
        "access_token": access,
        "refresh_token": refresh,
        "expires_at": int(time.time() + expires_in) if isinstance(expires_in, (int, float)) else None,
        "user": user,
    }


class AuthSession:
    """Authenticated calls for one audience against one server."""

    def __init__(self, client: HttpClient, store: TokenStore, login_command: str):
        self.client = client
        self.store = store
        self.login_command = login_command

    def login(self, email: str, password: str) -> dict[str, Any]:
        """Log in, store the tokens and return the server's token answer.

        An account with a second factor gets no tokens from the password alone: then the
        server's challenge (``{"mfa_required": true, "mfa_token", "methods"}``) is returned
        and nothing is stored; :meth:`login_mfa` finishes the login with a code.
        """
        body = self.client.request("POST", LOGIN_PATH, {"email": email, "password": password})
        if isinstance(body, dict) and body.get("mfa_required"):
            if not body.get("mfa_token"):
                raise ClientError("the server asked for a second factor but sent no mfa_token")
            return body
        self.store.save(token_record(self.client.base_url, body))
        return body

    def login_mfa(self, mfa_token: str, code: str) -> dict[str, Any]:
        """The second step of a login: a TOTP or recovery code for the challenge's
        ``mfa_token``. Stores the tokens exactly as :meth:`login` does."""
        body = self.client.request("POST", LOGIN_MFA_PATH, {"mfa_token": mfa_token, "code": code})
        self.store.save(token_record(self.client.base_url, body))
        return body

    def tokens(self) -> dict[str, Any]:
        """The stored tokens for this server, or :class:`NotLoggedIn`."""
        data = self.store.load()
        if not data or not data.get("access_token"):
            raise NotLoggedIn(f"not logged in; run '{self.login_command}' first")
        stored_url = str(data.get("url", "")).rstrip("/")
        if stored_url and stored_url != self.client.base_url:
            # Never send this server's tokens to another one.
            raise NotLoggedIn(
                f"logged in to {stored_url}, not {self.client.base_url};"
                f" run '{self.login_command} --url {self.client.base_url}' or pass --url {stored_url}"
            )
        return data

    def refresh(self, stale: str | None = None) -> dict[str, Any]:
        """Exchange the refresh token for a new pair and store it.

        ``stale`` is the access token the caller found unusable: when another process
        already replaced it while we waited for the lock, its new tokens are used as is.
        """
        with self.store.locked():
            data = self.tokens()
            if stale is not None and data.get("access_token") != stale:
                return data
            try:
                body = self.client.request("POST", REFRESH_PATH, {"refresh_token": data.get("refresh_token", "")})
            except ApiError as exc:
                if exc.status in (400, 401):
                    self.store.clear()
                    raise NotLoggedIn(
                        f"the stored login has expired or was revoked ({exc}); run '{self.login_command}' again"
                    ) from None
                raise
            fresh = token_record(self.client.base_url, body, data)
            self.store.save(fresh)
            return fresh

    def request(self, method: str, path: str, body: Any = None, query: Mapping[str, Any] | None = None) -> Any:
        """Call a protected endpoint, refreshing first when the token has expired and
        retrying once after a refresh when the server answers 401."""
        data = self.tokens()
        if is_expired(data):
            data = self.refresh(stale=data["access_token"])
        try:
            return self.client.request(method, path, body, query, token=data["access_token"])
        except ApiError as exc:
            if exc.status != 401:
                raise
        data = self.refresh(stale=data["access_token"])
        return self.client.request(method, path, body, query, token=data["access_token"])


def needs_reauthentication(error: ApiError) -> bool:
    """Whether ``error`` asks the login to prove its password again (RFC 9470's
    ``insufficient_user_authentication`` challenge, answered by
    ``POST /v1/private/users/me/reauth``) rather than for a new token."""
    return error.status == 403 and "insufficient_user_authentication" in error.headers.get("www-authenticate", "")
