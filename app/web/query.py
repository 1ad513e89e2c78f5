"""Reading a scenario from a query string or a JSON body, with field-level errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.datastructures import QueryParams

from app.ledger.scenario import FIELD_NAMES, FieldError, Scenario, ScenarioError, parse_scenario


def scenario_fields(params: QueryParams) -> dict[str, str]:
    """The scenario fields of a query string (the last value wins; other keys are ignored)."""
    return {k: v for k, v in params.items() if k in FIELD_NAMES}


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
