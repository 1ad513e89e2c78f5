"""The bounded scenario: every input checked, one error per bad field."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from functools import cache

from app.ledger.fields import (
    FIELD_BY_NAME,
    FIELDS,
    NAME_PATTERN,
    STATIC_DEFAULTS,
    Field,
    allowed_text,
    default_unit_params,
)
from app.ledger.sizes import SizeError, parse_bytes, parse_count, parse_plain


@dataclass(frozen=True, slots=True)
class Scenario:
    """One fully validated, canonical scenario (the seed's example by default)."""

    params: int = 7_000_000_000
    dp: int = 8
    param_bytes: int = 2
    grad_bytes: int = 2
    master_bytes: int = 4
    opt_states: int = 2
    opt_bytes: int = 4
    unit_params: int = 400_000_000
    gather_bytes: int = 2
    prefetch: int = 0
    bucket_bytes: int = 0
    activation_bytes: int = 20_000_000_000
    overhead_bytes: int = 0
    contingency_pct: int = 0
    capacity_bytes: int = 80_000_000_000
    name: str = ""

    def with_(self, **changes: int | str) -> Scenario:
        """A copy with some inputs changed (no re-validation: callers pass in-bound values)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, int | str]:
        return {name: getattr(self, name) for name in _SCENARIO_FIELDS}

    def default_for(self, name: str) -> int | str:
        """The default of ``name`` given the other inputs (U and the gather width depend on them)."""
        if name == "unit_params":
            return default_unit_params(self.params)
        if name == "gather_bytes":
            return self.param_bytes
        return STATIC_DEFAULTS[name]

    def non_default_items(self) -> list[tuple[str, int | str]]:
        """The inputs that differ from their defaults, sorted by name: the canonical form."""
        return sorted((k, v) for k, v in self.as_dict().items() if v != self.default_for(k))


_SCENARIO_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Scenario))


@dataclass(frozen=True, slots=True)
class FieldError:
    """A bad input: which field, what was wrong, and what is allowed."""

    field: str
    message: str
    allowed: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} (allowed: {self.allowed})"


class ScenarioError(ValueError):
    """One or more bad fields; ``errors`` holds one entry per field."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__("; ".join(str(e) for e in self.errors))

    def by_field(self) -> dict[str, FieldError]:
        return {e.field: e for e in self.errors}


FIELD_NAMES = frozenset(FIELD_BY_NAME)
MAX_UNKNOWN_REPORTED = 10  # a pasted blob of junk keys gets a short answer, not one line per key
_ALL_NAMES = "one of " + ", ".join(f.name for f in FIELDS)


@cache
def _name_re() -> re.Pattern[str]:
    """Compiled on first use: the character class is large, and most runs never see a name."""
    return re.compile(NAME_PATTERN)


DEFAULT_SCENARIO = Scenario()


def _read_int(field: Field, raw: object) -> int:
    """Turn one raw value (a JSON int or a string from a URL, form or flag) into an int."""
    if isinstance(raw, bool):
        raise SizeError("must be a number, not true/false")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        # JSON has one number type: 7e9 and 0.0 are integers there. Only whole values pass,
        # converted exactly (every bound is below 2^53); the ledger never sees the float.
        if not raw.is_integer():
            raise SizeError(f"{raw!r} is not a whole number")
        return int(raw)
    if not isinstance(raw, str):
        raise SizeError(f"must be an integer or a size string, not {type(raw).__name__}")
    if field.kind == "count":
        return parse_count(raw)
    if field.kind == "bytes":
        return parse_bytes(raw)
    return parse_plain(raw)


def _read_text(field: Field, raw: object) -> str:
    if not isinstance(raw, str):
        raise SizeError("must be text")
    text = raw.strip()
    if len(text) > field.maximum:
        raise SizeError(f"is {len(text)} characters long")
    if text and _name_re().fullmatch(text) is None:
        raise SizeError("contains a non-printable character (a control, format or separator character)")
    return text


def _shown(value: int) -> str:
    """An out-of-range value for a message; a huge one is not printed (and cannot fail to print)."""
    return f"{value:,}" if value.bit_length() <= 64 else f"a {'negative ' if value < 0 else ''}number far out of range"


def _check_bounds(field: Field, value: int, upper: int | None = None) -> str | None:
    if field.choices is not None:
        if value not in field.choices:
            return f"{_shown(value)} is not a supported value"
        return None
    top = field.maximum if upper is None else upper
    if value < field.minimum or value > top:
        return f"{_shown(value)} is out of range"
    return None


def parse_scenario(raw: Mapping[str, object], *, allow_unknown: bool = True) -> Scenario:
    """Validate every field of ``raw`` at once; missing fields take their defaults.

    Raises :class:`ScenarioError` with one :class:`FieldError` per bad field. Widths outside
    their allowed sets are rejected, never rounded. An explicit ``unit_params`` above
    ``params`` is refused; when absent it defaults to min(400M, N).
    """
    errors: list[FieldError] = []
    values: dict[str, int | str] = {}
    if not allow_unknown:
        unknown = sorted(str(k)[:40] for k in raw if k not in FIELD_NAMES)
        shown = unknown[:MAX_UNKNOWN_REPORTED]
        errors.extend(FieldError(key, "is not a scenario field", _ALL_NAMES) for key in shown)
        if len(unknown) > len(shown):
            errors.append(
                FieldError(unknown[len(shown)], f"and {len(unknown) - len(shown):,} more unknown fields", _ALL_NAMES)
            )
    for field in FIELDS:
        if field.name not in raw:
            continue
        item = raw[field.name]
        try:
            values[field.name] = _read_text(field, item) if field.kind == "text" else _read_int(field, item)
        except SizeError as exc:
            errors.append(FieldError(field.name, str(exc), allowed_text(field)))
    for name, value in values.items():
        if isinstance(value, int) and name != "unit_params":
            problem = _check_bounds(FIELD_BY_NAME[name], value)
            if problem:
                errors.append(FieldError(name, problem, allowed_text(FIELD_BY_NAME[name])))
    params = values.get("params", STATIC_DEFAULTS["params"])
    params_ok = isinstance(params, int) and not any(e.field == "params" for e in errors)
    if "unit_params" in values:
        unit = values["unit_params"]
        assert isinstance(unit, int)
        upper = params if params_ok and isinstance(params, int) else FIELD_BY_NAME["unit_params"].maximum
        problem = _check_bounds(FIELD_BY_NAME["unit_params"], unit, upper)
        if problem:
            if params_ok and unit > upper and unit >= 0:
                problem = f"{_shown(unit)} is larger than params ({upper:,})"
            errors.append(FieldError("unit_params", problem, f"0 … params ({upper:,})"))
    if errors:
        order = {f.name: i for i, f in enumerate(FIELDS)}
        errors.sort(key=lambda e: order.get(e.field, -1))
        raise ScenarioError(errors)
    merged: dict[str, int | str] = dict(STATIC_DEFAULTS)
    merged.update(values)
    if "unit_params" not in values:
        merged["unit_params"] = default_unit_params(int(merged["params"]))
    if "gather_bytes" not in values:
        merged["gather_bytes"] = merged["param_bytes"]
    return Scenario(**merged)  # type: ignore[arg-type]
