"""The SCIM error shape (RFC 7644 section 3.12) of every error answer under ``/scim/v2``:
:class:`ScimErrors` gives it to those made before a SCIM responder runs (Locky's bearer
authentication: 401; Falcon: 404, 405; a body over the limit: 413), and every answer
there is ``application/scim+json``.

Nothing here needs the SCIM libraries: this middleware runs on every request of every
app, while ``scim2-models`` and ``scim2-server`` load on the first SCIM request
(:mod:`locky.scim.routes`).
"""

from __future__ import annotations

import json

SCIM_MEDIA_TYPE = "application/scim+json"
ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"
PREFIX = "/scim/v2"


def body_of(status: int, detail: str | None, scim_type: str | None = None) -> dict:
    body = {"schemas": [ERROR_SCHEMA], "status": str(status)}
    if scim_type:
        body["scimType"] = scim_type
    if detail:
        body["detail"] = detail
    return body


def _detail(resp) -> str | None:
    """The description (or title, or field map) of a Locky or Falcon error body."""
    raw = resp.data if resp.data is not None else (resp.text.encode() if resp.text else None)
    if raw is None and resp.media is not None:
        data = resp.media
    else:
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            return None
    if not isinstance(data, dict):
        return None
    if "schemas" in data:
        return None
    if "description" in data or "title" in data:
        return data.get("description") or data.get("title")
    return "; ".join(f"{k}: {v}" for k, v in data.items()) or None


class ScimErrors:
    """Falcon middleware: an error answer under ``/scim/v2`` that is not a SCIM error
    yet (made by Locky's authentication or by Falcon) becomes one, and every answer
    there is ``application/scim+json``. The status and headers (``WWW-Authenticate``,
    ``Allow``, ``Retry-After``) stay."""

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        if not (req.path == PREFIX or req.path.startswith(PREFIX + "/")):
            return
        status = resp.status_code
        if status >= 400 and resp.content_type != SCIM_MEDIA_TYPE:
            detail = _detail(resp)
            resp.media = None
            resp.text = None
            resp.data = json.dumps(body_of(status, detail, "invalidValue" if status == 400 else None)).encode()
        if resp.data is not None or resp.text is not None or resp.media is not None:
            resp.content_type = SCIM_MEDIA_TYPE
