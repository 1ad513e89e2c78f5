"""A route class for endpoints that read the request themselves.

Every endpoint of the lab takes only the ``Request`` and returns a ``Response``: it parses the
scenario with the core's own parser (one error per field, human sizes) and documents its
parameters through ``openapi_extra``, built from the field table. FastAPI's dependency solver
would still parse the query string into ``QueryParams`` and resolve an empty dependency graph on
every request; this route class's ``handle`` calls the endpoint directly, and FastAPI keeps
documenting it.

``handle`` also skips FastAPI's per-request wrapper (two ``AsyncExitStack``s for dependencies
with ``yield``, of which these endpoints have none, and a second exception-handler layer: an
exception an endpoint raises reaches the app's handlers through Starlette's
``ExceptionMiddleware`` instead, as a 404 already does). It assumes what the lab does: routers
included without a prefix or dependencies of their own, inside the app (a 405 is raised for the
app's handler, which names every method the path allows).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import cast

from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

Endpoint = Callable[[Request], Awaitable[Response]]


class DirectRoute(APIRoute):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The router hands over a path match whose method may differ (a partial match): a 405,
        # whose Allow header the app's handler fills in from every route on the path.
        if self.methods and scope["method"] not in self.methods:
            raise HTTPException(status_code=405)
        response = await cast(Endpoint, self.endpoint)(Request(scope, receive, send))
        await response(scope, receive, send)
