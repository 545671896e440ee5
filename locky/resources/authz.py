"""The authorization API for client applications (docs/http/authorization.md): check (with its
explanation), batch check, what a user may do, and who may do something.

Every answer comes from the same policy snapshot and the same rules as the single check
(``context.allowed``): a batch item, a listed permission or a listed user is never
decided any other way. Asking needs ``authz`` × ``read``.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from itertools import islice
from typing import Any, ContextManager, Iterator

from marshmallow import ValidationError

from locky.batch_reads import by_uuid, holder_batches
from locky.cache.storage import ROLES_BY_GROUP_AT_MOST
from locky.dump import dumper
from locky.errors import Invalid, NotSupported
from locky.http.media import QueryLoader, first_message, read_json
from locky.providers import HolderSources
from locky.records import Identity, User
from locky.routes import Operation, Route
from locky.schemas import (
    PERMISSION_PART,
    READ_ONLY,
    UUID,
    AuthzCheckItemSchema,
    AuthzQuerySchema,
    PermissionsQuerySchema,
    SubjectsQuerySchema,
    UserSchema,
)

#: ``UserSchema().dump`` compiled (:mod:`locky.dump`), as the users' own reads write them.
DUMP_USER = dumper(UserSchema())
MAX_CHECKS = 100
ITEM = AuthzCheckItemSchema()
ITEM_FIELDS = frozenset(ITEM.fields)
PART = re.compile(PERMISSION_PART)


def plain_item(item: Any) -> dict | None:
    """What :class:`~locky.schemas.AuthzCheckItemSchema` loads from ``item`` when it is
    plainly valid (a JSON object of that schema's fields only, each a string its rule
    accepts: uuids lowercased), in ~1 µs instead of the schema's ~20; ``None`` for
    anything else, which the schema then loads or refuses with its own message."""
    if type(item) is not dict or not item.keys() <= ITEM_FIELDS:
        return None
    user_uuid, resource, action = item.get("user_uuid"), item.get("resource"), item.get("action")
    if type(user_uuid) is not str or type(resource) is not str or type(action) is not str:
        return None
    if UUID.fullmatch(user_uuid) is None or PART.fullmatch(resource) is None or PART.fullmatch(action) is None:
        return None
    loaded = {"user_uuid": user_uuid.lower(), "resource": resource, "action": action}
    if "group_uuid" in item:
        group_uuid = item["group_uuid"]
        if type(group_uuid) is not str or UUID.fullmatch(group_uuid) is None:
            return None
        loaded["group_uuid"] = group_uuid.lower()
    return loaded


def as_identity(user: User, policy_revision: int | None = None) -> Identity:
    """The checked user as the authorizer sees them; ``policy_revision`` is the caller's
    (read with their session for this request), so a decision needs no read of it."""
    return Identity(user=user, session_uuid=None, scheme="check", policy_revision=policy_revision)


class Decisions:
    """What the service decides for any user, read-only, with users looked up once."""

    def __init__(self, context):
        self.context = context
        self.users = context.storage.users

    def subject(self, user_uuid: str, group_uuid: str | None) -> User | None:
        """The live user a check is about. In a group, from a storage that reads a user
        with their roles in every group at once (``members.user_with_roles_by_group``,
        which the storage cache keeps both of), so that deciding reads no membership."""
        if group_uuid is not None:
            with_roles = getattr(self.context.storage.members, "user_with_roles_by_group", None)
            if with_roles is not None:
                return with_roles(user_uuid, ROLES_BY_GROUP_AT_MOST)[0]
        return self.users.get_by_uuid(user_uuid)

    def users_of(self, uuids) -> dict[str, User]:
        """The live users of ``uuids`` by uuid, in one storage read when the storage can
        (``get_many_by_uuid``), else one by one."""
        return by_uuid(self.users, uuids)

    def allowed(self, user: User | None, resource: str, action: str, group_uuid: str | None,
                policy_revision: int | None = None) -> bool:
        return user is not None and self.context.allowed(as_identity(user, policy_revision), resource, action,
                                                         group_uuid=group_uuid)

    def batch(self, pairs: set[tuple[str, str]]) -> ContextManager[Any]:
        """Around many decisions of one request: an authorizer that can (``batch``, as the
        bundled ``casbin``) reads the memberships of these ``(user_uuid, group_uuid)``
        pairs at once, so each decision within is CPU only; another decides as it does."""
        batch = getattr(self.context.authorizer, "batch", None)
        return batch(pairs) if batch is not None and pairs else nullcontext()

    def capability(self, name: str):
        found = getattr(self.context.authorizer, name, None)
        if found is None:
            raise NotSupported(f"The configured authorizer ({self.context.settings.authorizer}) cannot answer this.")
        return found


class AuthzCheck:
    """``GET``: one question, optionally explained; ``POST``: up to 100 at once."""

    def __init__(self, context):
        self.context = context
        self.decisions = Decisions(context)
        self.load_query = QueryLoader(AuthzQuerySchema())

    def on_get(self, req, resp):
        caller = req.context.identity
        self.context.require(caller, "authz", "read")
        # A plainly valid query (no explain) skips marshmallow, as a batch's items do.
        query = plain_item(req.params)
        if query is None:
            query = self.load_query(req)
        else:
            query["explain"] = False
        group_uuid = query.get("group_uuid")
        user = self.decisions.subject(query["user_uuid"], group_uuid)
        revision = caller.policy_revision  # None: the authorizer reads storage's
        allowed = self.decisions.allowed(user, query["resource"], query["action"], group_uuid, revision)
        answer: dict[str, Any] = {"allowed": bool(allowed)}
        if query["explain"]:
            explain = self.decisions.capability("explain")
            roles, matched = [], []
            if user is not None:
                explanation = explain(user, query["resource"], query["action"], group_uuid=group_uuid,
                                      policy_revision=revision)
                roles = explanation.roles
                matched = explanation.matched if allowed else []  # a veto leaves nothing that allowed it
            answer.update(matched=matched, roles=roles)
        resp.media = answer

    def on_post(self, req, resp):
        caller = req.context.identity
        self.context.require(caller, "authz", "read")
        checks = self._checks(read_json(req, self.context.settings.max_body_bytes))
        users = self.decisions.users_of([c["user_uuid"] for c in checks])
        asked = [(users.get(c["user_uuid"]), c) for c in checks]
        # One read of the memberships the batch needs, and one policy revision for all
        # (the caller's, or storage's read once): each decision is then CPU only.
        revision = caller.policy_revision if caller.policy_revision is not None else self.context.storage.revision()
        pairs = {(user.uuid, c["group_uuid"]) for user, c in asked if user is not None and c.get("group_uuid") is not None}
        with self.decisions.batch(pairs):
            resp.media = {"results": [
                {"allowed": bool(self.decisions.allowed(user, c["resource"], c["action"], c.get("group_uuid"),
                                                        revision))}
                for user, c in asked
            ]}

    @staticmethod
    def _checks(body: Any) -> list[dict]:
        """The validated items; a bad one is a 400 keyed ``checks.<index>.<field>``."""
        if not isinstance(body, dict):
            raise Invalid.one("body", "Must be a JSON object.")
        unknown = sorted(set(body) - {"checks"} - set(READ_ONLY))  # read-only fields are ignored (docs/http/records.md)
        if unknown:
            raise Invalid.one(unknown[0], "Unknown field.")
        checks = body.get("checks")
        if checks is None:
            raise Invalid.one("checks", "Missing data for required field.")
        if not isinstance(checks, list):
            raise Invalid.one("checks", "Not a valid list.")
        if not 1 <= len(checks) <= MAX_CHECKS:
            raise Invalid.one("checks", f"Give 1 to {MAX_CHECKS} checks.")
        loaded = []
        for index, item in enumerate(checks):
            plain = plain_item(item)
            if plain is not None:
                loaded.append(plain)
                continue
            try:
                loaded.append(ITEM.load(item))
            except ValidationError as exc:
                messages = exc.messages if isinstance(exc.messages, dict) else {"_schema": exc.messages}
                field, message = next(iter(messages.items()))
                key = f"checks.{index}" if field == "_schema" else f"checks.{index}.{field}"
                raise Invalid.one(key, first_message(message)) from None
        return loaded


class AuthzPermissions:
    """``GET``: everything a user may do, globally and in their groups (or in one).

    Keyset-paged over the user's memberships (docs/http/README.md and docs/http/accounts.md): one page costs the same
    however many groups the user is in. The global context comes first, on the first
    page (``after_id`` 0); each page then adds up to ``limit`` groups, by membership id.
    """

    def __init__(self, context):
        self.context = context
        self.decisions = Decisions(context)
        self.load_query = QueryLoader(PermissionsQuerySchema())

    def on_get(self, req, resp):
        self.context.require(req.context.identity, "authz", "read")
        query = self.load_query(req)
        permissions = self.decisions.capability("permissions")
        group_uuid, first = query.get("group_uuid"), query["after_id"] == 0
        user = self.decisions.subject(query["user_uuid"], group_uuid or None)
        if user is None:
            resp.media = {"permissions": []}
            return
        if group_uuid:
            contexts, next_after_id = [None, group_uuid], None
        else:
            page = self.context.storage.members.list(user_uuid=user.uuid, after_id=query["after_id"],
                                                     limit=query["limit"])
            contexts = [None] if first else []
            contexts += [member.group_uuid for member in page.items]
            next_after_id = page.next_after_id
        found = permissions(user, contexts, policy_revision=req.context.identity.policy_revision) if contexts else []
        # The body of docs/http/authorization.md, {"permissions": [...]}, whole when it fits in one
        # page; a cursor is added only when more groups follow.
        resp.media = {"permissions": found} if next_after_id is None else \
            {"permissions": found, "next_after_id": next_after_id}

class AuthzSubjects:
    """``GET``: the users who may do something, keyset-paged by user id."""

    def __init__(self, context):
        self.context = context
        self.decisions = Decisions(context)
        self.load_query = QueryLoader(SubjectsQuerySchema())

    def on_get(self, req, resp):
        self.context.require(req.context.identity, "authz", "read")
        query = self.load_query(req)
        resource, action, group_uuid = query["resource"], query["action"], query.get("group_uuid")
        # The caller's policy revision (read with their session) for every decision of the
        # page, as a check takes it: None lets the authorizer read storage's.
        revision = req.context.identity.policy_revision
        sources = self.sources(resource, action, group_uuid, revision)
        everyone = self.decisions.capability("may_everyone")(resource, action, policy_revision=revision)
        after_id, limit = query["after_id"], query["limit"]
        # The candidates past the cursor in id order, read a page and one more at a time
        # and decided one by one until the page and one more are allowed: a page costs
        # its own reads and decisions, not every holder's.
        candidates = self.candidates(sources, after_id, limit + 1)
        allowed = list(islice((user for user in candidates
                               if self.decisions.allowed(user, resource, action, group_uuid, revision)), limit + 1))
        page = allowed[:limit]
        resp.media = {
            "users": [DUMP_USER(user) for user in page],
            "next_after_id": page[-1].id if len(allowed) > limit else None,
            "all_users": bool(everyone),
        }

    def sources(self, resource: str, action: str, group_uuid: str | None, revision: int | None) -> HolderSources:
        """Where the candidates are: the authorizer's ``holder_sources``, or the uuids of
        its ``explicit_holders`` (an authorizer written before it)."""
        named = getattr(self.context.authorizer, "holder_sources", None)
        if named is not None:
            return named(resource, action, group_uuid, policy_revision=revision)
        holders = self.decisions.capability("explicit_holders")(resource, action, group_uuid,
                                                                policy_revision=revision)
        return HolderSources(user_uuids=frozenset(holders))

    def candidates(self, sources: HolderSources, after_id: int, size: int) -> Iterator[User]:
        """The live users ``sources`` names past ``after_id``, in id order, read ``size``
        at a time (:func:`locky.batch_reads.holder_batches`)."""
        for batch in holder_batches(self.context.storage, sources, after_id, size):
            users = self.decisions.users_of(uuid for _, uuid in batch)
            yield from (users[uuid] for _, uuid in batch if uuid in users)


def routes(context) -> list[Route]:
    tag = "authz"
    errors = (400, 401, 403, 501, 503)
    check = AuthzCheck(context)
    return [
        Route("/v1/internal/authz/check", check, (
            Operation("get", "Ask the policy: may this user do that?", tag, response="ExplainedDecision",
                      query=AuthzQuerySchema, errors=errors,
                      description="With group_uuid, the user's role in that group applies too. Unknown or"
                                  " deleted users are allowed nothing. explain=true adds matched (the policy"
                                  " lines or stored permissions that allowed it; empty when denied) and roles"
                                  " (every role the user held for the decision, user included)."),
            Operation("post", "Ask up to 100 questions at once", tag, body="AuthzBatchRequest",
                      response="DecisionList", errors=(*errors, 413, 415),
                      description="Each answer equals the single check's, in request order. More than 100"
                                  " checks is a 400 on checks; a bad item a 400 keyed checks.<index>.<field>."),
        )),
        Route("/v1/internal/authz/permissions", AuthzPermissions(context), (
            Operation("get", "What a user may do", tag, response="PermissionList", query=PermissionsQuerySchema,
                      errors=errors,
                      description="Every permission of every role the user holds: globally and in each of"
                                  " their groups, or with group_uuid only what holds there (global rules"
                                  " included). Wildcards (*) as written in the policy; an action that inherits"
                                  " a listed one through g2 (write: create, update, delete) is listed too."
                                  " An unknown user has none. Paged over the user's groups, like every list:"
                                  " the first page (after_id 0) holds the global permissions and those of the"
                                  " first limit groups (1-500, default 50; by membership id). When more"
                                  " groups follow, the answer also holds next_after_id: pass it as after_id"
                                  " for the next groups; the last page has none. With group_uuid the answer"
                                  " is one page."),
        )),
        Route("/v1/internal/authz/subjects", AuthzSubjects(context), (
            Operation("get", "Who may do it", tag, response="SubjectList", query=SubjectsQuerySchema,
                      errors=errors,
                      description="The users with an explicit grant (global roles, admin emails, policy lines"
                                  " naming them, and with group_uuid the group's members whose role allows it),"
                                  " keyset-paged by id. all_users is true when a rule gives it to every"
                                  " authenticated user; those are then not listed one by one."),
        )),
    ]
