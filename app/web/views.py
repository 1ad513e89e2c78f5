"""What a page shows, before any HTML: the form's fields and, for a valid scenario, the estimate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from app.ledger.estimate import Estimate, estimate
from app.ledger.fields import FIELD_BY_NAME, FIELDS, Field
from app.ledger.scenario import DEFAULT_SCENARIO, FieldError, Scenario, ScenarioError, parse_scenario
from app.receipts.display import gb, human_bytes, human_count
from app.receipts.links import canonical_query
from app.web.query import DERIVED


@dataclass(slots=True)  # a value: never mutated; not frozen because frozen __init__ costs 5x (hot path)
class FormField:
    field: Field
    value: str
    error: FieldError | None
    derived: str | None = None  # for a derived field: what an empty field stands for


def derived_hint(s: Scenario | None, name: str) -> str:
    """What an empty derived field stands for, e.g. "empty = from config: 6.74B (6,738,415,616)"."""
    if s is None:
        return ""
    field = FIELD_BY_NAME[name]
    default = s.default_for(name)
    assert isinstance(default, int)
    if name == "gather_bytes":
        return f"empty = the parameter width ({default} B)"
    if s.model and name in ("params", "unit_params"):
        label = "from config"
    elif name == "activation_bytes":
        label = "modelled" if s.model else "the seed's placeholder"
    elif name == "unit_params":
        label = "default min(400M, N)"
    else:
        label = "default"
    if field.kind == "bytes":
        return f"empty = {label}: {default:,} B ({gb(default)})"
    short = display_value(field, default)
    return f"empty = {label}: {default:,}" + (f" ({short})" if not short.isdigit() else "")


DERIVED_ORDER: tuple[str, ...] = tuple(f.name for f in FIELDS if f.name in DERIVED)


def display_value(field: Field, value: int | str) -> str:
    if isinstance(value, str):
        return value
    if field.kind == "count":
        return human_count(value)
    if field.kind == "bytes":
        return human_bytes(value)
    return str(value)


def form_fields(raw: Mapping[str, str], s: Scenario | None, errors: Mapping[str, FieldError]) -> list[FormField]:
    """Each field with what the user typed (when present) or the scenario's value in human form;
    a derived field stays empty unless typed, with a hint saying what empty stands for."""
    shown = s or DEFAULT_SCENARIO
    out = []
    for f in FIELDS:
        typed = raw.get(f.name)
        if typed is not None and f.kind in ("count", "bytes") and typed.isascii() and typed.isdigit():
            typed = display_value(f, int(typed))  # a link's 85899345920 reads back as 80GiB: same value
        if f.name in DERIVED:
            out.append(FormField(f, typed or "", errors.get(f.name), derived_hint(s, f.name)))
        else:
            value = typed if typed is not None else display_value(f, getattr(shown, f.name))
            out.append(FormField(f, value, errors.get(f.name)))
    return out


def derived_slots(s: Scenario | None) -> list[tuple[str, str]]:
    """The derived fields' hints, swapped out of band by each fragment."""
    return [(name, derived_hint(s, name)) for name in DERIVED_ORDER]


def raw_query(raw: Mapping[str, str], errors: Mapping[str, FieldError]) -> str:
    """The address while some inputs are invalid: the bad ones as typed, plus the valid ones that
    differ from their defaults (sorted), so a reload shows the same errors and nothing else."""
    kept = []
    for name, value in raw.items():
        if name in errors:
            kept.append((name, value))
            continue
        try:
            alone = parse_scenario({name: value})
        except ScenarioError:
            kept.append((name, value))
            continue
        if getattr(alone, name) != getattr(DEFAULT_SCENARIO, name):
            kept.append((name, value))
    return urlencode(sorted(kept))


def count_text(value: int) -> str:
    short = human_count(value)
    return f"{value:,}" if short.isdigit() else short


@dataclass(slots=True)
class View:
    """One request's page: what was typed, the scenario (None while invalid), its estimate."""

    raw: Mapping[str, str]
    scenario: Scenario | None
    errors: Mapping[str, FieldError]
    query: str  # the canonical query string (the address bar and every link)
    title: str
    estimate: Estimate | None


def view(raw: Mapping[str, str], scenario: Scenario | None, error: ScenarioError | None) -> View:
    errors = error.by_field() if error else {}
    if scenario is None:
        return View(raw, None, errors, raw_query(raw, errors), "fix the highlighted fields", None)
    return View(raw, scenario, errors, canonical_query(scenario), title_of(scenario), estimate(scenario))


def title_of(s: Scenario) -> str:
    """The results' heading: the scenario's name, or what it is."""
    return s.name or f"{count_text(s.params)} parameters on {s.dp:,} ranks"
