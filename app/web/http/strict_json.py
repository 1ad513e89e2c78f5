"""JSON request bodies read strictly (:func:`app.ledger.json_text.loads_strict`): a key given twice, or text
that cannot be written back, is a 422 naming where, never a value silently dropped or a 500 while answering.

FastAPI reads a route's JSON body through ``Request.json()``; its documented way to change that is a custom
``Request`` served by a custom ``APIRoute`` (FastAPI, "Custom Request and APIRoute class"), which the API's router
uses. The refusal is an ``HTTPException`` in the lab's ``detail`` shape, which FastAPI's body parsing lets through.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute

from app.ledger.json_text import JSONTextError, loads_strict


def json_text_detail(exc: JSONTextError, location: str) -> dict[str, Any]:
    """The lab's 422 entry for ``exc``, at ``location`` (``body``, a form field)."""
    return {"loc": [location, *exc.path], "field": exc.path[-1], "msg": exc.message, "type": exc.kind}


class StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = loads_strict(await self.body())
            except JSONTextError as exc:
                raise HTTPException(status_code=422, detail=[json_text_detail(exc, "body")]) from None
        return self._json


class StrictJSONRoute(APIRoute):
    """A route whose JSON body is read by :func:`loads_strict`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict_handler
