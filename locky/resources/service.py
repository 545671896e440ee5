"""Health: whether the service and its storage answer."""

from __future__ import annotations

import falcon

from locky.routes import Operation, Route


class Health:
    def __init__(self, context):
        self.context = context

    def on_get(self, req, resp):
        if self.context.storage.ping():
            resp.media = {"status": "ok"}
        else:
            resp.status = falcon.HTTP_503
            resp.media = {"status": "unavailable"}


def routes(context) -> list[Route]:
    return [
        Route("/v1/public/health", Health(context), (
            Operation("get", "Service health", "service", response="Health", public=True, errors=(503,),
                      description="503 with status unavailable when storage does not answer."),
        )),
    ]
