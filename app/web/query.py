"""Reading a scenario from a query string or a JSON body, with field-level errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus

from starlette.requests import Request

from app.ledger.scenario import FIELD_NAMES, MODEL_FILLED, FieldError, Scenario, ScenarioError, parse_scenario


def query_dict(request: Request) -> dict[str, str]:
    """The query string as a dict, the last value of a repeated key winning.

    Starlette's ``request.query_params`` runs ``parse_qsl`` on every request; a scenario's
    query is a handful of plain ``key=123`` pairs, so only parts with escapes are unquoted.
    """
    text = request.scope["query_string"].decode("utf-8", "replace")
    out: dict[str, str] = {}
    for part in text.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        if "%" in part or "+" in part:
            key, value = unquote_plus(key), unquote_plus(value)
        out[key] = value
    return out


# Fields whose default follows other inputs (the model, params, the parameter width). The page's
# form leaves them empty unless the user types a value, so an empty one means "use the default".
DERIVED = MODEL_FILLED | {"gather_bytes"}


def form_fields(query: Mapping[str, str]) -> dict[str, str]:
    """The scenario fields the page's form sent: an empty derived field means its default."""
    return {k: v for k, v in query.items() if k in FIELD_NAMES and (v.strip() or k not in DERIVED)}


def read_scenario(raw: Mapping[str, object], *, strict: bool) -> tuple[Scenario | None, ScenarioError | None]:
    try:
        return parse_scenario(raw, allow_unknown=not strict), None
    except ScenarioError as exc:
        return None, exc


def error_body(error: ScenarioError, location: str) -> dict[str, Any]:
    """A 422 body in FastAPI's shape, naming each bad field and its allowed range."""
    return {"detail": [_detail(e, location) for e in error.errors]}


def _detail(e: FieldError, location: str) -> dict[str, Any]:
    return {
        "loc": [location, e.field],
        "field": e.field,
        "msg": f"{e.field}: {e.message} (allowed: {e.allowed})",
        "allowed": e.allowed,
        "type": "value_error",
    }
