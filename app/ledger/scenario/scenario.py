"""The bounded scenario: every input checked, one error per bad field.

:class:`app.ledger.scenario.inputs.ScenarioIn` validates the inputs (each field's bounds, then the rules
across fields); :func:`to_scenario` fills in the defaults and gives the core's frozen
:class:`Scenario` (the generated :class:`app.ledger.scenario.values.ScenarioValues` and what they
mean); :func:`field_errors` states pydantic's errors as :class:`FieldError` lines that name the field
and its allowed range; :func:`parse_scenario` does all three for a raw mapping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from operator import attrgetter
from typing import Any

from pydantic import ValidationError

from app.ledger.arithmetic import shown_int
from app.ledger.models.defaults import MODEL_INPUTS, ModelDefaults, ModelQuery, model_defaults
from app.ledger.scenario.across import FOLLOWERS, across_fields, default_seq_len, following
from app.ledger.scenario.fields import FIELD_BY_NAME, FIELDS, STATIC_DEFAULTS, allowed_text
from app.ledger.scenario.inputs import UNCHECKED, ScenarioIn, StrictScenarioIn
from app.ledger.scenario.values import ScenarioValues


@dataclass(frozen=True, slots=True)
class Scenario(ScenarioValues):
    """One fully validated, canonical scenario (the seed's example by default): the inputs of
    :class:`ScenarioValues`, each defaulted, and what they mean (the world, the shards, the defaults
    that follow other inputs)."""

    def __post_init__(self) -> None:
        if self.shard_group == 0:  # the default: one group of all D ranks (a frozen dataclass: set it once here)
            object.__setattr__(self, "shard_group", self.dp)

    def with_(self, **changes: int | str) -> Scenario:
        """A copy with some inputs changed (no re-validation: callers pass in-bound values). A shard group
        left at its default (D) follows a new D, and trainable parameters left at theirs (all) new params, as they
        would in a link."""
        if "dp" in changes and "shard_group" not in changes and self.shard_group == self.dp:
            changes["shard_group"] = changes["dp"]
        if "params" in changes and "trainable_params" not in changes and self.trainable_params == self.params:
            changes["trainable_params"] = changes["params"]  # everything still trains
        return replace(self, **changes)  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, int | str]:
        return {name: getattr(self, name) for name in _SCENARIO_FIELDS}

    def model_query(self) -> ModelQuery:
        """The inputs the model's defaults depend on, read straight from the fields (already of their types)."""
        return ModelQuery(*_model_inputs(self))

    def model_defaults(self) -> ModelDefaults | None:
        """What the named model supplies (None without a model); valid by construction."""
        if not self.model:
            return None
        return model_defaults(self.model_query())

    @property
    def world(self) -> int:
        """GPUs in the run: D × tp × pp × cp (expert parallelism splits the D ranks, it adds none; context
        parallelism's ranks are ranks of their own, torchtitan's ParallelDims: dp_replicate × dp_shard × cp × tp × pp
        = WORLD_SIZE)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def expert_params(self) -> int:
        """Of ``params``, the expert parameters ZeRO shards over D ÷ ep (0 unless ep > 1: with ep = 1
        experts and the rest are sharded alike)."""
        if self.ep == 1:
            return 0
        md = self.model_defaults()
        return 0 if md is None else md.expert_params

    @property
    def frozen_params(self) -> int:
        """Of ``params``, those that do not train: no gradient, master copy or optimizer state."""
        return self.params - self.trainable_params

    @property
    def frozen_elements(self) -> int:
        """The elements the frozen parameters are stored in: one each, but with QLoRA's 4-bit base the layers'
        linear weights in their packed BF16 elements (:mod:`app.ledger.models.quant`)."""
        if self.base_quant == "none":
            return self.frozen_params
        md = self.model_defaults()
        assert md is not None and md.quant is not None  # a parsed scenario with a 4-bit base has its model's
        return self.frozen_params - md.quant.values + md.quant.storage

    def shards(self, degree: int | None = None, count: int | None = None) -> tuple[tuple[int, int], ...]:
        """(parameters, owners) of each part a ZeRO-sharded class splits into on this rank: the dense part
        over the shard group (D, or HSDP's group), the experts over D ÷ ep; ``degree`` evaluates the same
        layout at another D (the fit finder's); ``count`` shards that many parameters instead of ``params`` (what
        trains, which expert parallelism never splits: the rules across fields refuse frozen parameters with it)."""
        dp = self.dp if degree is None else degree
        group = self._group(dp)
        whole = self.params if count is None else count
        experts = self.expert_params if whole == self.params else 0
        if not experts:
            return ((whole, group),)
        return ((whole - experts, group), (experts, max(1, dp // self.ep)))

    def _group(self, dp: int) -> int:
        """The dense parameters' sharding degree at D = ``dp``: D itself, or a typed shard group (at most D), times
        cp: FSDP shards over the context-parallel ranks too (torchtitan 0.3.0 ParallelDims: ``fsdp = dp_shard × cp``,
        the dp_shard_cp mesh fully_shard is applied on; HSDP's replicas stay dp_replicate)."""
        return (dp if self.shard_group == self.dp else min(self.shard_group, dp)) * self.cp

    def unit_shards(self, degree: int | None = None) -> tuple[tuple[int, int], ...]:
        """The largest unit's (parameters, owners) parts, as :meth:`shards` splits the whole."""
        dp = self.dp if degree is None else degree
        group = self._group(dp)
        md = self.model_defaults() if self.ep > 1 else None
        experts = 0 if md is None else md.share.largest.experts
        if not experts:
            return ((self.unit_params, group),)
        return ((self.unit_params - experts, group), (experts, max(1, dp // self.ep)))

    def accumulates_unsharded(self, stage: int) -> bool:
        """Whether ``stage`` holds every unit's unsharded gradient across the micro batches: accumulating without
        sync until the last (FSDP2's set_requires_gradient_sync(False)) at stages 2–3, whose gradients are sharded;
        at stages 0–1 they are whole anyway."""
        return self.grad_accum > 1 and self.grad_sync == "last" and stage >= 2

    @property
    def keeps_units_gathered(self) -> bool:
        """Whether units stay gathered from one micro batch's backward into the next (set_reshard_after_backward
        (False) over several micro batches; FSDP2's stage 3 is where it matters)."""
        return self.grad_accum > 1 and not self.reshard_after_backward

    @property
    def allocatable_bytes(self) -> int:
        """What allocations may reach: the capacity less the allocator's reserve (0 unless measured or declared).
        The verdict compares the allocated peak with it, i.e. the reserved estimate with the capacity."""
        return self.capacity_bytes - self.reserve_bytes

    def default_for(self, name: str) -> int | str:
        """The default of ``name`` given the other inputs: U and the gather width depend on them,
        the reduce-scatter width the gradient width, and a model supplies params, U and the activation peak."""
        if name == "seq_len" and self.model:
            return default_seq_len(self.model)
        md = self.model_defaults() if name in MODEL_FILLED else None
        if md is not None:
            if name == "params":
                return md.params
            if name == "unit_params":
                return min(md.unit_params, self.params)
            if name == "trainable_params":  # the adapters with LoRA, what is not frozen, else all (typed params too)
                return self.params if md.trainable == md.params else min(md.trainable, self.params)
            return md.activations.total_bytes
        return following(name, self._input) if name in FOLLOWERS else STATIC_DEFAULTS[name]

    def _input(self, name: str) -> int | str:
        value: int | str = getattr(self, name)
        return value

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
        return [(name, value) for name, value in sorted(self.as_dict().items()) if value != self.default_for(name)]


_SCENARIO_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Scenario))
_model_inputs = attrgetter(*MODEL_INPUTS)  # the fields of ModelQuery, in its order, as one tuple
# The inputs a named model fills in (see default_for).
MODEL_FILLED = frozenset({"params", "unit_params", "activation_bytes", "trainable_params"})
FIELD_NAMES = frozenset(FIELD_BY_NAME)
DEFAULT_SCENARIO = Scenario()


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


# --------------------------------------------------------------------------- building the scenario


def to_scenario(inp: ScenarioIn) -> Scenario:
    """The scenario a validated input names, every default filled in.

    Absent inputs take their defaults: the seed's example, or the named model's params, U, activation
    peak and (GPT-2's short context) sequence length; U defaults to min(400M, N) without a model and
    to min(the model's unit, N) with one; the all-gather width to the parameter width, the
    reduce-scatter width to the gradient width. Raises
    :class:`ScenarioError` when a rule across fields fails (only possible for an input that was
    built without validation, e.g. ``model_construct``).
    """
    across = across_fields(inp)
    if across.problems:
        raise ScenarioError(
            sorted((FieldError(p.field, p.message, p.allowed or _allowed(p.field)) for p in across.problems),
                   key=_field_order)
        )  # fmt: skip
    values: dict[str, int | str] = dict(STATIC_DEFAULTS)
    fill = across.fill
    if fill is not None:
        values.update(params=fill.params, activation_bytes=fill.activation_bytes, seq_len=fill.seq_len)
    values.update({name: value for name, value in inp if value is not None})
    for name in FOLLOWERS:
        if getattr(inp, name) is None:
            values[name] = following(name, values.__getitem__)
    if fill is not None and inp.unit_params is None:
        values["unit_params"] = min(fill.unit_params, int(values["params"]))
    if fill is not None and fill.trainable_params and inp.trainable_params is None:  # LoRA: the adapters train
        values["trainable_params"] = min(fill.trainable_params, int(values["params"]))
    return Scenario(**values)  # type: ignore[arg-type]


def parse_scenario(raw: Mapping[str, object], *, allow_unknown: bool = True) -> Scenario:
    """Validate every field of ``raw`` at once; missing (or ``None``) fields take their defaults.

    Raises :class:`ScenarioError` with one :class:`FieldError` per bad field, in form order
    (unknown keys first, when ``allow_unknown`` is false). Widths outside their allowed sets are
    rejected, never rounded. An explicit ``unit_params`` above ``params`` is refused.
    """
    model = ScenarioIn if allow_unknown else StrictScenarioIn
    try:
        return to_scenario(model.model_validate(raw))
    except ValidationError as exc:
        errors = field_errors(exc)
    # pydantic runs the rules across fields only once every field is valid. Run them on the valid
    # fields too, so that one answer names every bad field; a rule reading a bad one is skipped.
    bad = {e.field for e in errors}
    valid = {name: raw[name] for name in FIELD_NAMES if name in raw and name not in bad}
    try:
        ScenarioIn.model_validate(valid, context={UNCHECKED: frozenset(bad)})
    except ValidationError as exc:
        errors.extend(e for e in field_errors(exc) if e.field not in bad)
    raise ScenarioError(sorted(errors, key=_field_order))


# --------------------------------------------------------------------------- pydantic's errors, in our words

MAX_UNKNOWN_REPORTED = 10  # a pasted blob of junk keys gets a short answer, not one line per key
_ALL_NAMES = "one of " + ", ".join(f.name for f in FIELDS)
_ORDER = {f.name: i for i, f in enumerate(FIELDS)}
_NON_PRINTABLE = "contains a non-printable character (a control, format or separator character)"
_NOT_NAMES = "holds something other than module names (letters, digits, _ and -), commas and spaces"
_NAME_FIELDS = ("lora_targets", "frozen_modules")  # their pattern: module names (LORA_TARGETS_PATTERN)


def _field_order(e: FieldError) -> tuple[int, str]:
    return _ORDER.get(e.field, -1), e.field  # unknown keys first, by name


def _allowed(field: str) -> str:
    known = FIELD_BY_NAME.get(field)
    return allowed_text(known) if known else _ALL_NAMES


def field_errors(exc: ValidationError | Iterable[Mapping[str, Any]]) -> list[FieldError]:
    """pydantic's errors for a scenario as :class:`FieldError` lines, one per field, in form order.

    Takes a ``ValidationError`` from ``ScenarioIn`` or the error dicts of one (e.g. FastAPI's
    ``RequestValidationError.errors()``, whose ``loc`` starts with ``query`` or ``body``: the field
    is the last name in ``loc``). Unknown keys are named up to :data:`MAX_UNKNOWN_REPORTED`, then
    counted in one more line.
    """
    details = exc.errors(include_url=False) if isinstance(exc, ValidationError) else exc
    unknown: list[str] = []
    found: dict[str, FieldError] = {}
    for detail in details:
        loc = detail.get("loc") or ()
        if detail.get("type") in ("extra_forbidden", "invalid_key"):  # an unknown key, or one that is not text
            unknown.append(str(loc[-1])[:40])
            continue
        field = _field_of(loc)
        if field not in found:
            allowed = (detail.get("ctx") or {}).get("allowed")  # a rule across fields states its own
            found[field] = FieldError(field, _message(field, detail), str(allowed or _allowed(field)))
    unknown.sort()
    errors = [FieldError(key, "is not a scenario field", _ALL_NAMES) for key in unknown[:MAX_UNKNOWN_REPORTED]]
    if len(unknown) > MAX_UNKNOWN_REPORTED:
        more = len(unknown) - MAX_UNKNOWN_REPORTED
        errors.append(FieldError(unknown[MAX_UNKNOWN_REPORTED], f"and {more:,} more unknown fields", _ALL_NAMES))
    return sorted([*errors, *found.values()], key=_field_order)


def _field_of(loc: Sequence[object]) -> str:
    names = [part for part in loc if isinstance(part, str)]
    return names[-1][:40] if names else "scenario"


def _message(field: str, detail: Mapping[str, Any]) -> str:
    """What was wrong, in the lab's words where pydantic's would be vaguer."""
    kind, value = detail.get("type"), detail.get("input")
    known = FIELD_BY_NAME.get(field)
    if kind in ("greater_than_equal", "less_than_equal") and isinstance(value, int):
        return f"{shown_int(value)} is out of range"
    if kind == "literal_error" and known is not None:
        if known.options is not None:
            return f"{repr(value)[:40]} is not one of {', '.join(known.options)}"
        if isinstance(value, int):
            return f"{shown_int(value)} is not a supported value"
    if kind == "string_too_long" and isinstance(value, str):
        return f"is {len(value):,} characters long"
    if kind == "string_pattern_mismatch" and field in _NAME_FIELDS:
        return _NOT_NAMES
    if kind in ("string_pattern_mismatch", "string_unicode"):
        return _NON_PRINTABLE
    return str(detail.get("msg", "is not valid"))
