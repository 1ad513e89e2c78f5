"""The page's reading of a scenario: what the form sent, and the scenario or its field errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from difflib import get_close_matches

from starlette.requests import Request

from app.ledger.scenario import FIELD_NAMES, MODEL_FILLED, FieldError, Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.stacks import STACK_CHOICES


def query_dict(request: Request) -> dict[str, str]:
    """The query string as a dict, the last value of a repeated key winning (:func:`repeated_fields` refuses a
    repeated scenario field first)."""
    return dict(request.query_params)


def repeated_fields(request: Request) -> list[FieldError]:
    """A scenario field the query string gives more than once (``dp=16&dp=32``): an error on that field, not the
    last value silently winning."""
    counts = Counter(k for k, _ in request.query_params.multi_items() if k in FIELD_NAMES)
    return [FieldError(name, f"given {times} times in the query string", "one value")
            for name, times in counts.items() if times > 1]  # fmt: skip


# Fields whose default follows other inputs (the model, params, the parameter and gradient widths, D).
# The page's form leaves them empty unless the user types a value, so an empty one means "use the default".
DERIVED = MODEL_FILLED | {"gather_bytes", "reduce_bytes", "shard_group", *STACK_CHOICES}


def form_fields(query: Mapping[str, str]) -> dict[str, str]:
    """The scenario fields the page's form sent: an empty derived field means its default."""
    return {k: v for k, v in query.items() if k in FIELD_NAMES and (v.strip() or k not in DERIVED)}


# The page's own parameters, beside the scenario's fields: the preset menu's and presenter mode's.
PAGE_PARAMETERS = frozenset({"preset", "present", "moved"})  # "moved": app.web.http.pasted


def unknown_names(query: Mapping[str, str]) -> tuple[str, ...]:
    """The page's notice for the query's names that are no scenario field (the API refuses them: a 422): each
    with the field it most likely meant (``DP`` → ``dp``), bounded to the first few."""
    unknown = [k for k in query if k not in FIELD_NAMES and k not in PAGE_PARAMETERS]
    out = []
    for name in unknown[:5]:
        shown = name if len(name) <= 40 else name[:40] + "…"
        near = get_close_matches(name.lower(), FIELD_NAMES, n=1, cutoff=0.8)
        out.append(f"{shown} (did you mean {near[0]}?)" if near else shown)
    if len(unknown) > 5:
        out.append(f"and {len(unknown) - 5:,} more")
    return tuple(out)


def read_scenario(
    raw: Mapping[str, object], *, strict: bool, repeated: Sequence[FieldError] = ()
) -> tuple[Scenario | None, ScenarioError | None]:
    """The scenario ``raw`` describes, or every error: ``repeated`` (:func:`repeated_fields`) first."""
    try:
        scenario = parse_scenario(raw, allow_unknown=not strict)
    except ScenarioError as exc:
        named = {e.field for e in repeated}
        return None, ScenarioError([*repeated, *(e for e in exc.errors if e.field not in named)])
    return (None, ScenarioError(repeated)) if repeated else (scenario, None)
