"""A user's consents to OAuth clients under ``/v1`` (docs/http/oauth.md): list them, and
withdraw one (which also ends the user's logins of that client). Policy resource
``consents``, the caller's own (``p, user, self, consents, read|write``)."""

from __future__ import annotations

import falcon

from locky.oauth.clients import Clients
from locky.oauth.schemas import ConsentListSchema, ConsentSchema
from locky.routes import Operation, Route

CONSENT = ConsentSchema()
CLIENT_ID_PARAMETER = {"in": "path", "name": "client_id", "required": True, "type": "string", "minLength": 1,
                       "maxLength": 64, "description": "The client_id of the client the consent was given to."}


class Consents:
    """``GET /v1/internal/users/me/consents``."""

    def __init__(self, context):
        self.context = context

    def on_get(self, req, resp):
        identity = req.context.identity
        self.context.require(identity, "consents", "read", own=True)
        found = Clients(self.context).consents(identity.user.uuid)
        resp.media = {"consents": [CONSENT.dump(item) for item in found]}


class ConsentWithdrawal:
    """``DELETE /v1/private/users/me/consents/{client_id}``."""

    def __init__(self, context):
        self.context = context

    def on_delete(self, req, resp, client_id: str):
        identity = req.context.identity
        self.context.require(identity, "consents", "delete", own=True)
        Clients(self.context).withdraw(identity.user.uuid, client_id)
        resp.status = falcon.HTTP_204


def routes(context) -> list[Route]:
    return [
        Route("/v1/internal/users/me/consents", Consents(context), (
            Operation("get", "The calling user's consents to OAuth clients", "oauth", response=ConsentListSchema,
                      errors=(401, 403, 503),
                      description="What the user allowed each client on the consent page, oldest first."),
        )),
        Route("/v1/private/users/me/consents/{client_id}", ConsentWithdrawal(context), (
            Operation("delete", "Withdraw a consent", "oauth", status=204, errors=(401, 403, 404, 503),
                      description="The client asks again next time; the user's logins of that client end"
                                  " (their tokens are refused). 404 when there is no such consent."),
        ), parameters={"client_id": CLIENT_ID_PARAMETER}),
    ]
