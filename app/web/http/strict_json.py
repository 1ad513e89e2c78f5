"""JSON request bodies read strictly (:func:`app.ledger.json_text.loads_strict`): a key given twice, or text that
cannot be written back, is a 422 naming where, never a value silently dropped or a 500 while answering.

FastAPI reads a JSON body with Python's ``json``, which keeps the last of a repeated key and takes lone surrogates.
The API's router declares :func:`strict_json_body` as a dependency of every route (FastAPI, "Dependencies in path
operation decorators"): it reads the body FastAPI has already read (Starlette keeps it) once more, strictly, before
the route runs, and refuses with an ``HTTPException`` in the lab's ``detail`` shape.
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request

from app.ledger.json_text import JSONTextError, loads_strict


def json_text_detail(exc: JSONTextError, location: str) -> dict[str, Any]:
    """The lab's 422 entry for ``exc``, at ``location`` (``body``, a form field)."""
    return {"loc": [location, *exc.path], "field": exc.path[-1], "msg": exc.message, "type": exc.kind}


async def strict_json_body(request: Request) -> None:
    """Refuse a JSON body with a repeated key or a lone surrogate (a 422 naming it); any other body passes."""
    if request.method not in ("POST", "PUT", "PATCH") or "json" not in request.headers.get("content-type", ""):
        return
    body = await request.body()
    if not body:
        return
    try:
        loads_strict(body)
    except JSONTextError as exc:
        raise HTTPException(status_code=422, detail=[json_text_detail(exc, "body")]) from None
    except (ValueError, RecursionError):  # not JSON at all: FastAPI's own reading words that
        return
