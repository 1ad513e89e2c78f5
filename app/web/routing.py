"""A route class for endpoints that read the request themselves.

Every endpoint of the lab takes only the ``Request`` and returns a ``Response``: it parses the
scenario with the core's own parser (one error per field, human sizes) and documents its
parameters through ``openapi_extra``, built from the field table. FastAPI's dependency solver
would still parse the query string into ``QueryParams`` and resolve an empty dependency graph on
every request; this route class calls the endpoint directly, and FastAPI keeps documenting it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, cast

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

Endpoint = Callable[[Request], Awaitable[Response]]


class DirectRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = cast(Endpoint, self.endpoint)

        async def handler(request: Request) -> Response:
            return await endpoint(request)

        return handler
