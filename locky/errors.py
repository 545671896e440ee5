"""Domain errors, raised anywhere and rendered to HTTP once, by :func:`install`.

Every 400 body is a JSON object mapping each offending field to one message;
every other error body is Falcon's ``{"title", "description"}`` object.
"""

from __future__ import annotations

import logging
from typing import Mapping

import falcon

from locky.settings import SettingsError

log = logging.getLogger("locky")


class SchemaError(SettingsError):
    """The database's schema is not one this code can serve: ahead of the code, behind
    it with automatic migration off, or a migration step failed. Stops startup."""


#: The messages for a membership whose group, user or role is not a live record.
MISSING_REFERENCE = {
    "group_uuid": "No such group.",
    "user_uuid": "No such user.",
    "role": "No such role.",
}


class LockyError(Exception):
    """Base of the errors a provider or resource may raise."""


class Invalid(LockyError):
    """Bad input: rendered as 400 with ``{field: message}``."""

    def __init__(self, fields: Mapping[str, str]):
        super().__init__(dict(fields))
        self.fields = {str(k): str(v) for k, v in fields.items()}

    @classmethod
    def one(cls, field: str, message: str) -> "Invalid":
        return cls({field: message})

    @classmethod
    def missing(cls, field: str) -> "Invalid":
        """A membership reference (``group_uuid``, ``user_uuid``, ``role``) that names
        no live record, with the one message :data:`MISSING_REFERENCE` gives it."""
        return cls({field: MISSING_REFERENCE[field]})

    def __reduce__(self):  # picklable across processes (the default would pass args back)
        return (Invalid, (self.fields,))


class Conflict(Invalid):
    """A value that must be unique among live records is taken (also a 400)."""

    def __init__(self, field: str, message: str = "Already exists."):
        super().__init__({field: message})
        self.field = field

    def __reduce__(self):
        return (Conflict, (self.field, self.fields[self.field]))


class NotFound(LockyError):
    """The record does not exist or is deleted: 404."""


class Unauthorized(LockyError):
    """No usable credential: 401 with a ``WWW-Authenticate`` challenge.

    ``challenge`` is the header's value, by default ``Bearer`` (Locky's own tokens). An
    authentication scheme of a plugin names its own, e.g.
    ``Unauthorized("Wrong user name or password.", challenge='Basic realm="locky"')``;
    a sequence of challenges gives one per scheme the client may use instead.
    """

    def __init__(self, description: str = "A valid bearer token is required.",
                 challenge: str | tuple[str, ...] | list[str] = "Bearer"):
        super().__init__(description)
        self.description = description
        self.challenges = (challenge,) if isinstance(challenge, str) else tuple(challenge)

    def __reduce__(self):  # picklable with its challenges
        return (Unauthorized, (self.description, self.challenges))


class Forbidden(LockyError):
    """The policy denies the operation: 403. ``title`` replaces Falcon's "403 Forbidden"
    where the contract names the refusal (``Account disabled``, ``Email not verified``)."""

    def __init__(self, description: str = "The policy does not allow this operation.", title: str | None = None,
                 challenge: str | None = None):
        super().__init__(description)
        self.description = description
        self.title = title
        #: A ``WWW-Authenticate`` value telling the client what would be allowed (RFC 6750
        #: section 3 lets a 403 carry one), or None.
        self.challenge = challenge

    def __reduce__(self):
        return (Forbidden, (self.description, self.title, self.challenge))


class Locked(LockyError):
    """Too many requests: 429 with ``Retry-After``; by default the login lockout's, else
    the abuse limit that ``description`` names (registrations, recovery requests)."""

    def __init__(self, retry_after: int, description: str = "Too many failed logins; try again later."):
        super().__init__(retry_after, description)
        self.retry_after = max(1, int(retry_after))
        self.description = description


class StateConflict(LockyError):
    """The request cannot apply to the record as it stands (TOTP already on, or off): 409."""

    def __init__(self, description: str):
        super().__init__(description)
        self.description = description


class NotSupported(LockyError):
    """The configured provider cannot answer this kind of request: 501."""

    def __init__(self, description: str):
        super().__init__(description)
        self.description = description


class Unavailable(LockyError):
    """Storage does not answer: 503."""


class WritesRefused(Unavailable):
    """Storage answers but cannot keep a change (its disk is full, the database is
    read-only): 503 whose description says which, for the client and the operator."""

    def __init__(self, description: str):
        super().__init__(description)
        self.description = description

    def __reduce__(self):
        return (WritesRefused, (self.description,))


class HTTPFieldError(falcon.HTTPError):
    """A 400 whose body is the contract's field map, not Falcon's title object."""

    def __init__(self, fields: Mapping[str, str]):
        super().__init__(falcon.HTTP_400)
        self.fields = dict(fields)

    def to_dict(self, obj_type=dict):
        return obj_type(self.fields)


def to_http(error: LockyError) -> falcon.HTTPError:
    """The HTTP error a domain error stands for."""
    if isinstance(error, Invalid):
        return HTTPFieldError(error.fields)
    if isinstance(error, NotFound):
        return falcon.HTTPNotFound(description=str(error) or "No such record.")
    if isinstance(error, Unauthorized):
        return falcon.HTTPUnauthorized(description=error.description, challenges=list(error.challenges))
    if isinstance(error, Forbidden):
        headers = {"WWW-Authenticate": error.challenge} if error.challenge else None
        if error.title:
            return falcon.HTTPForbidden(title=error.title, description=error.description, headers=headers)
        return falcon.HTTPForbidden(description=error.description, headers=headers)
    if isinstance(error, Locked):
        return falcon.HTTPTooManyRequests(description=error.description, retry_after=error.retry_after)
    if isinstance(error, StateConflict):
        return falcon.HTTPConflict(description=error.description)
    if isinstance(error, NotSupported):
        return falcon.HTTPNotImplemented(description=error.description)
    if isinstance(error, WritesRefused):
        return falcon.HTTPServiceUnavailable(description=error.description)
    if isinstance(error, Unavailable):
        return falcon.HTTPServiceUnavailable(description="Storage is not answering.")
    return falcon.HTTPInternalServerError()


def install(app: falcon.App) -> None:
    """Register the handlers that render every error as the contract's JSON body."""

    def domain_error(req, resp, error, params):
        raise to_http(error)

    def bad_request(req, resp, error, params):
        # Falcon's own 400s (bad headers, bad query strings) keep the field-map shape.
        if isinstance(error, HTTPFieldError):
            raise error
        raise HTTPFieldError({"request": error.description or error.title})

    def unexpected(req, resp, error, params):
        if isinstance(error, falcon.HTTPError):
            raise error
        log.exception("unhandled error on %s %s", req.method, req.path)
        raise falcon.HTTPInternalServerError()

    app.add_error_handler(Exception, unexpected)
    app.add_error_handler(LockyError, domain_error)
    app.add_error_handler(falcon.HTTPBadRequest, bad_request)
