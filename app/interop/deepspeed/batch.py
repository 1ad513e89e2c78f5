"""The batch sizes and activation checkpointing: what one micro batch holds on a rank.

``train_batch_size`` = micro batch × gradient accumulation × D, resolved as DeepSpeed resolves them
(``DeepSpeedConfig._set_batch_related_parameters``: the missing one from the other two; D is the
data-parallel world size, the scenario's dp). "auto" here is the Trainer's own arguments, which the
lab does not have: unresolved, and the lab's micro_batch input is used.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.interop.deepspeed.keys import ACTIVATION, DEEPSPEED
from app.interop.deepspeed.report import DeepSpeedConfigError, Report
from app.interop.deepspeed.values import elements, flag, section
from app.ledger.arithmetic import n

__all__ = ["read_activation_checkpointing", "read_batch"]

_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
_Sizes = tuple[int | None, int | None, int | None]
# When DeepSpeed reduces the gradients under accumulation (deepspeed runtime/engine.py, zero/stage_1_and_2.py,
# stage3.py): at stages 0–1 once, at the accumulation boundary; at stages 2–3 in every micro batch's backward
# hooks, into the partitions (its engine refuses no_sync there).
_SYNC = {
    False: ("grad_sync", "last", "stages 0–1: DeepSpeed reduces the gradients at the accumulation boundary only"),
    True: ("grad_sync", "every", "stages 2–3: DeepSpeed reduces each micro batch's gradients into their partitions "
           "(its engine refuses no_sync)"),
}  # fmt: skip


def read_batch(r: Report, config: Mapping[str, object], dp: int, stage: int) -> None:
    """The three batch keys: resolved and checked as DeepSpeed does, then one line each."""
    raw = {key: config.get(key) for key in _KEYS}
    auto = frozenset(key for key, value in raw.items() if value == "auto")
    train, micro, accum = _resolved(r, raw, auto, dp)
    if train is not None or "train_batch_size" in auto:
        r.line(
            "train_batch_size",
            raw["train_batch_size"],
            "micro batch × gradient accumulation × D: checked, no memory effect of its own",
            "checked",
        )
    _micro_batch(r, raw, auto, micro, train)
    if "gradient_accumulation_steps" in auto:
        r.unresolved_auto(
            "gradient_accumulation_steps", "the Trainer's --gradient_accumulation_steps; the lab uses its grad_accum"
        )
    elif accum is not None:
        r.set("gradient_accumulation_steps", raw["gradient_accumulation_steps"], "grad_accum", accum,
              "micro batches per optimizer step")  # fmt: skip
        if accum > 1:
            r.set("gradient_accumulation_steps", raw["gradient_accumulation_steps"], *_SYNC[stage >= 2])


def _resolved(r: Report, raw: Mapping[str, object], auto: frozenset[str], dp: int) -> _Sizes:
    """(train, micro, accum) with the missing one derived from the others; refused when they do not
    multiply out. A micro batch derived from train_batch_size gets its own line."""
    train, micro, accum = (None if key in auto else elements(key, raw[key], low=1) for key in _KEYS)
    if train is not None and micro is None and "train_micro_batch_size_per_gpu" not in auto:
        micro = train // dp // (accum or 1)
        r.line(
            "train_batch_size",
            train,
            f"micro batch = ⌊{n(train)} ÷ D {n(dp)} ÷ {n(accum or 1)}⌋ = {n(micro)} (DeepSpeed's own resolution)",
            "checked",
        )
    elif train is not None and accum is None and micro is not None and "gradient_accumulation_steps" not in auto:
        accum = train // micro // dp
    if train is not None and micro is not None and accum is None and "gradient_accumulation_steps" not in auto:
        accum = 1  # DeepSpeed's resolution from train_batch_size alone
    if train is not None and micro is not None and accum is not None and (micro < 1 or train != micro * accum * dp):
        raise DeepSpeedConfigError(
            "train_batch_size",
            f"{n(train)} is not micro batch × gradient accumulation × D = {n(micro)} × {n(accum)} × {n(dp)} "
            f"= {n(micro * accum * dp)} (DeepSpeed refuses it; D is the scenario's dp)",
        )
    return train, micro, accum


def _micro_batch(
    r: Report, raw: Mapping[str, object], auto: frozenset[str], micro: int | None, train: int | None
) -> None:
    if "train_micro_batch_size_per_gpu" in auto:
        r.unresolved_auto(
            "train_micro_batch_size_per_gpu",
            "the Trainer's --per_device_train_batch_size; the lab uses its micro_batch input",
        )
    elif micro is not None:
        r.set(
            "train_micro_batch_size_per_gpu",
            raw["train_micro_batch_size_per_gpu"],
            "micro_batch",
            micro,
            "sequences per micro batch on one rank",
        )
    elif train is None and "train_batch_size" not in auto:
        r.line(
            "train_micro_batch_size_per_gpu",
            None,
            "DeepSpeed needs it or train_batch_size; the lab uses its micro_batch input",
            "checked",
        )


def read_activation_checkpointing(r: Report, config: Mapping[str, object]) -> None:
    """The section's presence is full recomputation; its flags are checked one by one."""
    found = section(config, "activation_checkpointing", "activation_checkpointing")
    if "activation_checkpointing" not in config:
        return
    r.set(
        "activation_checkpointing",
        found,
        "act_policy",
        "full",
        "the section configures deepspeed.checkpointing, which models use to checkpoint each layer; "
        "the lab takes it as full recomputation",
    )
    for key, value in found.items():
        path = f"activation_checkpointing.{key}"
        known = ACTIVATION.get(key)
        if known is None:
            raise DeepSpeedConfigError(path, f"not a key of activation_checkpointing in {DEEPSPEED}")
        if isinstance(known.default, bool):
            on = flag(path, value, known.default)
            if on and known.on:
                r.line(path, value, known.on, "not modelled")
            else:
                r.line(path, value, "no memory effect in the lab's model", "no memory effect")
        else:  # number_checkpoints
            elements(path, value, low=0)
            r.line(path, value, "used only with contiguous_memory_optimization: no memory effect", "no memory effect")
