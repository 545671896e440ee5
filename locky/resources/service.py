"""Health: whether the service and its storage answer, and keep what is written.

``storage.ping()`` says no while storage does not answer, and also while it refuses
writes (its disk is full, it is read-only): a service that cannot record a login is
not well, even if it reads. The bundled storage learns that from the writes that fail
and probes a few seconds apart until one works again (``locky_pony.guard``); health
itself writes nothing, so it costs no more while all is well. Nor does it cost a round
trip per call: the bundled storage asks the database at most once a second per process
while it answers, and at once after any statement of the process found it away
(``locky_pony.liveness``); an outage nobody met yet shows within that second.
"""

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
                      description="503 with status unavailable when storage does not answer, or refuses writes (its disk is full, it is read-only)."),
        )),
    ]
