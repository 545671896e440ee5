"""Locky's errors as SCIM errors (RFC 7644 section 3.12): a body with the
``urn:ietf:params:scim:api:messages:2.0:Error`` schema, ``status`` and ``scimType``.

- :class:`~locky.errors.Conflict` (a unique value taken: userName, a group's
  displayName) → 409 ``uniqueness``; :class:`~locky.errors.StateConflict` → 409.
- :class:`~locky.errors.Invalid` (a rule of ``/v1``: a bad email, a password the
  rules refuse, a member who is no live user) → 400 ``invalidValue``.
- NotFound → 404, Forbidden → 403, Unauthorized → 401 with ``WWW-Authenticate``,
  Locked → 429, Unavailable → 503.

The detail of a conflict or a refused value names the resource's SCIM attribute
(``userName`` rather than ``email``, :data:`ATTRIBUTES`), as the client sent it.

:class:`ScimErrors` is the middleware that gives every error answer under
``/scim/v2`` this shape, also those made before a SCIM responder runs (Locky's
bearer authentication: 401; Falcon: 404, 405; a body over the limit: 413).
"""

from __future__ import annotations

import json
from contextlib import contextmanager

from scim2_models import (
    ConflictException,
    ForbiddenException,
    InvalidValueException,
    NotFoundException,
    SCIMException,
    UnauthorizedException,
    UniquenessException,
)

from locky.errors import Conflict, Forbidden, Invalid, LockyError, NotFound, StateConflict, Unauthorized

SCIM_MEDIA_TYPE = "application/scim+json"
ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"
PREFIX = "/scim/v2"


#: The SCIM attribute of each Locky field a rule of ``/v1`` names, per resource type
#: (docs/http/scim.md): what a client sent is what its error names. A field SCIM calls
#: the same (``password``, ``active``) keeps its name.
ATTRIBUTES = {
    "User": {"email": "userName", "name": "displayName", "external_id": "externalId"},
    "Group": {"name": "displayName", "external_id": "externalId", "user_uuid": "members"},
}


def _fields_text(error: Invalid, resource_type: str | None) -> str:
    names = ATTRIBUTES.get(resource_type or "", {})
    return "; ".join(f"{names.get(field, field)}: {message}" for field, message in error.fields.items())


def to_scim(error: LockyError, resource_type: str | None = None) -> SCIMException | LockyError:
    """The SCIM exception standing for ``error`` (made while handling a resource of
    ``resource_type``, ``User`` or ``Group``: its fields are named as SCIM names them);
    errors SCIM has no type for (429, 503, 501) stay Locky's and are rendered by
    :func:`body_of` from their HTTP form."""
    if isinstance(error, Conflict):
        return UniquenessException(detail=_fields_text(error, resource_type))
    if isinstance(error, Invalid):
        return InvalidValueException(detail=_fields_text(error, resource_type))
    if isinstance(error, NotFound):
        return NotFoundException(detail=str(error) or "No such resource.")
    if isinstance(error, Forbidden):
        return ForbiddenException(detail=error.description)
    if isinstance(error, Unauthorized):
        return UnauthorizedException(detail=error.description)
    if isinstance(error, StateConflict):
        return ConflictException(detail=error.description)
    return error


@contextmanager
def scim_errors(resource_type: str | None = None):
    """Raise Locky's errors from the block (handling a resource of ``resource_type``) as
    SCIM exceptions."""
    try:
        yield
    except LockyError as error:
        converted = to_scim(error, resource_type)
        if converted is error:
            raise
        raise converted from None


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
