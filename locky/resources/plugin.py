"""The reference ``/v1`` service, mounted through the same ``locky_routes`` hook any
plugin uses."""

from __future__ import annotations

from locky.plugins import hookimpl
from locky.schemas import (
    GroupFilterSchema,
    GroupSchema,
    MemberFilterSchema,
    MemberSchema,
    RoleFilterSchema,
    RoleSchema,
    UserFilterSchema,
    UserSchema,
    list_schema,
)

from . import audit, authz, consents, groups, oauth_clients, service, tokens, users
from .records import Kind, read_routes

KINDS = (
    Kind("users", "User", UserSchema(), UserFilterSchema(), list_schema("users", UserSchema)),
    Kind("groups", "Group", GroupSchema(), GroupFilterSchema(), list_schema("groups", GroupSchema)),
    Kind("members", "Member", MemberSchema(), MemberFilterSchema(), list_schema("members", MemberSchema)),
    Kind("roles", "Role", RoleSchema(), RoleFilterSchema(), list_schema("roles", RoleSchema)),
)


@hookimpl
def locky_routes(context):
    routes = (service.routes(context) + authz.routes(context) + tokens.routes(context) + users.routes(context)
              + groups.routes(context) + audit.routes(context) + oauth_clients.routes(context)
              + consents.routes(context))
    for kind in KINDS:
        routes += read_routes(context, kind)
    return routes
