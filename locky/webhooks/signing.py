"""Webhook signatures (docs/http/audit.md): ``Locky-Signature: t=<unix seconds>,v1=<hex>``,
where the hex is HMAC-SHA256 with the subscription's secret over ``"<t>.<body>"``.

Binding the time into what is signed lets a receiver refuse replays of an old delivery
(:data:`TOLERANCE`); ``v1`` names the scheme, so a later one can be sent alongside.
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "Locky-Signature"
EVENT_ID_HEADER = "Locky-Event-Id"
#: Seconds a receiver accepts a signature's time away from its own clock, by default.
TOLERANCE = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``."""
    message = str(int(timestamp)).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def header(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``Locky-Signature`` value for ``body`` signed now (or at ``timestamp``)."""
    moment = int(time.time()) if timestamp is None else int(timestamp)
    return f"t={moment},v1={signature(secret, moment, body)}"


def parse(value: str) -> tuple[int | None, list[str]]:
    """The time and the ``v1`` signatures of a ``Locky-Signature`` value."""
    timestamp, signatures = None, []
    for part in (value or "").split(","):
        key, _, item = part.strip().partition("=")
        if key == "t" and item.isdigit():
            timestamp = int(item)
        elif key == "v1" and item:
            signatures.append(item)
    return timestamp, signatures


def _header(headers, name: str) -> str | None:
    """``name`` from ``headers``: a mapping (any case), an object with ``get`` (a
    framework's headers), or pairs."""
    if hasattr(headers, "items"):
        for key, value in headers.items():
            if str(key).lower() == name.lower():
                return value
        return None
    if hasattr(headers, "get"):
        return headers.get(name)
    for key, value in headers or ():
        if str(key).lower() == name.lower():
            return value
    return None


def problem(secret: str, headers, body: bytes | str, *, tolerance: int = TOLERANCE,
            now: float | None = None) -> str | None:
    """What is wrong with a delivery's signature, or ``None`` when ``body`` (the raw
    request body, exactly as received) carries a good ``Locky-Signature`` under
    ``secret`` in ``headers``, made within ``tolerance`` seconds of ``now`` (a replayed
    old delivery is refused). Compares in constant time."""
    if isinstance(body, str):
        body = body.encode()
    if not secret:
        return "no webhook secret to check the signature with"
    value = _header(headers, SIGNATURE_HEADER)
    if not isinstance(value, str):
        return f"no {SIGNATURE_HEADER} header"
    timestamp, signatures = parse(value)
    if timestamp is None or not signatures:
        return f"the {SIGNATURE_HEADER} header is not t=<seconds>,v1=<hex>"
    moment = time.time() if now is None else now
    if tolerance is not None and abs(moment - timestamp) > tolerance:
        return f"the signature's time is more than {tolerance} seconds from now (a replay?)"
    expected = signature(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, given) for given in signatures):
        return "the signature does not match this body under this secret"
    return None


def verify(secret: str, headers, body: bytes | str, *, tolerance: int = TOLERANCE, now: float | None = None) -> bool:
    """Whether the delivery's signature is good (:func:`problem` finds nothing)."""
    return problem(secret, headers, body, tolerance=tolerance, now=now) is None
