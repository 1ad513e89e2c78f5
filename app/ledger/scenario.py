"""The bounded scenario: every input checked, one error per bad field."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from functools import cache
from typing import TYPE_CHECKING

from app.ledger.arithmetic import shown_int
from app.ledger.fields import (
    FIELD_BY_NAME,
    FIELDS,
    NAME_PATTERN,
    STATIC_DEFAULTS,
    Field,
    allowed_text,
    default_unit_params,
)
from app.ledger.sizes import MAX_TEXT, SizeError, parse_bytes, parse_count, parse_plain

if TYPE_CHECKING:
    from app.ledger.model_inputs import ModelDefaults


@dataclass(frozen=True, slots=True)
class Scenario:
    """One fully validated, canonical scenario (the seed's example by default)."""

    model: str = ""
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
    seq_len: int = 4096
    micro_batch: int = 1
    act_bytes: int = 2
    act_policy: str = "none"
    tp: int = 1
    sequence_parallel: int = 0
    logits_bytes: int = 4

    def with_(self, **changes: int | str) -> Scenario:
        """A copy with some inputs changed (no re-validation: callers pass in-bound values)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, int | str]:
        return {name: getattr(self, name) for name in _SCENARIO_FIELDS}

    def model_defaults(self) -> ModelDefaults | None:
        """What the named model supplies (None without a model); valid by construction."""
        if not self.model:
            return None
        from app.ledger.model_inputs import model_defaults  # only scenarios with a model pay for it

        return model_defaults(self.model, self.seq_len, self.micro_batch, self.act_bytes, self.act_policy,
                              self.tp, self.sequence_parallel, self.logits_bytes)  # fmt: skip

    def default_for(self, name: str) -> int | str:
        """The default of ``name`` given the other inputs: U and the gather width depend on them,
        and a model supplies params, U and the activation peak."""
        if name == "gather_bytes":
            return self.param_bytes
        if name == "seq_len" and self.model:
            return default_seq_len(self.model)
        if name in MODEL_FILLED:
            md = self.model_defaults()
            if md is not None:
                if name == "params":
                    return md.params
                if name == "unit_params":
                    return min(md.unit_params, self.params)
                return md.activations.total_bytes
        if name == "unit_params":
            return default_unit_params(self.params)
        return STATIC_DEFAULTS[name]

    def source_of(self, name: str) -> str:
        """Where a model-fillable input came from: ``from config`` / ``modelled`` when it equals
        the model's value, else ``declared`` (params, U) or ``measured`` (activations); without a
        model, the seed's activation figure is a ``placeholder``."""
        default = self.default_for(name)
        if self.model:
            if getattr(self, name) == default:
                return "modelled" if name == "activation_bytes" else "from config"
            return "measured" if name == "activation_bytes" else "declared"
        if name == "activation_bytes":
            return "placeholder" if self.activation_bytes == default else "measured"
        return "declared"

    def non_default_items(self) -> list[tuple[str, int | str]]:
        """The inputs that differ from their defaults, sorted by name: the canonical form."""
        out = []
        for name in _SORTED_FIELDS:
            value = getattr(self, name)
            if value != (self.default_for(name) if name in _FOLLOWING else STATIC_DEFAULTS[name]):
                out.append((name, value))
        return out


_SCENARIO_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Scenario))
# The inputs a named model fills in (see default_for).
MODEL_FILLED = frozenset({"params", "unit_params", "activation_bytes"})
_SORTED_FIELDS: tuple[str, ...] = tuple(sorted(_SCENARIO_FIELDS))
# The inputs whose default follows other inputs (see default_for); every other default is static.
_FOLLOWING = MODEL_FILLED | {"gather_bytes", "seq_len"}


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
_NUMERIC = frozenset(f.name for f in FIELDS if f.kind in ("count", "bytes", "int"))
# The inputs a model's defaults depend on, in model_defaults()'s argument order.
_MODEL_INPUTS = ("model", "seq_len", "micro_batch", "act_bytes", "act_policy", "tp", "sequence_parallel",
                 "logits_bytes")  # fmt: skip
_MODEL_ALLOWED = "a known model id or a compact config (cfg:…)"
MAX_UNKNOWN_REPORTED = 10  # a pasted blob of junk keys gets a short answer, not one line per key
_ALL_NAMES = "one of " + ", ".join(f.name for f in FIELDS)


@cache
def _name_re() -> re.Pattern[str]:
    """Compiled on first use: the character class is large, and most runs never see a name."""
    return re.compile(NAME_PATTERN)


DEFAULT_SCENARIO = Scenario()


def _read_int(field: Field, raw: object) -> int:
    """Turn one raw value (a JSON int or a string from a URL, form or flag) into an int."""
    if isinstance(raw, str):  # the common case: a query string's value
        if field.kind == "count":
            return parse_count(raw)
        if field.kind == "bytes":
            return parse_bytes(raw)
        return parse_plain(raw)
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
    raise SizeError(f"must be an integer or a size string, not {type(raw).__name__}")


def _read_text(field: Field, raw: object) -> str:
    if not isinstance(raw, str):
        raise SizeError("must be text")
    text = raw.strip()
    if len(text) > field.maximum:
        raise SizeError(f"is {len(text)} characters long")
    if text and _name_re().fullmatch(text) is None:
        raise SizeError("contains a non-printable character (a control, format or separator character)")
    return text


def _read_choice(field: Field, raw: object) -> str:
    assert field.options is not None
    if not isinstance(raw, str) or raw.strip() not in field.options:
        shown = repr(raw)[:40]
        raise SizeError(f"{shown} is not one of {', '.join(field.options)}")
    return raw.strip()


def _read(field: Field, raw: object) -> int | str:
    if field.kind == "text":
        return _read_text(field, raw)
    if field.kind == "choice":
        return _read_choice(field, raw)
    return _read_int(field, raw)


def _check_bounds(field: Field, value: int, upper: int | None = None) -> str | None:
    if field.choices is not None:
        if value not in field.choices:
            return f"{shown_int(value)} is not a supported value"
        return None
    top = field.maximum if upper is None else upper
    if value < field.minimum or value > top:
        return f"{shown_int(value)} is out of range"
    return None


def default_seq_len(model: str) -> int:
    """4,096 tokens, or the model's context when it has learned positions and a shorter one (GPT-2)."""
    from app.ledger.models.reference import resolve

    arch = resolve(model).architecture
    base = int(STATIC_DEFAULTS["seq_len"])
    return min(base, arch.max_positions) if arch.learned_positions else base


def _model_fill(values: dict[str, int | str], errors: list[FieldError]) -> dict[str, int | str]:
    """params, U and the activation peak as the named model gives them (empty without a model).

    A bad model or an activation input the model cannot take (``tp`` not dividing the heads,
    ``seq_len`` beyond learned positions) becomes a field error; so does a modelled activation
    peak beyond the ``activation_bytes`` bound.
    """
    model = values.get("model", "")
    if not model or any(e.field in _MODEL_INPUTS for e in errors):
        return {}
    from app.ledger.model_inputs import model_defaults
    from app.ledger.models.activations import ActivationInputError
    from app.ledger.models.architecture import ModelConfigError

    inputs = {name: values.get(name, STATIC_DEFAULTS[name]) for name in _MODEL_INPUTS}
    try:
        if "seq_len" not in values:
            inputs["seq_len"] = default_seq_len(str(model))
        md = model_defaults(*(inputs[name] for name in _MODEL_INPUTS))
    except ModelConfigError as exc:
        errors.append(FieldError("model", str(exc), _MODEL_ALLOWED))
        return {}
    except ActivationInputError as exc:
        message = str(exc).removeprefix(f"{exc.field}: ")
        field = FIELD_BY_NAME.get(exc.field)
        errors.append(FieldError(exc.field, message, allowed_text(field) if field else "see the model"))
        return {}
    activation = md.activations.total_bytes
    if "activation_bytes" not in values and activation > FIELD_BY_NAME["activation_bytes"].maximum:
        errors.append(FieldError("micro_batch", f"the modelled activation peak, {activation:,} B, is beyond "
                                 f"the {FIELD_BY_NAME['activation_bytes'].maximum:,} B bound", "a smaller "
                                 "micro_batch or seq_len, or a typed activation_bytes"))  # fmt: skip
    return {"params": md.params, "unit_params": md.unit_params, "activation_bytes": activation,
            "seq_len": inputs["seq_len"]}  # fmt: skip


def parse_scenario(raw: Mapping[str, object], *, allow_unknown: bool = True) -> Scenario:
    """Validate every field of ``raw`` at once; missing fields take their defaults.

    Raises :class:`ScenarioError` with one :class:`FieldError` per bad field. Widths outside
    their allowed sets are rejected, never rounded. An explicit ``unit_params`` above
    ``params`` is refused; when absent it defaults to min(400M, N).
    """
    errors: list[FieldError] = []
    values: dict[str, int | str] = {}
    if not allow_unknown and not FIELD_NAMES.issuperset(raw):  # one C-level pass when all are known
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
        if type(item) is str and item.isdigit() and item.isascii() and len(item) <= MAX_TEXT and field.name in _NUMERIC:
            values[field.name] = int(item)  # most of a query: plain digits, read as every numeric kind reads them
            continue
        try:
            values[field.name] = _read(field, item)
        except SizeError as exc:
            errors.append(FieldError(field.name, str(exc), allowed_text(field)))
    for name, value in values.items():
        if isinstance(value, int) and name != "unit_params":
            problem = _check_bounds(FIELD_BY_NAME[name], value)
            if problem:
                errors.append(FieldError(name, problem, allowed_text(FIELD_BY_NAME[name])))
    filled = _model_fill(values, errors)
    params = values.get("params", filled.get("params", STATIC_DEFAULTS["params"]))
    params_ok = isinstance(params, int) and not any(e.field == "params" for e in errors)
    if "unit_params" in values:
        unit = values["unit_params"]
        assert isinstance(unit, int)
        upper = params if params_ok and isinstance(params, int) else FIELD_BY_NAME["unit_params"].maximum
        problem = _check_bounds(FIELD_BY_NAME["unit_params"], unit, upper)
        if problem:
            if params_ok and unit > upper and unit >= 0:
                problem = f"{shown_int(unit)} is larger than params ({upper:,})"
            errors.append(FieldError("unit_params", problem, f"0 … params ({upper:,})"))
    if errors:
        order = {f.name: i for i, f in enumerate(FIELDS)}
        errors.sort(key=lambda e: order.get(e.field, -1))
        raise ScenarioError(errors)
    merged: dict[str, int | str] = dict(STATIC_DEFAULTS)
    merged.update(filled)
    merged.update(values)
    if "unit_params" not in values:
        limit = int(merged["params"])
        merged["unit_params"] = min(int(filled["unit_params"]), limit) if filled else default_unit_params(limit)
    if "gather_bytes" not in values:
        merged["gather_bytes"] = merged["param_bytes"]
    return Scenario(**merged)  # type: ignore[arg-type]
