"""Locky's stores as the storage of ``scim2-server``'s handler
(:class:`~scim2_server.storage.ScimStorage`).

The handler reads a resource (:meth:`get`), applies a PUT or a PATCH to it with the
library's rules (mutability, paths, ``members[value eq "..."]``), and gives
:meth:`update` the whole new state: this storage compares it with the record and makes
the change through :mod:`locky.scim.users` or :mod:`locky.scim.groups`, i.e. through
``/v1``'s own functions. Locky's errors become SCIM errors here
(:func:`~locky.scim.errors.scim_errors`).

A group's members are written as changes: the members the handler read (:meth:`get`
keeps what it answered, for this request) against those of the new state, so two
provisioning requests adding different members at once both keep theirs.

``expected_version`` is the version the handler read. It is compared with the record
as it is when the write starts only when the client sent ``If-Match`` (``conditional``):
then a change made meanwhile answers 412. Without a condition the write applies to the
record as it is then (its members as changes, its other attributes as given).
"""

from __future__ import annotations

from typing import Any, Callable

from scim2_models import NotFoundException, PreconditionFailedException, Resource, ResourceType, \
    ResponseParameters, SearchRequest
from scim2_server.storage import ScimStorage, SearchPage

from locky.accounts.logins import Accounts
from locky.records import User

from . import filters, groups, mapping, users
from .errors import scim_errors
from .uuids import record_uuid


class LockyScimStorage(ScimStorage):
    """Users and groups of one app; ``identity`` is the caller of the request being
    served (set per request by :mod:`locky.scim.routes`)."""

    def __init__(self, context, identity, accounts: Callable[[], Accounts], conditional: bool = False,
                 keeps_status: bool = False):
        self.context = context
        self.identity = identity
        self.accounts = accounts
        self.conditional = conditional
        #: The request leaves the account's status as it is (a PUT without ``active``,
        #: :func:`locky.scim.service.keep_status`).
        self.keeps_status = keeps_status
        #: What :meth:`get` answered in this request, by resource id.
        self.read: dict[str, Resource[Any]] = {}
        #: The users :meth:`get` read in this request, by resource id: what a change of
        #: the request is made against.
        self.users_read: dict[str, User] = {}

    # -- reads --------------------------------------------------------------------

    def _user(self, resource_id: str):
        uuid = record_uuid(resource_id)
        user = self.context.storage.users.get_by_uuid(uuid) if uuid else None
        if user is None:
            raise NotFoundException(detail="No such user.")
        return user

    def _group(self, resource_id: str):
        uuid = record_uuid(resource_id)
        group = self.context.storage.groups.get_by_uuid(uuid) if uuid else None
        if group is None:
            raise NotFoundException(detail="No such group.")
        return group

    def get(self, resource_type: ResourceType, resource_id: str, *,
            response_parameters: ResponseParameters[Any] | None = None) -> Resource[Any]:
        with scim_errors(resource_type.name):
            if resource_type.name == "User":
                self.users_read[resource_id] = user = self._user(resource_id)
                resource = mapping.user_resource(self.context, user)
            else:
                resource = mapping.group_resource(self.context, self._group(resource_id))
        self.read[resource_id] = resource.model_copy(deep=True)
        return resource

    def search(self, resource_types: list[ResourceType], search_request: SearchRequest[Any], *,
               position: Any = None) -> SearchPage:
        with scim_errors():
            return filters.search(self.context, [t.name for t in resource_types], search_request)

    # -- writes -------------------------------------------------------------------

    def _check_version(self, current: Resource[Any], expected_version: str | None) -> None:
        if self.conditional and expected_version is not None and current.meta.version != expected_version:
            raise PreconditionFailedException(detail="The resource changed since it was read.")

    def create(self, resource_type: ResourceType, resource: Resource[Any]) -> Resource[Any]:
        with scim_errors(resource_type.name):
            if resource_type.name == "User":
                user = users.create(self.context, self.accounts(), name=resource.display_name or resource.user_name,
                                    email=resource.user_name, password=resource.password,
                                    external_id=resource.external_id,
                                    active=resource.active is not False)
                return mapping.user_resource(self.context, user)
            group = groups.create(self.context, name=resource.display_name, external_id=resource.external_id,
                                  member_uuids=[m.value for m in resource.members or () if m.value])
            return mapping.group_resource(self.context, group)

    def update(self, resource_type: ResourceType, resource: Resource[Any], *,
               expected_version: str | None = None) -> Resource[Any]:
        with scim_errors(resource_type.name):
            if resource_type.name == "User":
                user = self._user(resource.id)
                self._check_version(mapping.user_resource(self.context, user, []),
                                    expected_version)
                # The change is made against the account as this request read it: one
                # turned off (or given another email or password) since is a 409, and
                # never turned back on by a push that read it before.
                read = self.users_read.get(resource.id, user)
                updated = users.update(self.context, self.identity, read, name=resource.display_name,
                                       email=resource.user_name, password=resource.password,
                                       external_id=resource.external_id,
                                       active=None if self.keeps_status else resource.active)
                return mapping.user_resource(self.context, user if updated is read else updated)
            group = self._group(resource.id)
            current = mapping.group_resource(self.context, group)
            self._check_version(current, expected_version)
            before = _member_ids(self.read.get(resource.id, current))
            after = _member_ids(resource)
            group = groups.update(self.context, group, name=resource.display_name, external_id=resource.external_id,
                                  add=[u for u in after if u not in before],
                                  remove=[u for u in before if u not in after])
            return mapping.group_resource(self.context, group)

    def delete(self, resource_type: ResourceType, resource_id: str, *,
               expected_version: str | None = None) -> None:
        with scim_errors(resource_type.name):
            if resource_type.name == "User":
                user = self._user(resource_id)
                self._check_version(mapping.user_resource(self.context, user, []),
                                    expected_version)
                users.delete(self.context, self.identity, user)
                return
            group = self._group(resource_id)
            self._check_version(mapping.group_resource(self.context, group), expected_version)
            groups.delete(self.context, group)


def _member_ids(resource: Resource[Any]) -> list[str]:
    return list(dict.fromkeys(m.value for m in resource.members or () if m.value))
