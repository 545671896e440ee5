"""Turning database failures into Locky's errors, so no driver text reaches a client."""

from __future__ import annotations

import functools
import logging
from contextlib import contextmanager

from pony.orm import core

from locky.errors import Conflict, LockyError, Unavailable

log = logging.getLogger("locky.storage")

#: Errors that mean "the database did not answer" rather than "your data is wrong".
CONNECTION_ERRORS = (core.OperationalError, core.InterfaceError, core.ConnectionClosedError)


@contextmanager
def integrity_errors(conflict: Conflict):
    """Raise ``conflict`` when the block breaks a unique key."""
    try:
        yield
    except (core.TransactionIntegrityError, core.IntegrityError, core.CacheIndexError):
        raise conflict from None


def guarded(method):
    """Let Locky's errors through; log any database error and raise ``Unavailable``."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except (LockyError, ValueError, TypeError):
            raise
        except CONNECTION_ERRORS as exc:
            log.warning("storage unavailable in %s: %s", method.__qualname__, type(exc).__name__)
            raise Unavailable() from None
        except (core.TransactionIntegrityError, core.IntegrityError, core.CacheIndexError):
            log.warning("uniqueness race lost in %s", method.__qualname__)
            raise Conflict("request", "Conflicts with a concurrent change; try again.") from None
        except (core.TransactionError, core.DatabaseError) as exc:
            log.warning("storage error in %s: %s", method.__qualname__, type(exc).__name__)
            raise Unavailable() from None

    return wrapper
