"""What every store method does to what processes keep in memory: declared once, here.

Locky keeps copies of what storage holds in several places: the storage cache
(:class:`locky.cache.storage.CachingStorage`: sessions, user records, the roles users
hold in groups, the policy revision, and under some buses every record read), an authorizer's policy and grants
(``locky_casbin``), a token backend's signing keys (``locky_jwt``). A copy is honest only
while every write that makes it stale is known. So each method of each store protocol
of :mod:`locky.providers` is listed in :data:`STORES`, as a read (:data:`READ`, or
:data:`KEPT`: a record read the storage cache may keep) or as a write with what it makes
stale: a *topic* (:data:`REVISION`, :data:`SESSION`, :data:`USER_ID`, :data:`USER_UUID`,
:data:`USERS`, :data:`MEMBERS`, :data:`KEYS`) and, for one session or user, the argument that names it; a write that
makes nothing stale that any cache keeps by name is :data:`UNCACHED`.

Each cache says which topics it follows and how it learns of them (a :class:`Watcher`):
:data:`STORAGE_CACHE` here, ``locky_casbin.POLICY_CACHE`` and ``locky_jwt.keys.KEY_CACHE``
in their plugins. The storage cache builds its wrappers from this table: a write whose
topic it follows is announced on its change bus (:mod:`locky.cache.bus`).
``tests/test_cache_declarations.py`` fails when a store method is missing here, when a
method declared a read writes, and when a topic is written that no cache follows.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from functools import cache

from locky import providers

__all__ = ["KEPT", "KEYS", "MEMBERS", "READ", "REVISION", "SESSION", "STORAGE_CACHE", "STORES", "UNCACHED", "USERS",
           "USER_ID", "USER_PAGE", "USER_PAGES", "USER_UUID", "Effect", "Watcher", "moves", "write_topic"]

# -- topics: what a write makes stale ---------------------------------------------------

#: The policy revision (:meth:`locky.providers.Storage.revision`): roles and grants.
REVISION = "revision"
#: Every user (any cached session's user may have changed): announced by a bus, after
#: an ``atomic`` block, when it cannot tell which; and by the writes that end sessions
#: they cannot name one by one.
USERS = "users"
#: One session (``SESSION`` + its uuid).
SESSION = "session:"
#: One user by id (``USER_ID`` + id) or by uuid (``USER_UUID`` + uuid): its record and
#: its sessions.
USER_ID = "user-id:"
USER_UUID = "user-uuid:"
#: The roles users hold in groups (``MemberStore.role_of`` and ``roles_in``, which every
#: group-scoped decision asks): moved by a membership's writes and by a group's delete,
#: which ends its memberships. A user's delete ends the user's memberships too: the
#: storage cache drops what it keeps of memberships on any user topic as well.
MEMBERS = "members"
#: The pages and counts of users (``UserStore.list``, ``list_documents``, ``count``):
#: moved by a user's creation, the one write of a user that names no user a cache
#: holds; every other write of a user's record moves them by its own topic.
USER_PAGES = "user-pages"
#: The signing keys (:class:`locky.providers.KeyStore`).
KEYS = "keys"


@dataclass(frozen=True)
class Effect:
    """What one store method does to the copies processes keep: ``writes`` or not;
    for a write, the ``topic`` it makes stale (``None``: nothing a cache keeps by name)
    and the ``argument`` naming the one session or user, whose value goes after the
    topic; for a read, whether it is ``kept`` (a record read the storage cache may keep
    when its bus sees every commit), and kept ``with_user_records`` too (under a bus
    that keeps user records, whose writes it hears)."""

    writes: bool
    topic: str | None = None
    argument: str | None = None
    kept: bool = False
    with_user_records: bool = False


#: A read, always served by the store.
READ = Effect(writes=False)
#: A record read the storage cache keeps when its bus sees every commit
#: (:attr:`locky.cache.bus.Keeps.EVERY_READ`).
KEPT = Effect(writes=False, kept=True)
#: A page or count of users: kept as :data:`KEPT` is, and also under a bus that keeps
#: user records (:attr:`locky.cache.bus.Keeps.USER_RECORDS`), since every write that
#: changes one moves a user's topic or :data:`USER_PAGES`.
USER_PAGE = Effect(writes=False, kept=True, with_user_records=True)
#: A write of what no cache keeps by name (a cache of every record read sees its commit).
UNCACHED = Effect(writes=True)


def moves(topic: str, argument: str | None = None) -> Effect:
    """A write that makes ``topic`` stale (of the session or user ``argument`` names)."""
    return Effect(writes=True, topic=topic, argument=argument)


#: The reads every record store has (:class:`locky.providers.RecordStore`,
#: :class:`locky.providers.DocumentPages`).
_RECORD_READS = {"get": KEPT, "get_by_uuid": KEPT, "list": KEPT, "list_documents": KEPT, "count": KEPT}

#: Every method of every store of :class:`locky.providers.Storage`, by the store's name.
STORES: dict[str, dict[str, Effect]] = {
    "users": {
        **_RECORD_READS, "list": USER_PAGE, "list_documents": USER_PAGE, "count": USER_PAGE,
        "get_by_email": READ, "for_update": READ, "get_many_by_uuid": KEPT,
        "create": moves(USER_PAGES),  # nothing cached names a user not made yet, but pages count them
        "update": moves(USER_ID, "id"),
        "delete": moves(USER_ID, "id"),  # its sessions end with it: they carry its tags
        "mark_verified": moves(USER_UUID, "uuid"),
    },
    "groups": {
        **_RECORD_READS, "for_update": READ, "get_many_by_uuid": READ,
        # Its owner's membership: the owner's roles in every group (``roles_by_group``)
        # may be kept, and would not have it.
        "create": moves(MEMBERS),
        "update": UNCACHED,
        "delete": moves(MEMBERS),  # its memberships end with it
    },
    # The roles in groups every group-scoped decision asks for: the storage cache keeps
    # them under every bus (outside atomic blocks), as it keeps user records. They move
    # no policy revision.
    "members": {**_RECORD_READS, "role_of": KEPT, "roles_in": KEPT, "roles_by_group": KEPT,
                "user_with_roles_by_group": KEPT, "of_users": READ, "of_groups": READ, "holders_by_id": READ,
                "create": moves(MEMBERS), "delete": moves(MEMBERS)},
    "roles": {
        **_RECORD_READS, "custom_permissions": READ,
        "create": moves(REVISION), "update": moves(REVISION), "delete": moves(REVISION),
        "sync_builtin": moves(REVISION),
    },
    "sessions": {
        "identity": READ, "authenticate": READ,  # the storage cache keeps them by hand
        "create": UNCACHED,  # a missing session is never cached
        "rotate": moves(SESSION, "uuid"), "revoke": moves(SESSION, "uuid"),
        "revoke_all": moves(USER_UUID, "user_uuid"),  # every cached session of the user
        # The OpenID provider's sign-out and a client's deletion or withdrawn consent end
        # sessions the call does not name one by one (an OP session's logins, a client's
        # of any user): every cached session may be one of them.
        "end_op_session": moves(USERS), "revoke_client": moves(USERS),
    },
    "throttle": {
        "hit": UNCACHED, "take": UNCACHED, "reset": UNCACHED, "reset_prefix": UNCACHED,
        "forgive": UNCACHED, "prune": UNCACHED,
    },
    "grants": {
        "roles_of": READ, "holders": READ, "holders_by_id": READ,
        "grant": moves(REVISION), "revoke": moves(REVISION),
    },
    "codes": {"find": READ, "count_since": READ, "add": UNCACHED, "use": UNCACHED},
    "outbox": {"pending": READ, "put": UNCACHED, "claim": UNCACHED, "done": UNCACHED, "retry": UNCACHED},
    "totp": {
        "get": READ, "begin": UNCACHED, "use_step": UNCACHED, "use_recovery": UNCACHED,
        # Turning TOTP on or off changes the user's ``mfa_enabled``.
        "confirm": moves(USER_UUID, "user_uuid"), "remove": moves(USER_UUID, "user_uuid"),
    },
    "keys": {"active": READ, "all": READ, "rotate": moves(KEYS), "prune": moves(KEYS)},
    "audit": {"list": READ, "add": UNCACHED, "prune": UNCACHED},
    "webhooks": {"get": READ, "list": READ, "matching": READ, "create": UNCACHED, "delete": UNCACHED},
    "deliveries": {
        "get": READ, "list": READ, "pending": READ,
        "queue": UNCACHED, "claim": UNCACHED, "succeeded": UNCACHED, "retry": UNCACHED, "failed": UNCACHED,
    },
    # The OpenID provider's clients, consents and codes: read live where a request needs
    # them (a client_credentials token reads its client by client_id); ending the logins
    # of a deleted client or a withdrawn consent is the sessions' revoke_client.
    "oauth_clients": {
        **_RECORD_READS, "get_by_client_id": READ,
        "create": UNCACHED, "update": UNCACHED, "delete": UNCACHED, "revoke_tokens": UNCACHED,
    },
    "consents": {"get": READ, "of_user": READ, "grant": UNCACHED, "withdraw": UNCACHED},
    "oauth_codes": {"find": READ, "add": UNCACHED, "use": UNCACHED},
    # Passkeys are read live at each sign-in and registration; no cache keeps them, and
    # a user's record does not change with them.
    "passkeys": {
        "of_user": READ, "get_by_credential_id": READ,
        "add": UNCACHED, "use": UNCACHED, "rename": UNCACHED, "remove": UNCACHED,
    },
}


@dataclass(frozen=True)
class Watcher:
    """A copy of stored values some process keeps: its ``name``, the ``topics`` whose
    writes make it stale, and how it ``learns`` of them."""

    name: str
    topics: frozenset[str]
    learns: str


#: The storage cache (:mod:`locky.cache.storage`).
STORAGE_CACHE = Watcher(
    "the storage cache", frozenset({REVISION, USERS, SESSION, USER_ID, USER_UUID, MEMBERS, USER_PAGES}),
    "every write that moves one of its topics is announced on its change bus (locky.cache.bus),"
    " as the bus's freshness says",
)


@cache
def store_protocols() -> dict[str, type]:
    """The protocol of each store of :class:`locky.providers.Storage`, by its name."""
    hints = typing.get_type_hints(providers.Storage)
    return {name: hint for name, hint in hints.items() if isinstance(hint, type) and name in STORES}


def write_topic(store: str, method: str):
    """For a write of ``store.method`` that names one session or user: ``(prefix,
    position, argument)`` to find the name in a call's arguments (``position`` among
    the positional ones, else the keyword ``argument``); ``None`` for another method."""
    effect = STORES[store][method]
    if effect.argument is None:
        return None
    protocol = store_protocols()[store]
    names = [name for name in inspect.signature(getattr(protocol, method)).parameters if name != "self"]
    return effect.topic, names.index(effect.argument), effect.argument
