"""``index.html``: the whole page for one request (what was typed, the scenario or its errors, the results),
its address and heading, and the contexts of the page and of a live update's ``partials/_results.html``.

Each function here builds the context of one template; the templates only lay it out. Figures stay
integers until a template formats them with the display filters of :mod:`app.web.http.templating`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from app.ledger.scenario import DEFAULT_SCENARIO, FIELD_NAMES, FieldError, Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.fields import FIELDS
from app.ledger.scenario.links import canonical_query
from app.ledger.scenario.presets import DEVICES, PRESETS, Preset
from app.web.http.pasted import moved_notice
from app.web.views.deepspeed import deepspeed_context
from app.web.views.form import DERIVED_ORDER, NOTED, count_text, derived_hint, field_groups, field_notes, form_fields
from app.web.views.model import model_groups
from app.web.views.results import Results, results
from app.web.views.torchtitan import torchtitan_context


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
    ignored: tuple[str, ...] = ()  # the query's names that are no scenario field (app.web.http.query.unknown_names)
    moved: tuple[str, ...] = ()  # the inputs a pasted config.json moved (app.web.http.pasted)

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
        return linked("/", query)
    return f"/?preset={preset.id}" + (f"&{query}" if query else "")


def linked(path: str, query: str) -> str:
    """``path`` with ``query`` after a ``?``, or ``path`` alone for an empty query (the defaults)."""
    return f"{path}?{query}" if query else path


def raw_query(raw: Mapping[str, str], errors: Mapping[str, FieldError]) -> str:
    """The address while some inputs are invalid: the bad ones as typed, plus the valid ones that
    differ from their defaults (sorted), so a reload shows the same errors and nothing else."""
    kept = []
    for name, value in raw.items():
        # an unknown name is refused too, named or (past the error list's cap) counted: kept as typed
        if name in errors or name not in FIELD_NAMES:
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


def results_context(v: View, *, oob: bool, shown: frozenset[str] | None = None) -> dict[str, Any]:
    """``partials/_results.html``: the results (or the invalid fields), and, for a live update
    (``oob``), the field error slots, every derived hint and the paste form's ``keep`` input, which
    htmx swaps out of band (the form itself is not re-rendered). The error slots are every field's, or with
    ``shown`` (the fields whose slot the page shows filled) only those and the fields with an error now."""
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
        "error_slots": [
            (f.name, v.errors.get(f.name)) for f in FIELDS if shown is None or f.name in shown or f.name in v.errors
        ],
        "derived_hints": [(name, derived_hint(v.scenario, name)) for name in DERIVED_ORDER],
        "note_slots": [(name, *notes[name]) for name in NOTED],
        "ignored": v.ignored,
        "moved": moved_notice(v.moved),
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
    tt_error: str | None = None,
    tt_pasted: str = "",
    tt_import: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``index.html``: the form with what was typed, the paste forms (a model's config.json, a DeepSpeed config, a
    torchtitan command line, with what the last paste gave), the devices, the results."""
    return {
        **results_context(v, oob=False),
        "alternate": linked("/api/estimate", v.query),
        "presets": PRESETS,
        "devices": DEVICES,
        "models": model_groups(),
        "groups": field_groups(form_fields(v.raw, v.scenario, v.errors), demo=v.present),
        "paste_error": paste_error,
        "pasted_config": pasted_config,
        **deepspeed_context(ds_error, ds_pasted, ds_import),
        **torchtitan_context(tt_error, tt_pasted, tt_import),
    }
