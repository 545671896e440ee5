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

:class:`~locky.scim.error_bodies.ScimErrors` gives the answers made before a SCIM
responder runs the same shape.
"""

from __future__ import annotations

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
