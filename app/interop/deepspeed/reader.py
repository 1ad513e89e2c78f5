"""A DeepSpeed config (``ds_config.json``) read into a scenario, every key accounted for.

:func:`import_deepspeed` reads a config beside the other scenario inputs (a model, typed fields) and
gives the scenario it describes plus one :class:`~app.interop.deepspeed.report.Line` per key: what the
config says, what it resolves to and what the lab does with it. A typed field always wins over the config.

* **Elements, not bytes.** DeepSpeed's sizes (``reduce_bucket_size``, ``stage3_prefetch_bucket_size``
  …) count elements; each becomes bytes with the width it applies to, and the line shows the product.
* **Defaults.** A missing key takes DeepSpeed's documented default (:mod:`~app.interop.deepspeed.keys`,
  one table for reading and writing).
* **"auto".** The value the Hugging Face Trainer writes before DeepSpeed reads the file
  (:mod:`~app.interop.deepspeed.resolve` for the sizes); the batch sizes and the precision come from the
  Trainer's own arguments, which the lab does not have: those stay *unresolved* and the lab's own
  input is used, said so in :attr:`DeepSpeedImport.unresolved`.
* **Refused.** What DeepSpeed itself refuses (an unknown key inside ``zero_optimization``, fp16 and
  bf16 both on, batch sizes that do not multiply out) raises
  :class:`~app.interop.deepspeed.report.DeepSpeedConfigError` naming the key. An unknown top-level key
  is only reported: DeepSpeed does not read it either.
* **Hierarchical partitioning.** ``zero_hpz_partition_size`` (ZeRO++ hpZ) is the scenario's ``hpz`` and
  ``mics_shard_size`` (MiCS) its ``shard_group``, both read at stage 3 only, as DeepSpeed reads them
  (:mod:`~app.interop.deepspeed.partitions` cites where).

Some keys change memory in ways the ledger does not model yet (quantized communication, a partial
offload ratio): their lines say ``not modelled`` and what the ledger counts instead.

This module reads the precision, the optimizer and the top-level keys, and runs the sections in the
order their lines are shown: zero_optimization (:mod:`~app.interop.deepspeed.zero`), precision,
optimizer, activation checkpointing and batch (:mod:`~app.interop.deepspeed.batch`), the other top-level
keys, then what needs the scenario so far (partitions, batch sizes, the sized keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.interop.deepspeed.batch import read_activation_checkpointing, read_batch
from app.interop.deepspeed.keys import (
    BF16,
    DEEPSPEED,
    DTYPE_WIDTHS,
    FP16,
    OPTIMIZER_STATES,
    REMOVED_OPTIMIZERS,
    TOP,
    Key,
    lookup,
    model_width,
)
from app.interop.deepspeed.partitions import read_partitions
from app.interop.deepspeed.report import DeepSpeedConfigError, Line, Report, shown
from app.interop.deepspeed.resolve import read_sizes
from app.interop.deepspeed.values import flag, section
from app.interop.deepspeed.zero import read_save_flags, read_zero
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario

__all__ = ["DeepSpeedImport", "import_deepspeed"]


@dataclass(frozen=True, slots=True)
class DeepSpeedImport:
    scenario: Scenario
    lines: tuple[Line, ...]
    unresolved: tuple[str, ...]  # the keys whose "auto" the lab could not resolve, each with what it used
    origin: Mapping[str, str]  # scenario field -> the config key that set it (for messages about the field)


def import_deepspeed(
    config: Mapping[str, object], inputs: Mapping[str, object], typed: frozenset[str] | None = None
) -> DeepSpeedImport:
    """The scenario ``config`` describes, on top of ``inputs`` (raw scenario fields: a model, D …).

    ``typed`` names the fields the user typed, which the config never overrides (default: every
    field of ``inputs``). Raises :class:`DeepSpeedConfigError` for a key DeepSpeed would refuse or
    the lab cannot read (a field the config puts out of its bounds included), and ``ScenarioError``
    for a bad field among ``inputs``.
    """
    r = Report(frozenset(inputs) if typed is None else typed)
    stage = read_zero(r, config)
    zero_end = len(r.lines)  # the partitioning lines go here, beside the other zero_optimization keys
    _precision(r, config)
    _optimizer(r, config)
    read_activation_checkpointing(r, config)
    _top_level(r, config)
    read_partitions(r, config, stage, _parse(r, inputs), zero_end)
    read_batch(r, config, _parse(r, inputs).dp, stage)
    read_sizes(r, config, _parse(r, inputs), stage)
    read_save_flags(r, config)
    final = _parse(r, inputs)
    return DeepSpeedImport(final, tuple(r.lines), tuple(r.unresolved), dict(r.origin))


def _parse(r: Report, inputs: Mapping[str, object]) -> Scenario:
    """The scenario so far; a field the config put out of its bounds is an error on the config's key."""
    try:
        return parse_scenario({**inputs, **r.fields})
    except ScenarioError as exc:
        for e in exc.errors:
            if e.field in r.origin:
                raise DeepSpeedConfigError(
                    r.origin[e.field], f"gives {e.field} = {r.fields[e.field]}: {e.message} (allowed: {e.allowed})"
                ) from exc
        raise


# --------------------------------------------------------------------------- precision


def _precision(r: Report, config: Mapping[str, object]) -> None:
    """fp16 / bf16: the widths of parameters, gradients and the master copy (unresolved when both are
    "auto": the Trainer's --fp16 / --bf16 decide)."""
    enabled = _enabled(r, config)
    on = [name for name, value in enabled.items() if value]
    if len(on) == 2:
        raise DeepSpeedConfigError("bf16.enabled", "fp16 and bf16 cannot both be enabled (DeepSpeed refuses it)")
    grad_accum = section(config, "data_types", "data_types").get("grad_accum_dtype")
    if grad_accum is not None and (not isinstance(grad_accum, str) or grad_accum not in DTYPE_WIDTHS):
        raise DeepSpeedConfigError(
            "data_types.grad_accum_dtype", f'must be "fp32", "fp16" or "bf16", not {shown(grad_accum)}'
        )
    if not on and None in enabled.values():
        r.unresolved_auto(
            "fp16.enabled / bf16.enabled",
            "the Trainer's --fp16 or --bf16 decides (neither: FP32); the lab keeps its widths (16-bit parameters "
            "and gradients, an FP32 master: what either flag gives)",
        )
        return
    _widths(r, config, on[0] if on else None, None if grad_accum is None else str(grad_accum))


def _enabled(r: Report, config: Mapping[str, object]) -> dict[str, bool | None]:
    """Each section's ``enabled`` (None: "auto"), and a line for each of its other keys; a key the section
    does not declare is refused, as DeepSpeed's precision_config.py forbids it."""
    fp16 = section(config, "fp16", "fp16")
    bf16_key = "bf16" if "bf16" in config or "bfloat16" not in config else "bfloat16"
    bf16 = section(config, bf16_key, bf16_key)
    enabled: dict[str, bool | None] = {}
    for name, found, known in (("fp16", fp16, FP16), (bf16_key, bf16, BF16)):
        raw = found.get("enabled")
        enabled[name] = None if raw == "auto" else flag(f"{name}.enabled", raw, False)
        for key in found:
            if key == "enabled":
                continue
            path = f"{name}.{key}"
            k = known.get(key)
            if k is None:
                raise DeepSpeedConfigError(path, f"not a key of {name} in {DEEPSPEED} (DeepSpeed refuses unknown keys)")
            if k.on and found[key] is True:
                r.line(path, True, k.on, "not modelled")
            else:
                r.line(path, found[key], k.effect, "no memory effect")
    return enabled


def _widths(r: Report, config: Mapping[str, object], name: str | None, grad_accum: str | None) -> None:
    """The fields the precision sets: ``name`` is the 16-bit section that is on (None: FP32)."""
    mixed = name is not None
    width = model_width(mixed)
    key = f"{name}.enabled" if mixed else "fp16.enabled, bf16.enabled"
    r.set(key, mixed, "param_bytes", width, f"{'16-bit' if mixed else 'FP32'} model parameters ({width} B)")
    r.set(
        key,
        mixed,
        "master_bytes",
        4 if mixed else 0,
        "an FP32 master copy beside the 16-bit parameters" if mixed else "FP32 parameters are their own master",
    )
    if grad_accum is not None:
        accum = DTYPE_WIDTHS[grad_accum]
        r.set("data_types.grad_accum_dtype", grad_accum, "grad_bytes", accum, "gradients accumulate in this type")
    else:
        r.set(key, mixed, "grad_bytes", width, "gradients in the model's type (data_types.grad_accum_dtype absent)")
    if config.get("communication_data_type") is None and grad_accum is not None and DTYPE_WIDTHS[grad_accum] != width:
        r.set(
            key,
            mixed,
            "reduce_bytes",
            width,
            "DeepSpeed reduces in the model's type unless "
            "communication_data_type says otherwise (not in the accumulation type)",
        )


# --------------------------------------------------------------------------- the optimizer


def _optimizer(r: Report, config: Mapping[str, object]) -> None:
    """optimizer.type → opt_states (its FP32 states per parameter) and opt_bytes 4; params have no memory effect."""
    found = section(config, "optimizer", "optimizer")
    if not found:
        r.line(
            "optimizer",
            None,
            "the training script's optimizer (the Hugging Face Trainer's AdamW by "
            "default); the lab keeps opt_states and opt_bytes as they are",
            "checked",
        )
        return
    kind = found.get("type")
    if not isinstance(kind, str) or not kind:
        raise DeepSpeedConfigError("optimizer.type", f"must name the optimizer, not {shown(kind)}")
    params = found.get("params", {})
    if not isinstance(params, Mapping):
        raise DeepSpeedConfigError("optimizer.params", f"must be an object, not {shown(params)}")
    states, why = _states(kind, params)
    r.set("optimizer.type", kind, "opt_states", states, f"{kind} keeps {why} per parameter")
    r.set("optimizer.type", kind, "opt_bytes", 4, "DeepSpeed keeps optimizer state in FP32")
    for key in params:
        r.line(f"optimizer.params.{key}", params[key], "a hyperparameter: no memory effect", "no memory effect")


def _states(kind: str, params: Mapping[str, object]) -> tuple[int, str]:
    """The optimizer's state tensors per parameter and what they are; refused for one the lab does not know."""
    lowered = kind.lower()
    if lowered in REMOVED_OPTIMIZERS:
        raise DeepSpeedConfigError("optimizer.type", f"{kind} was removed in {DEEPSPEED} (and ZeRO never allowed it)")
    if lowered in OPTIMIZER_STATES:
        states = OPTIMIZER_STATES[lowered]
        return states, {2: "first and second moments", 1: "one moment"}[states]
    if kind == "SGD":  # any other name is torch.optim's, case and all
        momentum = params.get("momentum", 0)
        if isinstance(momentum, bool) or not isinstance(momentum, int | float):
            raise DeepSpeedConfigError("optimizer.params.momentum", f"must be a number, not {shown(momentum)}")
        return (1, "a momentum buffer") if momentum else (0, "no state without momentum")
    raise DeepSpeedConfigError(
        "optimizer.type",
        f"{kind!r} is not an optimizer the lab knows the state of (Adam, AdamW, Lamb, Adagrad, Lion, SGD; "
        "Muon keeps 1 state for its matrices and Adam's 2 for the rest); set opt_states by hand and leave the "
        "optimizer section out",
    )


# --------------------------------------------------------------------------- the other top-level keys


def _top_level(r: Report, config: Mapping[str, object]) -> None:
    """Keys read as a whole (no memory effect, or not modelled), unknown keys reported, and the
    communication type."""
    for key, value in config.items():
        known: Key | None = lookup(TOP, key)
        if known is not None and known.kind == "read":
            continue
        if known is None:
            r.line(
                key or '""',  # an empty key, shown as one
                value,
                f"not a key {DEEPSPEED} reads (DeepSpeed ignores unknown top-level keys, and so does "
                "the lab): check its spelling",
                "ignored",
            )
        else:
            r.line(key, value, known.effect, "not modelled" if known.kind == "not modelled" else "no memory effect")
    kind = config.get("communication_data_type")
    if kind is not None:
        if not isinstance(kind, str) or kind.lower() not in DTYPE_WIDTHS:
            raise DeepSpeedConfigError(
                "communication_data_type", f'must be "fp32", "fp16" or "bf16", not {shown(kind)}'
            )
        width = DTYPE_WIDTHS[kind.lower()]
        r.set("communication_data_type", kind, "reduce_bytes", width, "gradients are reduced in this type")
