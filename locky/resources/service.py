"""Health and the policy-decision endpoint for client applications."""

from __future__ import annotations

import falcon

from locky.media import load_query
from locky.records import Identity
from locky.routes import Operation, Route
from locky.schemas import AuthzQuerySchema


class Health:
    def __init__(self, context):
        self.context = context

    def on_get(self, req, resp):
        if self.context.storage.ping():
            resp.media = {"status": "ok"}
        else:
            resp.status = falcon.HTTP_503
            resp.media = {"status": "unavailable"}


class AuthzCheck:
    """``GET /v1/internal/authz/check``: what the policy decides for any live user."""

    def __init__(self, context):
        self.context = context

    def on_get(self, req, resp):
        self.context.require(req.context.identity, "authz", "read")
        query = load_query(AuthzQuerySchema(), req)
        user = self.context.storage.users.get_by_uuid(query["user_uuid"])
        allowed = user is not None and self.context.allowed(
            Identity(user=user, session_uuid=None, scheme="check"),
            query["resource"], query["action"], group_uuid=query.get("group_uuid"),
        )
        resp.media = {"allowed": bool(allowed)}


def routes(context) -> list[Route]:
    return [
        Route("/v1/public/health", Health(context), (
            Operation("get", "Service health", "service", response="Health", public=True, errors=(503,),
                      description="503 with status unavailable when storage does not answer."),
        )),
        Route("/v1/internal/authz/check", AuthzCheck(context), (
            Operation("get", "Ask the policy: may this user do that?", "authz", response="Decision",
                      query=AuthzQuerySchema, errors=(400, 401, 403, 503),
                      description="With group_uuid, the user's role in that group applies too."
                                  " Unknown or deleted users are allowed nothing."),
        )),
    ]
