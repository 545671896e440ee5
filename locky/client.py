"""Verifying Locky's access tokens in another application, offline (docs/http/tokens.md).

This module is the client side of Locky: it imports nothing of the server, only the
standard library and PyJWT (``cryptography`` for the asymmetric keys), so an
application can use it without running or configuring Locky itself::

    from locky.client import TokenVerifier, InvalidToken

    verifier = TokenVerifier("https://locky.example.com")
    try:
        claims = verifier.verify(token)   # {"sub": <user uuid>, "exp": ..., ...}
    except InvalidToken as error:
        print(error.reason)               # e.g. "expired"; never contains the token

What it does:

- On first use it reads the issuer's metadata (RFC 8414,
  ``<issuer>/.well-known/oauth-authorization-server``), whose ``issuer`` must equal the
  given URL (a trailing slash aside), then the JWKS at its ``jwks_uri``, which must be
  on the issuer's origin (the same scheme, host and port): whoever can change the
  metadata on its way (a cache, a proxy, a ``Host`` header) cannot send the verifier to
  keys of their own.
- Only the public keys of that JWKS verify tokens, each with its own ``alg`` (never
  ``none``, never an HMAC algorithm). A JWKS without a usable key (a Locky configured
  with ``HS256``) stops the verifier with :class:`VerifierError`: there is nothing to
  verify with.
- A token whose ``kid`` is unknown makes it fetch the JWKS again (a key rotated on the
  server), at most once per ``min_refetch_interval`` seconds whatever the traffic; the
  keys are also refreshed when they are older than ``cache_ttl`` seconds. The token's
  ``jku``, ``jwk``, ``x5u`` and ``x5c`` headers are never used or fetched.
- A token is accepted when its signature is good and its ``exp``, ``nbf``, ``iat``,
  ``iss`` (the metadata's issuer), ``aud`` and ``typ == "access"`` claims are.

Offline verification cannot see a logout or a deleted user before the token expires
(15 minutes by default); an application that must know asks Locky (introspection, or
``GET /v1/internal/authz/check`` with the caller's token, which Locky authenticates
against the live session).

For web applications: :class:`FalconMiddleware` (Falcon, imported only when used) and
:class:`TokenRequired` / :func:`wsgi_app` (any WSGI application).

Two exceptions: :class:`InvalidToken` (a ``ValueError``) for a token that is refused,
the caller's fault, answered 401; :class:`VerifierError` (a ``RuntimeError``) when the
verifier cannot decide, because Locky is unreachable or misconfigured, answered 503.

For webhook receivers: :func:`verify_signature` returns nothing and raises
:class:`InvalidSignature` (a ``ValueError``) for a delivery that is not Locky's.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterable

import jwt

__all__ = [
    "FalconMiddleware",
    "InvalidSignature",
    "InvalidToken",
    "TokenRequired",
    "TokenVerifier",
    "VerifierError",
    "bearer_token",
    "verify_signature",
    "wsgi_app",
]

log = logging.getLogger("locky.client")

METADATA_PATH = "/.well-known/oauth-authorization-server"
#: Signature algorithms a published key may have. No HMAC (a public "key" would be a
#: shared secret), no ``none``.
ASYMMETRIC_ALGORITHMS = frozenset({
    "ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA",
})
REQUIRED_CLAIMS = ("sub", "iat", "nbf", "exp", "iss", "aud", "typ")
MAX_TOKEN_LENGTH = 8192
MAX_DOCUMENT_BYTES = 1 << 20  # metadata and JWKS: 1 MiB is plenty
#: After a failed fetch of the metadata or the keys, callers get the same error without
#: a new request for this many seconds (at most ``min_refetch_interval``).
FAILURE_BACKOFF = 5.0
USER_AGENT = "locky-client/1"


class InvalidToken(ValueError):
    """A refused token. ``reason`` is short and never contains the token."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class VerifierError(RuntimeError):
    """The verifier cannot decide: the issuer is unreachable, answers something that is
    not its metadata or JWKS, names another issuer, or publishes no usable public key."""


def _normalize_issuer(url: str) -> str:
    return url.rstrip("/")


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_url(url: str, what: str, allow_http: bool) -> str:
    """``url`` when it is an absolute ``https://`` URL (or ``http://`` to a loopback host,
    or any ``http://`` with ``allow_http``); :class:`VerifierError` otherwise."""
    if not isinstance(url, str) or not url:
        raise VerifierError(f"{what} is not a URL")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise VerifierError(f"{what} must be an absolute https:// URL, not {url!r}")
    if parts.scheme == "http" and not (allow_http or _is_loopback(parts.hostname)):
        raise VerifierError(f"{what} must use https:// ({url!r}); pass allow_http=True to accept plain http")
    if parts.username or parts.password:
        raise VerifierError(f"{what} must not carry credentials")
    return url


def _origin(url: str) -> tuple[str, str, int]:
    """The scheme, host and port of an absolute ``http(s)://`` URL (default ports filled in)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise VerifierError(f"{url!r} has an invalid port") from None
    return scheme, (parts.hostname or "").lower(), port or (443 if scheme == "https" else 80)


def _show_origin(origin: tuple[str, str, int]) -> str:
    scheme, host, port = origin
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """The metadata and the JWKS are read where they are, never where a redirect points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"redirect refused ({code})", headers, fp)


def _build_opener(use_env_proxies: bool, ssl_context: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    # Only the handlers needed: no file://, ftp:// or data:// and, unless asked for, none of
    # the HTTP(S)_PROXY variables of the environment.
    opener = urllib.request.OpenerDirector()
    handlers: list[Any] = [
        urllib.request.ProxyHandler(None if use_env_proxies else {}),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(context=ssl_context or ssl.create_default_context()),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
        _NoRedirects(),
    ]
    for handler in handlers:
        opener.add_handler(handler)
    return opener


def _max_age(cache_control: str | None) -> float | None:
    for part in (cache_control or "").split(","):
        name, _, value = part.strip().partition("=")
        if name.lower() == "max-age":
            try:
                return max(0.0, float(value.strip().strip('"')))
            except ValueError:
                return None
    return None


class _Key:
    __slots__ = ("kid", "algorithm", "key")

    def __init__(self, kid: str, algorithm: str, key: Any):
        self.kid, self.algorithm, self.key = kid, algorithm, key


class TokenVerifier:
    """Verifies Locky access tokens against the public keys Locky publishes.

    ``issuer_url``: Locky's issuer (its ``LOCKY_JWT_ISSUER``, by default its public URL),
    e.g. ``https://locky.example.com``. ``audience``: the ``aud`` expected (Locky's
    ``LOCKY_JWT_AUDIENCE``). ``leeway``: seconds of clock skew allowed on ``exp``/``nbf``/
    ``iat``. ``timeout``: seconds per HTTP request. ``min_refetch_interval``: the least
    time between two JWKS fetches caused by unknown ``kid`` s. ``cache_ttl``: the keys are
    fetched again on the first use after this many seconds (or the JWKS response's
    ``Cache-Control: max-age`` when shorter); if that fails, the keys held are kept.
    ``allow_http``: accept ``http://`` URLs to hosts other than loopback ones.
    ``use_env_proxies``: honour ``HTTPS_PROXY`` and friends (off: direct connections).
    ``metadata_url``: where the metadata is, when not at ``<issuer>/.well-known/...``.

    Safe to share between threads; make one per issuer and keep it.
    """

    def __init__(
        self,
        issuer_url: str,
        *,
        audience: str | Iterable[str] = "locky",
        leeway: float = 5,
        timeout: float = 5,
        min_refetch_interval: float = 60,
        cache_ttl: float = 300,
        allow_http: bool = False,
        use_env_proxies: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        metadata_url: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.issuer_url = _normalize_issuer(_check_url(issuer_url, "issuer_url", allow_http))
        parts = urllib.parse.urlsplit(self.issuer_url)
        if parts.query or parts.fragment:
            raise VerifierError("issuer_url must not have a query or a fragment")
        self.audience = audience if isinstance(audience, str) else list(audience)
        self.leeway = leeway
        self.timeout = timeout
        self.min_refetch_interval = min_refetch_interval
        self.cache_ttl = cache_ttl
        self.allow_http = allow_http
        self.metadata_url = _check_url(metadata_url or self.issuer_url + METADATA_PATH, "metadata_url", allow_http)
        self._opener = _build_opener(use_env_proxies, ssl_context)
        self._clock = clock
        self._lock = threading.Lock()
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str, _Key] | None = None
        self._keys_expire_at = 0.0
        self._last_unknown_kid_fetch: float | None = None
        self._failure: tuple[float, VerifierError] | None = None

    # -- public ----------------------------------------------------------------------

    @property
    def issuer(self) -> str:
        """The issuer as the metadata spells it (what the tokens' ``iss`` must be)."""
        return self._ensure_loaded()["issuer"]

    @property
    def metadata(self) -> dict[str, Any]:
        """The issuer's RFC 8414 metadata (fetched on first use)."""
        return dict(self._ensure_loaded())

    @property
    def key_ids(self) -> list[str]:
        """The ``kid`` s held now."""
        self._ensure_loaded()
        return sorted(self._keys or {})

    def verify(self, token: str) -> dict[str, Any]:
        """The claims of a valid Locky access token; :class:`InvalidToken` otherwise
        (:class:`VerifierError` when Locky cannot be asked for its keys)."""
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
            raise InvalidToken("malformed token")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("malformed token") from None
        kid, alg = header.get("kid"), header.get("alg")
        if not isinstance(alg, str) or alg not in ASYMMETRIC_ALGORITHMS:
            raise InvalidToken("algorithm not allowed")
        if not isinstance(kid, str) or not kid:
            raise InvalidToken("no key id")
        if "crit" in header:
            raise InvalidToken("unsupported critical header")
        metadata = self._ensure_loaded()
        key = self._key(kid)
        if alg != key.algorithm:
            raise InvalidToken("algorithm not allowed")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[key.algorithm],
                audience=self.audience,
                issuer=metadata["issuer"],
                leeway=self.leeway,
                options={"require": list(REQUIRED_CLAIMS), "verify_signature": True},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("not yet valid") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("wrong issuer") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("wrong audience") from None
        except jwt.MissingRequiredClaimError as error:
            raise InvalidToken(f"missing claim {error.claim}") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("bad signature") from None
        except jwt.InvalidAlgorithmError:
            raise InvalidToken("algorithm not allowed") from None
        except jwt.PyJWTError:
            raise InvalidToken("invalid token") from None
        if claims.get("typ") != "access":
            raise InvalidToken("not an access token")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise InvalidToken("invalid subject")
        return claims

    # -- keys ------------------------------------------------------------------------

    def _key(self, kid: str) -> _Key:
        keys = self._keys or {}
        if self._clock() >= self._keys_expire_at:
            keys, fresh = self._refresh_expired()
            if fresh and kid not in keys:  # just fetched: asking again would tell nothing new
                raise InvalidToken("unknown key")
        key = keys.get(kid)
        if key is not None:
            return key
        with self._lock:
            keys = self._keys or {}
            if kid in keys:  # another thread fetched it meanwhile
                return keys[kid]
            now = self._clock()
            last = self._last_unknown_kid_fetch
            if last is not None and now - last < self.min_refetch_interval:
                raise InvalidToken("unknown key")
            self._last_unknown_kid_fetch = now
            log.info("locky.client: unknown kid, fetching the JWKS again")
            keys = self._fetch_keys_locked()
        key = keys.get(kid)
        if key is None:
            raise InvalidToken("unknown key")
        return key

    def _refresh_expired(self) -> tuple[dict[str, _Key], bool]:
        """The keys, fetched again when they are older than their time to live; and
        whether this call fetched them."""
        with self._lock:
            if self._clock() < self._keys_expire_at:
                return self._keys or {}, False
            try:
                return self._fetch_keys_locked(), True
            except VerifierError as error:
                # Keep the keys held (a short outage of Locky must not stop every app);
                # try again after the backoff.
                log.warning("locky.client: refreshing the JWKS failed, keeping the keys held: %s", error)
                self._keys_expire_at = self._clock() + min(FAILURE_BACKOFF, self.min_refetch_interval)
                return self._keys or {}, False

    def _ensure_loaded(self) -> dict[str, Any]:
        metadata = self._metadata
        if metadata is not None and self._keys is not None:
            return metadata
        with self._lock:
            if self._metadata is not None and self._keys is not None:
                return self._metadata
            if self._failure is not None:
                failed_at, error = self._failure
                if self._clock() - failed_at < min(FAILURE_BACKOFF, self.min_refetch_interval):
                    raise error
            try:
                if self._metadata is None:
                    self._metadata = self._fetch_metadata()
                self._fetch_keys_locked()
            except VerifierError as error:
                self._failure = (self._clock(), error)
                raise
            self._failure = None
            return self._metadata

    def _fetch_metadata(self) -> dict[str, Any]:
        document, _ = self._get_json(self.metadata_url, "the issuer metadata")
        issuer = document.get("issuer")
        if not isinstance(issuer, str) or not issuer:
            raise VerifierError(f"the metadata at {self.metadata_url} has no issuer")
        if _normalize_issuer(issuer) != self.issuer_url:
            raise VerifierError(
                f"the metadata at {self.metadata_url} names the issuer {issuer!r}, not {self.issuer_url!r}: "
                "configure the verifier with Locky's issuer (LOCKY_JWT_ISSUER / LOCKY_PUBLIC_URL)")
        jwks_uri = _check_url(document.get("jwks_uri"), "the metadata's jwks_uri", self.allow_http)
        if _origin(jwks_uri) != _origin(self.issuer_url):
            raise VerifierError(
                f"the metadata's jwks_uri {jwks_uri!r} is not on the issuer's origin "
                f"{_show_origin(_origin(self.issuer_url))}: keys are fetched from the issuer only "
                "(Locky builds jwks_uri from LOCKY_PUBLIC_URL, else its issuer; make them name the same origin)")
        return document

    def _fetch_keys_locked(self) -> dict[str, _Key]:
        assert self._metadata is not None
        jwks_uri = self._metadata["jwks_uri"]
        document, cache_control = self._get_json(jwks_uri, "the JWKS")
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise VerifierError(f"{jwks_uri} is not a JWKS (no \"keys\" list)")
        keys: dict[str, _Key] = {}
        for entry in entries:
            key = self._parse_key(entry)
            if key is not None:
                keys[key.kid] = key
        if not keys:
            raise VerifierError(
                f"{jwks_uri} publishes no public signing key: Locky signs with a shared secret "
                "(LOCKY_JWT_ALGORITHM HS256/HS384/HS512) or has no key yet, and its tokens cannot be "
                "verified elsewhere; configure Locky with ES256, EdDSA or RS256")
        ttl = self.cache_ttl
        max_age = _max_age(cache_control)
        if max_age is not None:
            ttl = min(ttl, max(max_age, self.min_refetch_interval / 4))
        self._keys = keys
        self._keys_expire_at = self._clock() + ttl
        return keys

    @staticmethod
    def _parse_key(entry: Any) -> _Key | None:
        if not isinstance(entry, dict):
            return None
        kid, alg = entry.get("kid"), entry.get("alg")
        if not isinstance(kid, str) or not kid:
            log.warning("locky.client: ignoring a JWK without kid")
            return None
        if alg not in ASYMMETRIC_ALGORITHMS or entry.get("kty") == "oct":
            log.warning("locky.client: ignoring JWK %s: algorithm %r is not a public-key signature", kid, alg)
            return None
        if entry.get("use", "sig") != "sig":
            return None
        if any(name in entry for name in ("d", "p", "q", "dp", "dq", "qi", "k")):
            log.warning("locky.client: ignoring JWK %s: it carries private key material", kid)
            return None
        try:
            parsed = jwt.PyJWK(entry, algorithm=alg)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError) as error:
            log.warning("locky.client: ignoring JWK %s: %s", kid, error)
            return None
        return _Key(kid, alg, parsed.key)

    def _get_json(self, url: str, what: str) -> tuple[dict[str, Any], str | None]:
        request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": USER_AGENT})
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read(MAX_DOCUMENT_BYTES + 1)
                cache_control = response.headers.get("Cache-Control")
        except urllib.error.HTTPError as error:
            error.close()
            raise VerifierError(f"{what} at {url} answered HTTP {error.code}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            raise VerifierError(f"{what} at {url} could not be read: {reason}") from None
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise VerifierError(f"{what} at {url} is too large")
        try:
            document = json.loads(raw)
        except ValueError:
            raise VerifierError(f"{what} at {url} is not JSON") from None
        if not isinstance(document, dict):
            raise VerifierError(f"{what} at {url} is not a JSON object")
        return document, cache_control


# -- web applications ---------------------------------------------------------------------


class InvalidSignature(ValueError):
    """A webhook delivery that is not Locky's: no ``Locky-Signature``, one made with
    another secret or over another body, or one older than the tolerance (a replay).
    ``reason`` says which; answer the sender 400 and drop the body."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def verify_signature(secret: str, headers, body: bytes | str, *, tolerance: int = 300) -> None:
    """Check that a webhook delivery is Locky's (docs/http/audit.md), or raise
    :class:`InvalidSignature`: ``headers`` (any mapping, any case) must hold a
    ``Locky-Signature: t=<unix seconds>,v1=<hex>`` whose HMAC-SHA256 under the webhook's
    ``secret`` over ``"<t>.<body>"`` matches, made within ``tolerance`` seconds of now.
    ``body`` is the raw request body, before any JSON parsing. It returns nothing: a
    receiver cannot accept a forged delivery by forgetting to look at an answer::

        try:
            verify_signature(secret, request.headers, body)
        except InvalidSignature:
            return 400
        event = json.loads(body)   # skip it if event["id"] was seen: delivery is at-least-once
    """
    from locky.webhooks.signing import problem

    reason = problem(secret, headers, body, tolerance=tolerance)
    if reason is not None:
        raise InvalidSignature(reason)


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header; :class:`InvalidToken`
    when the header is missing or of another scheme."""
    if not authorization:
        raise InvalidToken("missing bearer token")
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise InvalidToken("missing bearer token")
    return token


def _exempt(path: str, exempt: Iterable[str]) -> bool:
    """``path`` equals an entry, or lies under an entry ending in ``*`` (a prefix)."""
    for entry in exempt:
        if entry.endswith("*"):
            if path.startswith(entry[:-1]):
                return True
        elif path == entry:
            return True
    return False


class FalconMiddleware:
    """Falcon middleware: every request outside ``exempt`` needs a valid Locky access
    token (``Authorization: Bearer ...``). Sets ``req.context.claims`` (the token's claims)
    and ``req.context.access_token`` (the token, to call Locky on the caller's behalf);
    answers 401 with ``WWW-Authenticate: Bearer`` otherwise, and 503 when the verifier
    cannot reach Locky. ``exempt``: paths (``"/health"``), or prefixes ending in ``*``
    (``"/public/*"``); ``OPTIONS`` requests (CORS preflight) pass when
    ``exempt_options`` is true."""

    def __init__(self, verifier: TokenVerifier, *, exempt: Iterable[str] = (), exempt_options: bool = False):
        import falcon  # only here: locky.client needs no falcon unless this is used

        self._falcon = falcon
        self.verifier = verifier
        self.exempt = tuple(exempt)
        self.exempt_options = exempt_options

    def process_request(self, req, resp) -> None:
        req.context.claims = None
        req.context.access_token = None
        if _exempt(req.path, self.exempt) or (self.exempt_options and req.method == "OPTIONS"):
            return
        falcon = self._falcon
        try:
            token = bearer_token(req.get_header("Authorization"))
            claims = self.verifier.verify(token)
        except InvalidToken as error:
            raise falcon.HTTPUnauthorized(title="Unauthorized", description=f"Invalid token: {error.reason}.",
                                          challenges=["Bearer"]) from None
        except VerifierError:
            log.exception("locky.client: cannot verify tokens")
            raise falcon.HTTPServiceUnavailable(title="Service Unavailable",
                                                description="Tokens cannot be verified now.") from None
        req.context.claims = claims
        req.context.access_token = token


class TokenRequired:
    """WSGI middleware: requests outside ``exempt`` need a valid Locky access token; the
    wrapped application finds the claims in ``environ["locky.claims"]`` and the token in
    ``environ["locky.token"]``. Others get a 401 JSON body ``{"title", "description"}``
    with ``WWW-Authenticate: Bearer`` (503 when Locky cannot be reached)."""

    def __init__(self, app: Callable, verifier: TokenVerifier, *, exempt: Iterable[str] = ()):
        self.app = app
        self.verifier = verifier
        self.exempt = tuple(exempt)

    def __call__(self, environ: dict[str, Any], start_response: Callable):
        environ["locky.claims"] = None
        environ["locky.token"] = None
        if _exempt(environ.get("PATH_INFO", "") or "/", self.exempt):
            return self.app(environ, start_response)
        try:
            token = bearer_token(environ.get("HTTP_AUTHORIZATION"))
            claims = self.verifier.verify(token)
        except InvalidToken as error:
            return _json_error(start_response, "401 Unauthorized", "Unauthorized",
                               f"Invalid token: {error.reason}.", [("WWW-Authenticate", "Bearer")])
        except VerifierError:
            log.exception("locky.client: cannot verify tokens")
            return _json_error(start_response, "503 Service Unavailable", "Service Unavailable",
                               "Tokens cannot be verified now.", [])
        environ["locky.claims"] = claims
        environ["locky.token"] = token
        return self.app(environ, start_response)


def wsgi_app(app: Callable, verifier: TokenVerifier, *, exempt: Iterable[str] = ()) -> TokenRequired:
    """``app`` behind :class:`TokenRequired`."""
    return TokenRequired(app, verifier, exempt=exempt)


def _json_error(start_response: Callable, status: str, title: str, description: str,
                headers: list[tuple[str, str]]) -> list[bytes]:
    body = json.dumps({"title": title, "description": description}).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                            ("Cache-Control", "no-store"), *headers])
    return [body]
