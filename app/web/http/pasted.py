"""A pasted config.json on the scenario it was pasted on: what the user set stays, and what had to move is named.

The paste form carries the page's canonical query (``keep``), which holds only the inputs that differ from their
defaults: each one the user (or a preset) set. All of them stay, except what the pasted model now supplies
(``params``, ``unit_params``, ``activation_bytes``: the old model's figures) and the old run's ``name``. An input
the new model cannot take (``tp`` not dividing its heads, a ``seq_len`` past its learned positions) goes back to
its default. Every input that moved is listed in the page address's ``moved`` parameter, which the page shows as
a notice in view (:func:`moved_names`, :func:`moved_notice`) until the first edit.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.ledger.scenario import FIELD_NAMES, MODEL_FILLED, Scenario, ScenarioError
from app.ledger.scenario.fields import FIELD_BY_NAME
from app.web.http.query import read_scenario

MOVED = "moved"  # the page parameter naming the inputs a paste moved
_OWNED = MODEL_FILLED | {"model", "name"}  # what the pasted model replaces: its own figures, the run's name


def paste_model(keep: Mapping[str, str], reference: str) -> tuple[Scenario | None, ScenarioError | None, list[str]]:
    """The scenario of ``keep`` on the model ``reference``, and the inputs that moved (in the form's order).
    Inputs the model refuses are dropped until it reads (each round drops at least one: bounded by the inputs)."""
    kept = {k: v for k, v in keep.items() if k in FIELD_NAMES and k not in _OWNED}
    moved = {k for k in keep if k in _OWNED and k != "model"}
    scenario, error = read_scenario({**kept, "model": reference}, strict=False)
    while scenario is None and error is not None:
        blamed = {e.field for e in error.errors} & kept.keys()
        if not blamed:
            break  # the model itself cannot be held (its size): nothing kept is to blame
        moved |= blamed
        kept = {k: v for k, v in kept.items() if k not in blamed}
        scenario, error = read_scenario({**kept, "model": reference}, strict=False)
    return scenario, error, [name for name in FIELD_BY_NAME if name in moved]


def moved_names(query: Mapping[str, str]) -> tuple[str, ...]:
    """The inputs the page's ``moved`` parameter names (scenario fields only, each once, in the form's order)."""
    named = set(query.get(MOVED, "").split(","))
    return tuple(name for name in FIELD_BY_NAME if name in named)


def moved_notice(names: tuple[str, ...]) -> list[str]:
    """One line per moved input: its label and why it moved."""
    lines = []
    for name in names:
        label = FIELD_BY_NAME[name].label
        if name in MODEL_FILLED:
            lines.append(f"{label}: the pasted model supplies it")
        elif name == "name":
            lines.append(f"{label}: it named the run before the paste")
        else:
            lines.append(f"{label}: your value does not suit the pasted model, so it takes its default")
    return lines
