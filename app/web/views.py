"""What the templates render: the form's fields and, for a valid scenario, the whole estimate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup, escape

from app.ledger.estimate import Estimate, estimate
from app.ledger.fields import FIELD_BY_NAME, FIELDS, GROUPS, Field, allowed_text
from app.ledger.scenario import DEFAULT_SCENARIO, FieldError, Scenario, ScenarioError, parse_scenario
from app.receipts.display import gb, gib, human_bytes, human_count, integer
from app.receipts.links import canonical_query
from app.receipts.receipt import DISCLAIMER, activation_source, fsdp2_section
from app.web.charts import fit_chart, peak_chart
from app.web.query import DERIVED
from app.web.results_view import results_view


@dataclass(frozen=True, slots=True)
class FormField:
    field: Field
    value: str
    error: FieldError | None
    help: Markup  # the field's help and allowed range, escaped once at import
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
    short = display_value(field, default)
    if field.kind == "bytes":
        return f"empty = {label}: {default:,} B ({gb(default)})"
    return f"empty = {label}: {default:,}" + (f" ({short})" if not short.isdigit() else "")


DERIVED_ORDER: tuple[str, ...] = tuple(f.name for f in FIELDS if f.name in DERIVED)
_HELP: dict[str, Markup] = {f.name: escape(f"{f.help} Allowed: {allowed_text(f)}.") for f in FIELDS}


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
            out.append(FormField(f, typed or "", errors.get(f.name), _HELP[f.name], derived_hint(s, f.name)))
        else:
            value = typed if typed is not None else display_value(f, getattr(shown, f.name))
            out.append(FormField(f, value, errors.get(f.name), _HELP[f.name]))
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


@dataclass(frozen=True, slots=True)
class ErrorSlot:
    """What a field's error slot needs in a fragment (the form itself is not re-rendered)."""

    field: Field
    error: FieldError | None


def _count(value: int) -> str:
    short = human_count(value)
    return f"{value:,}" if short.isdigit() else short


def fsdp2_note(e: Estimate) -> str:
    section = fsdp2_section(e)
    return "" if section is None else str(section["note"])


def context(
    raw: Mapping[str, str], scenario: Scenario | None, error: ScenarioError | None, *, page: bool = True
) -> dict[str, Any]:
    """The template context: the whole page's, or (``page=False``) only what the fragment shows."""
    errors = error.by_field() if error else {}
    ctx: dict[str, Any] = {"errors": errors, "disclaimer": DISCLAIMER, "paste_error": None, "pasted_config": ""}
    if page:
        fields = form_fields(raw, scenario, errors)
        ctx.update(
            groups=[(gid, title, [ff for ff in fields if ff.field.group == gid]) for gid, title in GROUPS],
            fields=fields,
        )
    else:
        ctx["fields"] = [ErrorSlot(f, errors.get(f.name)) for f in FIELDS]
        ctx["derived"] = derived_slots(scenario)
    if scenario is None:
        ctx.update(valid=False, query=raw_query(raw, errors), title="fix the highlighted fields")
        return ctx
    result: Estimate = estimate(scenario)
    stages = result.ledger.stages
    fitting = [st.stage for st in stages if st.peak.fits]
    ctx.update(
        valid=True,
        query=canonical_query(scenario),
        scenario=scenario,
        e=result,
        v=results_view(result, with_lines=page),
        inline_lines=page,
        chart=peak_chart(result.ledger),
        fit_chart=fit_chart(result.fit.curve, scenario.capacity_bytes),
        activation_source=activation_source(result),
        least_stage=fitting[0] if fitting else None,
        title=scenario.name or f"{_count(scenario.params)} parameters on {scenario.dp:,} ranks",
        capacity_gb=gb(scenario.capacity_bytes),
        capacity_gib=gib(scenario.capacity_bytes),
        capacity_raw=integer(scenario.capacity_bytes),
        buckets_gb=gb(scenario.bucket_bytes),
        overhead_gb=gb(scenario.overhead_bytes),
        gather_formula=stages[3].peak.gather_formula,
        activations_formula=stages[0].peak.activations_formula,
        contingency_formula=stages[3].peak.contingency_formula,
        comm_evidence=stages[0].communication.evidence,
        fsdp2_note=fsdp2_note(result),
    )
    return ctx
