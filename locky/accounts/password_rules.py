"""What a new password must be (docs/http/accounts.md), for registration, change and reset alike.

8-72 bytes of UTF-8 (bcrypt reads no further, and a longer password is refused rather
than cut), not one of the common passwords shipped with Locky
(:mod:`locky.accounts.password_blocklist`), and not the account's own name or the local part of
its email (when those have 4 or more characters), nor containing them, in any case.
"""

from __future__ import annotations

from locky.accounts import password_blocklist
from locky.errors import Invalid

MIN_BYTES, MAX_BYTES = 8, 72
#: Names and local parts shorter than this are too common inside passwords to refuse.
MIN_PERSONAL = 4

TOO_SHORT_OR_LONG = f"Must be between {MIN_BYTES} and {MAX_BYTES} bytes of UTF-8."
COMMON = "Too common: it is in the list of passwords tried first by attackers."
PERSONAL = "Must not contain your name or the name part of your email address."


def problem(password: str, *, email: str | None = None, name: str | None = None) -> str | None:
    """Why ``password`` is refused for this account, or ``None`` when it is acceptable."""
    size = len(password.encode("utf-8", "surrogatepass"))
    if not MIN_BYTES <= size <= MAX_BYTES:
        return TOO_SHORT_OR_LONG
    if password_blocklist.is_common(password):
        return COMMON
    folded = password.casefold()
    for personal in (email.split("@", 1)[0] if email else None, name.strip() if name else None):
        if personal and len(personal) >= MIN_PERSONAL and personal.casefold() in folded:
            return PERSONAL
    return None


def check(password: str, *, email: str | None = None, name: str | None = None) -> None:
    """Raise ``Invalid`` (400 ``{"password": ...}``) unless :func:`problem` finds none."""
    found = problem(password, email=email, name=name)
    if found:
        raise Invalid.one("password", found)
