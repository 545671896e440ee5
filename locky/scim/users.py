"""SCIM writes of users, through the functions ``/v1`` calls (docs/http/scim.md).

- Create is registration's change (:meth:`locky.accounts.logins.Accounts.register`):
  the same field rules (``UserRequestSchema``), password rules, the account, its
  verification letter and ``user.registered`` in one transaction, without the
  anonymous sign-up limit per client address (the caller is an authenticated
  provisioning client). A user created without ``password`` gets an unusable random
  one: they set theirs through the password reset (docs/http/accounts.md).
  ``active: false`` on creation then disables the account as an admin's update does.
- Update is ``PUT /v1/private/users/{id}``'s change
  (:func:`locky.resources.users.update_user`): a new password or email set by the
  provisioning client ends every login of the user, ``active: false`` ends them too
  (``user.disabled``), a new email is unverified and gets a verification message.
  Nobody disables their own account (400), nor changes their own password or
  email through SCIM (403): ``/v1`` asks for the current password for that, which a
  bearer token alone does not prove.
- Delete is ``DELETE /v1/private/users/{id}``'s soft delete (``user.deleted``):
  memberships end and the user's tokens fail.

An account that could itself change every user (an admin: the policy allows it
``users`` × ``update`` anywhere) is changed or deleted through SCIM only by a caller
who may do the same (403 otherwise): the ``provisioner`` role of a machine client
is no way to take over an admin's account by setting its password or email.

Every event carries ``details.via = "scim"``; its actor is the caller (the admin or
the machine client, ``client:<client_id>``) as for any request.
"""

from __future__ import annotations


from locky import audit
from locky.accounts.logins import Accounts
from locky.errors import Forbidden, Invalid
from locky.http.media import load
from locky.records import User
from locky.resources.users import update_user, user_deleted
from locky.resources.writes import audited
from locky.schemas import UserRequestSchema, UserUpdateSchema

from . import external_ids

VIA = "scim"
#: What the field rules check in place of a password that was not given (registration
#: then gives the account a random one nobody knows).
_PLACEHOLDER = "not-given-" + "x" * 16


def create(context, accounts: Accounts, *, name: str, email: str, password: str | None, external_id: str | None,
           active: bool) -> User:
    """Register a user as provisioning does; see the module docstring."""
    data = load(UserRequestSchema(), {"name": name, "email": email, "password": password or _PLACEHOLDER})
    return accounts.register(
        name=data["name"], email=data["email"], password=None if password is None else data["password"],
        external_id=external_ids.checked(external_id), via=VIA,
        then=None if active else lambda user: update_user(context, user, {"disabled": True}, None, own=False,
                                                          via=VIA))


def require_outranked(context, identity, user: User) -> None:
    """403 unless the caller may change ``user``: anyone may change an account that
    cannot change others; an admin's only a caller allowed ``users`` × ``update``
    everywhere (an admin)."""
    if context.authorizer.is_allowed(user, "users", "update") and not context.allowed(identity, "users", "update"):
        raise Forbidden("This account may change every user: only an admin changes it.")


def update(context, identity, user: User, *, name: str | None, email: str | None, password: str | None,
           external_id: str | None, active: bool | None) -> User:
    """Change what differs from ``user``; ``None`` leaves a field as it is, except
    ``external_id``: ``None`` clears a stored one (a PUT without ``externalId``)."""
    changes: dict = {}
    if name is not None and name != user.name:
        changes["name"] = name
    if email is not None and email.strip().lower() != user.email:
        changes["email"] = email
    if changes or password is not None:
        loaded = load(UserUpdateSchema(), {**changes, **({"password": password} if password is not None else {})})
        password = loaded.pop("password", None)
        changes = loaded
    if active is not None and active == user.disabled:
        if not active and identity.user.uuid == user.uuid:
            raise Invalid.one("active", "You cannot disable your own account.")
        changes["disabled"] = not active
    if external_ids.checked(external_id) != getattr(user, "external_id", None):
        changes["external_id"] = external_id or ""
    if not changes and password is None:
        return user
    own = identity.user.uuid == user.uuid
    if own and (password is not None or "email" in changes):
        raise Forbidden("Change your own password or email with PUT /v1/private/users/{id} and your current"
                        " password.")
    require_outranked(context, identity, user)
    return update_user(context, user, changes, password, own=own, session_uuid=identity.session_uuid, via=VIA)


def delete(context, identity, user: User) -> User:
    require_outranked(context, identity, user)
    return audited(context, audit.USER_DELETED, "user", lambda: context.storage.users.delete(user.id),
                   lambda u: {**user_deleted(u), "via": VIA})
