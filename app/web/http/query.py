"""The page's reading of a scenario: what the form sent, and the scenario or its field errors."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request

from app.ledger.scenario import FIELD_NAMES, MODEL_FILLED, Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.stacks import STACK_CHOICES


def query_dict(request: Request) -> dict[str, str]:
    """The query string as a dict, the last value of a repeated key winning."""
    return dict(request.query_params)


# Fields whose default follows other inputs (the model, params, the parameter and gradient widths, D).
# The page's form leaves them empty unless the user types a value, so an empty one means "use the default".
DERIVED = MODEL_FILLED | {"gather_bytes", "reduce_bytes", "shard_group", *STACK_CHOICES}


def form_fields(query: Mapping[str, str]) -> dict[str, str]:
    """The scenario fields the page's form sent: an empty derived field means its default."""
    return {k: v for k, v in query.items() if k in FIELD_NAMES and (v.strip() or k not in DERIVED)}


def read_scenario(raw: Mapping[str, object], *, strict: bool) -> tuple[Scenario | None, ScenarioError | None]:
    try:
        return parse_scenario(raw, allow_unknown=not strict), None
    except ScenarioError as exc:
        return None, exc
