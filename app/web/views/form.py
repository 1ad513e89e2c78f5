"""The scenario form's fields and fieldsets (``partials/_form.html``, ``macros/fields.html``): each input with
what was typed or the scenario's value in human form, its error, what an empty derived field stands for,
and the warning or note beside a valid but implausible value; and the same hints and notes for a live
update's out-of-band slots (``partials/_field_slots.html``) and the compare page's form."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from app.ledger.scenario import DEFAULT_SCENARIO, FieldError, Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.fields import FIELD_BY_NAME, FIELDS, GROUPS, Field, allowed_text
from app.ledger.scenario.presets import H100_80GB, MIB
from app.ledger.scenario.stacks import STACK_CHOICES, preset
from app.receipts.display import gb, gib, human_bytes, human_count
from app.web.http.query import DERIVED
from app.web.views.answer import device_names

Control = Literal["input", "select", "model"]  # a text box, fixed choices, or the known models

# Fields that can hold a valid but implausible value (see :func:`field_notes`): each has a slot
# beside it, ``w-<name>``, for the warning or note, which a live update refreshes out of band.
NOTED: tuple[str, ...] = ("seq_len", "capacity_bytes", "overhead_bytes", *STACK_CHOICES)


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
    if name in STACK_CHOICES and preset(s.stack, name, s.model, s.seq_len) is not None:  # the stack decides it
        return f"empty = the stack's ({s.stack}): {default}" + (" B" if field.unit == "bytes/element" else "")
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


_SEED_CAPACITY = DEFAULT_SCENARIO.capacity_bytes  # the article's decimal 80 GB


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
        if name in STACK_CHOICES:
            note = None if s is None or name in errors else _stack_note(name, typed, s)
        elif value is None:
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
                note = f"{value:,} B = {gib(value)} = {gb(value)}: what the {' or '.join(names)} reports (nvidia-smi)."
            elif value == _SEED_CAPACITY:
                note = (
                    f"{value:,} B = {gib(value)}: the seed article's decimal 80 GB, not a device. An H100 80GB reports "
                    f"{gib(H100_80GB)} ({H100_80GB // MIB:,} MiB): pick your hardware from the list."
                )
        elif name == "overhead_bytes":
            if not value:
                note = "Not declared: 0 B counted. The CUDA context alone takes a few hundred MiB a rank; type it, or "
                note += "reconcile an observed run."
        elif name == "seq_len":
            match = _DECIMAL_SUFFIX.fullmatch(typed)
            if match:
                number, suffix = match[1], match[2].lower()
                size, binary = _BINARY_OF[suffix]
                meant = int(number) * size
                warning = f"{value:,} tokens — did you mean {number}{binary} = {meant:,}? (type {meant})"
        out[name] = (warning, note)
    return out


def _stack_note(name: str, typed: str, s: Scenario) -> str | None:
    """Whether a choice the stack decides came from the stack (and why it sets that) or was typed over it;
    None where the stack leaves the choice to another input (the all-gather width follows the parameters')."""
    given = preset(s.stack, name, s.model, s.seq_len)
    if given is None:
        return None
    if not typed:
        return f"{given.value}, set by the stack ({s.stack}): {given.evidence}."
    if getattr(s, name) != given.value:
        return f"Typed over the stack ({s.stack}), which sets {given.value}."
    return f"Typed; the stack ({s.stack}) sets the same."


# Presenter mode: the inputs a workshop demo changes, first in the form so that the room sees them beside the
# verdict (on a projector too: static/app.css keeps the form beside the results there).
DEMO_FIELDS: tuple[str, ...] = ("dp", "micro_batch", "seq_len", "act_policy")


def field_groups(fields: list[FormField], *, demo: bool = False) -> list[FieldGroup]:
    """The form's fieldsets, in the order of ``GROUPS``; with ``demo`` (presenter mode), the demo inputs first."""
    first = [FieldGroup("demo", "Demo inputs", tuple(ff for name in DEMO_FIELDS for ff in fields if ff.name == name))]
    rest = [ff for ff in fields if not (demo and ff.name in DEMO_FIELDS)]
    return (first if demo else []) + [
        FieldGroup(gid, title, tuple(ff for ff in rest if FIELD_BY_NAME[ff.name].group == gid)) for gid, title in GROUPS
    ]


def count_text(value: int) -> str:
    """A count as it reads best: ``7B``, ``6.74B``, ``400M``, else grouped digits (``4,096``, not
    ``4.096K``: below a million a suffix hides more than it saves)."""
    short = human_count(value)
    return f"{value:,}" if value < 10**6 or short.isdigit() else short
