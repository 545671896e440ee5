"""OAuth clients under ``/v1`` (docs/http/oauth.md): register, list, read, update, delete,
and give a confidential client a new secret. Policy resource ``oauth_clients`` (admins in
the shipped policy). ``{id}`` names a client by its id, its uuid or its client_id."""

from __future__ import annotations

import falcon

from locky.dump import dumper
from locky.http.media import QueryLoader
from locky.oauth.clients import Clients
from locky.oauth.schemas import (
    ClientSecretSchema,
    OAuthClientCreatedSchema,
    OAuthClientListSchema,
    OAuthClientRequestSchema,
    OAuthClientSchema,
    OAuthClientUpdateSchema,
)
from locky.routes import Operation, Route
from locky.schemas import ListQuerySchema

from .writes import body

RESOURCE = "oauth_clients"
TAG = "oauth"
CLIENT = OAuthClientSchema()
#: The ``{id}`` of these routes: not only a number (``Route.parameters``).
KEY_PARAMETER = {"in": "path", "name": "id", "required": True, "type": "string", "minLength": 1,
                 "maxLength": 64, "description": "The client's id, uuid or client_id."}


def location(client) -> str:
    return f"/v1/internal/oauth/clients/{client.id}"


class ClientReads:
    """``GET /v1/internal/oauth/clients[/{id}]``."""

    def __init__(self, context):
        self.context = context
        self.dump = dumper(CLIENT)
        self.load_query = QueryLoader(ListQuerySchema())

    def on_get(self, req, resp):
        self.context.require(req.context.identity, RESOURCE, "read")
        page = self.context.storage.oauth_clients.list(**self.load_query(req))
        resp.media = {"clients": [self.dump(item) for item in page.items], "next_after_id": page.next_after_id}

    def on_get_item(self, req, resp, id: str):
        self.context.require(req.context.identity, RESOURCE, "read")
        resp.media = self.dump(Clients(self.context).find(id))


class ClientWrites:
    """``POST``, ``PUT``, ``DELETE`` and the new secret under ``/v1/private/oauth/clients``."""

    def __init__(self, context):
        self.context = context
        self.dump = dumper(CLIENT)

    def on_post(self, req, resp):
        self.context.require(req.context.identity, RESOURCE, "create")
        made = Clients(self.context).create(body(self.context, req, OAuthClientRequestSchema()))
        resp.status = falcon.HTTP_201
        resp.location = location(made.client)
        answer = self.dump(made.client)
        if made.secret is not None:
            answer["client_secret"] = made.secret
        resp.media = answer

    def on_put_item(self, req, resp, id: str):
        clients = Clients(self.context)
        clients.find(id)  # 404 before 403 or 400, as for the other records
        self.context.require(req.context.identity, RESOURCE, "update")
        resp.media = self.dump(clients.update(id, body(self.context, req, OAuthClientUpdateSchema())))

    def on_delete_item(self, req, resp, id: str):
        clients = Clients(self.context)
        clients.find(id)
        self.context.require(req.context.identity, RESOURCE, "delete")
        clients.delete(id)
        resp.status = falcon.HTTP_204

    def on_post_secret(self, req, resp, id: str):
        clients = Clients(self.context)
        clients.find(id)
        self.context.require(req.context.identity, RESOURCE, "update")
        resp.media = {"client_secret": clients.rotate_secret(id).secret}


def routes(context) -> list[Route]:
    reads, writes = ClientReads(context), ClientWrites(context)
    body_errors = (400, 401, 403, 413, 415, 503)
    item = {"id": KEY_PARAMETER}
    return [
        Route("/v1/private/oauth/clients", writes, (
            Operation("post", "Register an OAuth client", TAG, status=201, body=OAuthClientRequestSchema,
                      response=OAuthClientCreatedSchema, errors=body_errors,
                      headers={"Location": "The new client's URL."},
                      description="Answers the client_id and, for a confidential client, its client_secret:"
                                  " this once (Locky keeps only its hash). Redirect URIs are absolute, without"
                                  " fragment or wildcard, https:// or http:// to a loopback host, matched"
                                  " exactly. A public client cannot have client_credentials; a client of"
                                  " authorization_code needs a redirect URI."),
        )),
        Route("/v1/internal/oauth/clients", reads, (
            Operation("get", "List OAuth clients", TAG, response=OAuthClientListSchema, query=ListQuerySchema,
                      errors=(400, 401, 403, 503), description="Keyset paging by id; never a secret."),
        )),
        Route("/v1/internal/oauth/clients/{id}", reads, (
            Operation("get", "Get one OAuth client", TAG, response=OAuthClientSchema, errors=(401, 403, 404, 503),
                      description="{id} is the client's id, uuid or client_id."),
        ), suffix="item", parameters=item),
        Route("/v1/private/oauth/clients/{id}", writes, (
            Operation("put", "Update an OAuth client", TAG, body=OAuthClientUpdateSchema,
                      response=OAuthClientSchema, errors=(400, 401, 403, 404, 413, 415, 503),
                      description="Only the fields present change; the type cannot change."),
            Operation("delete", "Delete an OAuth client (soft): its tokens stop working", TAG, status=204,
                      errors=(401, 403, 404, 503),
                      description="Every login it was given ends; its client_credentials tokens are refused."),
        ), suffix="item", parameters=item),
        Route("/v1/private/oauth/clients/{id}/secret", writes, (
            Operation("post", "Give a confidential client a new secret", TAG, response=ClientSecretSchema,
                      errors=(400, 401, 403, 404, 503),
                      description="The old secret stops working at once; tokens issued before keep"
                                  " working until they expire. 400 for a public client."),
        ), suffix="secret", parameters=item),
    ]
