"""Per-request facts shared between the middleware and providers without a database trip.

``POLICY_REVISION`` holds the storage policy revision read together with the caller's
session at authentication (one combined query), for the rest of that request only: the
authentication middleware sets it after the check and clears it when the response is
done, so an authorizer may trust it instead of reading the revision again. Outside a
request it is ``None`` and the authorizer reads storage itself.
"""

from __future__ import annotations

from contextvars import ContextVar

POLICY_REVISION: ContextVar[int | None] = ContextVar("locky_policy_revision", default=None)
