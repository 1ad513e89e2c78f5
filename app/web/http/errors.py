"""Every 4xx the lab writes about its input, in one shape: FastAPI's ``detail`` list, each entry
naming its field (``loc``, ``field``), what was wrong and what is allowed (``msg``, ``allowed``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.ledger.scenario import FieldError, field_errors


def field_detail(e: FieldError, location: str) -> dict[str, Any]:
    return {
        "loc": [location, e.field],
        "field": e.field,
        "msg": f"{e.field}: {e.message} (allowed: {e.allowed})",
        "allowed": e.allowed,
        "type": "value_error",
    }


def unprocessable(details: Iterable[dict[str, Any]]) -> JSONResponse:
    return JSONResponse({"detail": list(details)}, status_code=422)


def body_error(message: str, kind: str, *loc: str) -> JSONResponse:
    """A 422 about the request body as a whole or one of its keys (``field`` when one is named)."""
    detail: dict[str, Any] = {"loc": ["body", *loc], "msg": message, "type": kind}
    if loc:
        detail["field"] = loc[-1]
    return unprocessable([detail])


def validation_error_response(exc: RequestValidationError) -> JSONResponse:
    """FastAPI's validation errors in the lab's shape: a body that is not a JSON object is one
    error about the body; otherwise one entry per field, worded by the scenario's own mapping."""
    errors = exc.errors()
    whole = next((e for e in errors if e.get("type") == "json_invalid" or len(e.get("loc", ())) < 2), None)
    if whole is not None:
        kind = str(whole.get("type", ""))
        message = "the body is not valid JSON" if kind == "json_invalid" else "the body must be a JSON object"
        return unprocessable([{"loc": ["body"], "msg": message, "type": kind}])
    location = str(errors[0]["loc"][0]) if errors else "query"
    return unprocessable(field_detail(e, location) for e in field_errors(errors))
