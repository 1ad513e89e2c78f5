"""What a page shows, before any markup: the form's fields and, for a valid scenario, the results.

Each function here builds the context of one template (``templates/index.html``,
``partials/_results.html``, the detail tables); the templates only lay it out. Figures stay
integers until a template formats them with the display filters of :mod:`app.web.templating`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

from app.ledger.fields import FIELD_BY_NAME, FIELDS, GROUPS, Field, allowed_text
from app.ledger.fit import FitFinder
from app.ledger.ledger import Ledger
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.presets import DEVICES, PRESETS
from app.ledger.scenario import DEFAULT_SCENARIO, FieldError, Scenario, ScenarioError, parse_scenario
from app.receipts.display import gb, human_bytes, human_count
from app.receipts.links import canonical_query
from app.web.query import DERIVED
from app.web.results import Results, results

Control = Literal["input", "select", "model"]  # a text box, fixed choices, or the known models


@dataclass(frozen=True, slots=True)
class FormField:
    """One input of the form, ready to lay out (``macros/fields.html``)."""

    name: str
    label: str
    unit: str
    help: str  # the field's help and its allowed range, one sentence each
    value: str  # what was typed, or the scenario's value in human form
    error: FieldError | None
    derived: str | None  # for a derived field: what an empty field stands for
    control: Control
    options: tuple[str, ...]  # a select's values
    numeric: bool  # numbers: a decimal keypad and no spell checking; text: a length cap
    maxlength: int  # for text
    datalist: str | None  # the id of the suggestions list (device capacities)

    @property
    def pasted_model(self) -> bool:
        """The model field holds a pasted config.json (``cfg:…``), which no option names."""
        return self.control == "model" and self.value.startswith("cfg:")

    @property
    def described_by(self) -> str:
        return f"h-{self.name} e-{self.name}" + (f" d-{self.name}" if self.derived is not None else "")


@dataclass(frozen=True, slots=True)
class FieldGroup:
    id: str
    title: str
    fields: tuple[FormField, ...]


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


def _control(f: Field) -> tuple[Control, tuple[str, ...]]:
    if f.name == "model":
        return "model", ()
    if f.choices:
        return "select", tuple(str(c) for c in f.choices)
    if f.options:
        return "select", f.options
    return "input", ()


def form_field(f: Field, value: str, error: FieldError | None, derived: str | None) -> FormField:
    control, options = _control(f)
    return FormField(
        name=f.name,
        label=f.label,
        unit=f.unit,
        help=f"{f.help} Allowed: {allowed_text(f)}.",
        value=value,
        error=error,
        derived=derived,
        control=control,
        options=options,
        numeric=f.kind != "text",
        maxlength=f.maximum,
        datalist="devices" if f.name == "capacity_bytes" else None,
    )


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
            out.append(form_field(f, typed or "", errors.get(f.name), derived_hint(s, f.name)))
        else:
            value = typed if typed is not None else display_value(f, getattr(shown, f.name))
            out.append(form_field(f, value, errors.get(f.name), None))
    return out


def field_groups(fields: list[FormField]) -> list[FieldGroup]:
    """The form's fieldsets, in the order of ``GROUPS``."""
    return [
        FieldGroup(gid, title, tuple(ff for ff in fields if FIELD_BY_NAME[ff.name].group == gid))
        for gid, title in GROUPS
    ]


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


@dataclass(frozen=True, slots=True)
class View:
    """One request's page: what was typed, the scenario (None while invalid), its results."""

    raw: Mapping[str, str]
    scenario: Scenario | None
    errors: Mapping[str, FieldError]
    query: str  # the canonical query string (the address bar and every link)
    title: str
    results: Results | None


def view(raw: Mapping[str, str], scenario: Scenario | None, error: ScenarioError | None) -> View:
    errors = error.by_field() if error else {}
    if scenario is None:
        return View(raw, None, errors, raw_query(raw, errors), "fix the highlighted fields", None)
    return View(raw, scenario, errors, canonical_query(scenario), title_of(scenario), results(scenario))


def title_of(s: Scenario) -> str:
    """The results' heading: the scenario's name, or what it is."""
    return s.name or f"{count_text(s.params)} parameters on {s.dp:,} ranks"


def _linked(path: str, query: str) -> str:
    return f"{path}?{query}" if query else path


def results_context(v: View, *, oob: bool) -> dict[str, Any]:
    """``partials/_results.html``: the results (or the invalid fields), and, for a live update
    (``oob``), every field's error slot and derived hint and the paste form's ``keep`` input, which
    htmx swaps out of band (the form itself is not re-rendered)."""
    return {
        "title": v.title,
        "query": v.query,
        "q": "?" + v.query if v.query else "",  # the query, ready to follow a path
        "results": v.results,
        "errors": v.errors,
        "oob": oob,
        "error_slots": [(f.name, v.errors.get(f.name)) for f in FIELDS],
        "derived_hints": [(name, derived_hint(v.scenario, name)) for name in DERIVED_ORDER],
    }


def page_context(v: View, *, paste_error: str | None = None, pasted_config: str = "") -> dict[str, Any]:
    """``index.html``: the form with what was typed, the paste form, the devices, the results."""
    return {
        **results_context(v, oob=False),
        "alternate": _linked("/api/estimate", v.query),
        "presets": PRESETS,
        "devices": DEVICES,
        "models": KNOWN_MODELS,
        "groups": field_groups(form_fields(v.raw, v.scenario, v.errors)),
        "paste_error": paste_error,
        "pasted_config": pasted_config,
    }


def lines_context(ledger: Ledger) -> dict[str, Any]:
    """``partials/_lines.html``: every ledger line, with the stage that holds it."""
    return {"lines": [(st.stage, line) for st in ledger.stages for line in st.lines]}


def fit_table_context(fit: FitFinder) -> dict[str, Any]:
    """``partials/_fit_table.html``: the fit chart's numbers, the peak of every stage at each D."""
    return {"curve": fit.curve}


def detail_page_context(title: str, query: str, partial: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """``detail.html``: one detail table as a page of its own, with a way back to the scenario."""
    return {**table, "title": title, "back": _linked("/", query), "table": partial}
