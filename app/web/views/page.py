"""What a page shows, before any markup: the form's fields and, for a valid scenario, the results.

Each function here builds the context of one template (``templates/index.html``,
``partials/_results.html``, the detail tables); the templates only lay it out. Figures stay
integers until a template formats them with the display filters of :mod:`app.web.http.templating`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

from app.interop.deepspeed.reader import DEEPSPEED, TRANSFORMERS
from app.ledger.ledger import Ledger
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.peak.fit import FitFinder
from app.ledger.scenario import DEFAULT_SCENARIO, FieldError, Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.fields import FIELD_BY_NAME, FIELDS, GROUPS, Field, allowed_text
from app.ledger.scenario.links import canonical_query
from app.ledger.scenario.presets import DEVICES, PRESETS, Preset
from app.receipts.display import gb, gib, human_bytes, human_count
from app.web.http.query import DERIVED
from app.web.views.results import Results, device_names, results

Control = Literal["input", "select", "model"]  # a text box, fixed choices, or the known models

# Fields that can hold a valid but implausible value (see :func:`field_notes`): each has a slot
# beside it, ``w-<name>``, for the warning or note, which a live update refreshes out of band.
NOTED: tuple[str, ...] = ("seq_len", "capacity_bytes")


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
    warning: str | None = None  # valid but implausible: what was probably meant (``field_notes``)
    note: str | None = None  # how the value reads, e.g. a device's "80GB" that is 80 GiB

    @property
    def noted(self) -> bool:
        """The field has a warning slot (``w-<name>``), filled or empty."""
        return self.name in NOTED

    @property
    def pasted_model(self) -> bool:
        """The model field holds a pasted config.json (``cfg:…``), which no option names."""
        return self.control == "model" and self.value.startswith("cfg:")

    @property
    def described_by(self) -> str:
        derived = f" d-{self.name}" if self.derived is not None else ""
        return f"h-{self.name} e-{self.name}" + derived + (f" w-{self.name}" if self.noted else "")


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
    if name == "reduce_bytes":
        return f"empty = the gradient width ({default} B)"
    if name == "shard_group":
        return f"empty = D ({default:,}): one group, plain ZeRO"
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
    return f"empty = {label}: {default:,}" + (f" ({short})" if short != f"{default:,}" else "")


DERIVED_ORDER: tuple[str, ...] = tuple(f.name for f in FIELDS if f.name in DERIVED)


def display_value(field: Field, value: int | str) -> str:
    if isinstance(value, str):
        return value
    if field.kind == "count":
        return count_text(value)
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


def form_field(
    f: Field,
    value: str,
    error: FieldError | None,
    derived: str | None,
    notes: tuple[str | None, str | None] = (None, None),
) -> FormField:
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
        warning=notes[0],
        note=notes[1],
    )


def form_fields(raw: Mapping[str, str], s: Scenario | None, errors: Mapping[str, FieldError]) -> list[FormField]:
    """Each field with what the user typed (when present) or the scenario's value in human form;
    a derived field stays empty unless typed, with a hint saying what empty stands for."""
    shown = s or DEFAULT_SCENARIO
    notes = field_notes(raw, s, errors)
    out = []
    for f in FIELDS:
        typed = raw.get(f.name)
        if typed is not None and f.kind in ("count", "bytes") and typed.isascii() and typed.isdigit():
            typed = display_value(f, int(typed))  # a link's 85899345920 reads back as 80GiB: same value
        note = notes.get(f.name, (None, None))
        if f.name in DERIVED:
            out.append(form_field(f, typed or "", errors.get(f.name), derived_hint(s, f.name), note))
        else:
            value = typed if typed is not None else display_value(f, getattr(shown, f.name))
            out.append(form_field(f, value, errors.get(f.name), None, note))
    return out


_DECIMAL_SUFFIX = re.compile(r"\s*([0-9]+)\s*([kKmM])\s*")
_BINARY_OF: dict[str, tuple[int, str]] = {"k": (2**10, "Ki"), "m": (2**20, "Mi")}


def _value_of(name: str, raw: Mapping[str, str], s: Scenario | None) -> int | None:
    """The field's value: the scenario's, or (while another field is invalid) its own reading."""
    if s is not None:
        value = getattr(s, name)
        return value if isinstance(value, int) else None
    typed = raw.get(name)
    if typed is None:
        value = getattr(DEFAULT_SCENARIO, name)
        return value if isinstance(value, int) else None
    try:
        value = getattr(parse_scenario({name: typed}), name)
    except ScenarioError:
        return None
    return value if isinstance(value, int) else None


def field_notes(
    raw: Mapping[str, str], s: Scenario | None, errors: Mapping[str, FieldError]
) -> dict[str, tuple[str | None, str | None]]:
    """For each field of ``NOTED``: (warning, note). A warning is a valid value that is most likely
    not what was meant (a capacity under 1 GB, ``4k`` tokens read as 4,000); a note says how a value
    reads (a device's "80GB" of HBM is 80 GiB = 85.90 GB). A field with an error has neither."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for name in NOTED:
        value = None if name in errors else _value_of(name, raw, s)
        typed = (raw.get(name) or "").strip()
        warning: str | None = None
        note: str | None = None
        if value is None:
            pass
        elif name == "capacity_bytes":
            shown = typed or f"{value:,}"
            if value < 10**9:
                if shown.isdigit() and value < 10**6:
                    warning = f"{shown} means {value:,} bytes — did you mean {shown}GB or {shown}GiB?"
                else:
                    warning = f"{shown} is only {value:,} bytes ({gb(value)}), under 1 GB — did you mean GB or GiB?"
            names = device_names(value)
            if names:
                note = (
                    f"{value:,} B = {gib(value)} = {gb(value)}: the "
                    f"{' or '.join(names)}. Its datasheet's GB are GiB (HBM comes in powers of two)."
                )
        elif name == "seq_len":
            match = _DECIMAL_SUFFIX.fullmatch(typed)
            if match:
                number, suffix = match[1], match[2].lower()
                size, binary = _BINARY_OF[suffix]
                meant = int(number) * size
                warning = f"{value:,} tokens — did you mean {number}{binary} = {meant:,}? (type {meant})"
        out[name] = (warning, note)
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
    """A count as it reads best: ``7B``, ``6.74B``, ``400M``, else grouped digits (``4,096``, not
    ``4.096K``: below a million a suffix hides more than it saves)."""
    short = human_count(value)
    return f"{value:,}" if value < 10**6 or short.isdigit() else short


@dataclass(frozen=True, slots=True)
class View:
    """One request's page: what was typed, the scenario (None while invalid), its results."""

    raw: Mapping[str, str]
    scenario: Scenario | None
    errors: Mapping[str, FieldError]
    query: str  # the canonical query string (every link; the address bar with ``preset`` first)
    title: str
    results: Results | None
    preset: Preset | None = None  # the preset this scenario still is, if any: its id stays in the address
    present: bool = False  # presenter mode (``present=1``): how the page shows, not a scenario field

    @property
    def address(self) -> str:
        return address_of(self.query, self.preset)

    @property
    def page_address(self) -> str:
        """The address bar: the scenario's address, with ``present=1`` in presenter mode."""
        return with_present(self.address, self.present)


PRESENT = "present"  # the query key of presenter mode; links.canonical_query never writes it


def presenting(query: Mapping[str, str]) -> bool:
    """Whether the query asks for presenter mode (``present=1``)."""
    return query.get(PRESENT) == "1"


def with_present(address: str, present: bool) -> str:
    """``address`` with ``present=1`` appended in presenter mode, else as it is."""
    if not present:
        return address
    return address + ("&" if "?" in address else "?") + f"{PRESENT}=1"


def address_of(query: str, preset: Preset | None) -> str:
    """The page's address: ``/?preset=<id>&<canonical query>`` while the scenario is still the
    preset's, else ``/?<canonical query>`` (``/`` for the defaults). The preset's id comes first and
    the whole scenario follows, so the link reproduces it even if the preset is later changed."""
    if preset is None:
        return _linked("/", query)
    return f"/?preset={preset.id}" + (f"&{query}" if query else "")


def view(
    raw: Mapping[str, str],
    scenario: Scenario | None,
    error: ScenarioError | None,
    preset: Preset | None = None,
    *,
    deferred: frozenset[str] = frozenset(),
) -> View:
    """The page for what was typed. ``preset`` is the preset the request named: it is kept (its id in
    the address, its title as the heading) only while the scenario is still exactly the preset's.
    ``deferred`` names the parts a live update defers (the sections below the peak to
    ``/lower``, the kill lists to ``/kills``; see :func:`app.web.views.results.results`)."""
    errors = error.by_field() if error else {}
    if scenario is None:
        return View(raw, None, errors, raw_query(raw, errors), "fix the highlighted fields", None)
    kept = preset if preset is not None and preset.scenario == scenario else None
    title = kept.title if kept else title_of(scenario)
    return View(raw, scenario, errors, canonical_query(scenario), title, results(scenario, deferred=deferred), kept)


def ranks(dp: int) -> str:
    """``1 rank``, ``8 ranks``, ``1,024 ranks``."""
    return f"{dp:,} rank" + ("" if dp == 1 else "s")


def title_of(s: Scenario) -> str:
    """The results' heading: the scenario's name, or what it is."""
    return s.name or f"{count_text(s.params)} parameters on {ranks(s.dp)}"


def _linked(path: str, query: str) -> str:
    return f"{path}?{query}" if query else path


def results_context(v: View, *, oob: bool) -> dict[str, Any]:
    """``partials/_results.html``: the results (or the invalid fields), and, for a live update
    (``oob``), every field's error slot and derived hint and the paste form's ``keep`` input, which
    htmx swaps out of band (the form itself is not re-rendered)."""
    notes = field_notes(v.raw, v.scenario, v.errors)
    return {
        "title": v.title,
        "query": v.query,
        "q": "?" + v.query if v.query else "",  # the query, ready to follow a path
        "address": v.address,  # the address bar and the share link (with the preset, if kept)
        "preset_id": v.preset.id if v.preset else "",
        "results": v.results,
        "scenario": v.scenario,  # the query's, for the trace panel (not parsed again)
        "errors": v.errors,
        "oob": oob,
        "error_slots": [(f.name, v.errors.get(f.name)) for f in FIELDS],
        "derived_hints": [(name, derived_hint(v.scenario, name)) for name in DERIVED_ORDER],
        "note_slots": [(name, *notes[name]) for name in NOTED],
        "present": v.present,  # presenter mode: the form carries it, the kill list steps
        "present_toggle": with_present(v.address, not v.present),  # the same scenario, the other mode
    }


def page_context(
    v: View,
    *,
    paste_error: str | None = None,
    pasted_config: str = "",
    ds_error: str | None = None,
    ds_pasted: str = "",
    ds_import: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``index.html``: the form with what was typed, the two paste forms (a model's config.json, a
    DeepSpeed config, with what the last paste gave), the devices, the results."""
    return {
        **results_context(v, oob=False),
        "alternate": _linked("/api/estimate", v.query),
        "presets": PRESETS,
        "devices": DEVICES,
        "models": KNOWN_MODELS,
        "groups": field_groups(form_fields(v.raw, v.scenario, v.errors)),
        "paste_error": paste_error,
        "pasted_config": pasted_config,
        **deepspeed_context(ds_error, ds_pasted, ds_import),
    }


def deepspeed_context(error: str | None, pasted: str, imported: Mapping[str, Any] | None) -> dict[str, Any]:
    """``partials/_deepspeed.html``: the pasted config, its error or what it was read into."""
    return {"ds_error": error, "ds_pasted": pasted, "ds_import": imported, "deepspeed": DEEPSPEED,
            "transformers": TRANSFORMERS}  # fmt: skip


def lines_context(ledger: Ledger) -> dict[str, Any]:
    """``partials/_lines.html``: every ledger line, with the stage that holds it."""
    return {"lines": [(st.stage, line) for st in ledger.stages for line in st.lines]}


def fit_table_context(fit: FitFinder) -> dict[str, Any]:
    """``partials/_fit_table.html``: the fit chart's numbers, the peak of every stage at each D."""
    return {"curve": fit.curve}


def detail_page_context(title: str, query: str, partial: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """``detail.html``: one detail table as a page of its own, with a way back to the scenario."""
    return {**table, "title": title, "back": _linked("/", query), "table": partial}
