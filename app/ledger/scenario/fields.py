"""The field table: every scenario input's bounds, unit and meaning, derived from the declared fields.

:class:`app.ledger.scenario.declared.ScenarioFields` is the one source; this module reads it into plain
:class:`Field` records for the code that lays fields out (the CLI flags, the page's form, the
receipts' input rows), so a bound cannot drift between what is enforced and what is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args, get_origin

from pydantic import BeforeValidator
from pydantic.fields import FieldInfo

from app.ledger.bounds import TEN_13, TWO_40, TWO_46
from app.ledger.scenario.declared import ScenarioFields
from app.ledger.scenario.form import GROUPS, form_metadata
from app.ledger.scenario.readers import NAME_PATTERN, READERS, Kind

__all__ = [
    "FIELDS",
    "FIELD_BY_NAME",
    "GROUPS",
    "NAME_PATTERN",
    "STATIC_DEFAULTS",
    "TEN_13",
    "Field",
    "Kind",
    "allowed_text",
    "derive_field",
]


# The defaults that hold without other inputs deciding them (the seed's example); U and the
# all-gather and reduce-scatter widths have none (min(400M, N), the parameter width and the
# gradient width), and a model overrides some.
STATIC_DEFAULTS: dict[str, int | str] = {
    name: meta["x-default"]
    for name, info in ScenarioFields.model_fields.items()
    if "x-default" in (meta := form_metadata(info))
}


@dataclass(frozen=True, slots=True)
class Field:
    """One bounded scenario input.

    ``kind`` says how a string is read: ``count`` accepts decimal suffixes (``7B``, ``400M``),
    ``bytes`` accepts decimal and binary byte units (``80GB``, ``80GiB``), ``int`` a plain
    integer, ``text`` printable text, ``choice`` one of ``options``.
    """

    name: str
    label: str
    unit: str
    kind: Kind
    minimum: int
    maximum: int
    group: str
    help: str
    choices: tuple[int, ...] | None = None
    options: tuple[str, ...] | None = None  # for kind "choice"

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _literal_values(info: FieldInfo) -> tuple[object, ...] | None:
    """The allowed values of a ``Literal[...] | None`` field, else None."""
    for member in get_args(info.annotation):
        if get_origin(member) is Literal:
            return get_args(member)
    return None


def _constraint(info: FieldInfo, name: str) -> int:
    """A field's ``ge``, ``le`` or ``max_length``, as pydantic keeps it in the field's metadata."""
    for item in info.metadata:
        value = getattr(item, name, None)
        if isinstance(value, int):
            return value
    raise TypeError(f"no {name} constraint")


def derive_field(name: str, info: FieldInfo) -> Field:
    """One declared field as a :class:`Field`; a field whose metadata is incomplete or
    contradicts how it is read is refused (``TypeError``), so the table cannot describe another rule."""
    meta = form_metadata(info)
    kind: Kind = meta.get("x-kind", "")
    readers = [m.func for m in info.metadata if isinstance(m, BeforeValidator)]
    if kind not in READERS or readers != [READERS[kind]]:
        raise TypeError(f"{name}: x-kind {kind!r} does not match its reader {readers}")
    if meta.get("x-group") not in dict(GROUPS) or not isinstance(meta.get("x-unit"), str):
        raise TypeError(f"{name}: x-group must be one of GROUPS and x-unit a string")
    if not info.title or not info.description:
        raise TypeError(f"{name}: a label (title) and help (description) are required")
    values = _literal_values(info)
    choices: tuple[int, ...] | None = None
    options: tuple[str, ...] | None = None
    if kind == "choice":
        options = tuple(v for v in values or () if isinstance(v, str))
        if not options or len(options) != len(values or ()):
            raise TypeError(f"{name}: a choice is a Literal of strings")
        minimum = maximum = 0
    elif kind == "text":
        minimum, maximum = 0, _constraint(info, "max_length")
    elif values is not None:
        choices = tuple(v for v in values if isinstance(v, int))
        if len(choices) != len(values):
            raise TypeError(f"{name}: supported values are a Literal of integers")
        minimum, maximum = min(choices), max(choices)
    else:
        minimum, maximum = _constraint(info, "ge"), _constraint(info, "le")
    return Field(name, info.title, meta["x-unit"], kind, minimum, maximum, meta["x-group"], info.description,
                 choices=choices, options=options)  # fmt: skip


FIELDS: tuple[Field, ...] = tuple(derive_field(name, info) for name, info in ScenarioFields.model_fields.items())
FIELD_BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}


def allowed_text(field: Field) -> str:
    """The allowed range in words, as every error message states it."""
    if field.kind == "text" and field.unit == "modules":  # lora_targets, frozen_modules: their names pattern
        return f"module names (letters, digits, _ and -) with commas, up to {field.maximum} characters"
    if field.kind == "text":
        return f"up to {field.maximum} printable characters"
    if field.options is not None:
        return "one of " + ", ".join(field.options)
    if field.choices is not None:
        return "one of " + ", ".join(str(c) for c in field.choices)
    if field.name == "unit_params":
        return "0 … params"
    human = _HUMAN_MAXIMUM.get(field.maximum) if field.kind in ("count", "bytes") else None
    return f"{field.minimum:,} … {field.maximum:,}" + (f" ({human})" if human else "")


# The large bounds, as a person reads them (B = bytes for byte fields, 10T = 10^13 parameters).
_HUMAN_MAXIMUM: dict[int, str] = {TEN_13: "10T", TWO_40: "1 TiB", TWO_46: "64 TiB"}
