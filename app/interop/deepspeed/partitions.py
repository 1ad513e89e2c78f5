"""``zero_hpz_partition_size`` → ``hpz`` and ``mics_shard_size`` → ``shard_group``, as DeepSpeed reads them.

Both are stage 3's: ``engine.py``'s ``DeepSpeedEngine._configure_zero_optimizer`` hands
``zero_hpz_partition_size`` to ``DeepSpeedZeroOptimizer_Stage3`` alone and builds ``MiCS_Optimizer``
(``_return_mics_optimizer``) when ``mics_shard_size`` > 0 at stage 3 only; stages 1–2's
``DeepSpeedZeroOptimizer`` takes neither, so there DeepSpeed shards over all D (the lines say
``ignored`` and the scenario takes hpz 1, shard_group D). hpZ is on above 1 (``zero/config.py``:
``Field(1, ge=0)``; ``partition_parameters.py``, ``Init.__init__``: ``zero_hpz_partition_size > 1``),
MiCS above 0 (``Field(-1)``, no bound; ``engine.py``: ``mics_shard_size > 0``). A size must divide D,
as the lab's own hpz and shard_group inputs must (DeepSpeed asserts it divides the world size:
``utils/groups.py``, ``_create_zero_param_parallel_group``; ``zero/mics_utils.py``,
``_generate_mics_config``). DeepSpeed does not refuse the two together, but mixes them:
``_return_mics_optimizer`` does not pass ``zero_hpz_partition_size`` (the optimizer's default 1) while
``MiCS_Init``, a ``zero.Init``, still builds hpZ's group from the config; the lab refuses the pair, as
it does not model them together. ``_validate_zero3_moe_compatibility`` refuses both with ZeRO-3's MoE (AutoEP),
so with ep > 1 the lab refuses them too.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.interop.deepspeed.keys import ELEMENTS_MAX, default
from app.interop.deepspeed.report import DeepSpeedConfigError, Report
from app.interop.deepspeed.values import ranks, zero_section
from app.ledger.arithmetic import n
from app.ledger.scenario import Scenario

__all__ = ["read_partitions"]

_HPZ = "zero_optimization.zero_hpz_partition_size"
_MICS = "zero_optimization.mics_shard_size"


def read_partitions(r: Report, config: Mapping[str, object], stage: int, s: Scenario, at: int) -> None:
    """hpz and shard_group from the config; the lines go at ``at``, beside the other zero_optimization keys."""
    zero = zero_section(config)
    hpz_raw, mics_raw = zero.get("zero_hpz_partition_size"), zero.get("mics_shard_size")
    hpz = ranks(_HPZ, hpz_raw, default(_HPZ), 0)
    mics = ranks(_MICS, mics_raw, default(_MICS), -ELEMENTS_MAX - 1)
    sub = Report(r.typed, r.fields, r.origin)  # shares the fields; its lines are spliced in at `at`
    if stage != 3:
        _below_stage_3(sub, s, stage, hpz_raw, mics_raw)
    else:
        _refused(r.typed, s, hpz, mics)
        _stage_3(sub, s, hpz_raw, hpz, mics_raw, mics)
    r.lines[at:at] = sub.lines


def _below_stage_3(sub: Report, s: Scenario, stage: int, hpz_raw: object, mics_raw: object) -> None:
    """Stages 1–2 (and 0) shard over all D: a written size is ignored, and the scenario takes hpz 1 and
    shard_group D unless the user typed them."""
    dp = s.dp
    for key, written, name, one in ((_HPZ, hpz_raw, "hpz", 1), (_MICS, mics_raw, "shard_group", dp)):
        if written is not None:
            kept = f"; {name} was typed, and the typed value is kept" if name in sub.typed else ""
            sub.line(
                key,
                written,
                f"read only at stage 3 (this is stage {stage}: DeepSpeedZeroOptimizer takes no such partition, "
                f"engine.py _configure_zero_optimizer), so DeepSpeed shards over all D{kept}",
                "ignored",
            )
            if name not in sub.typed and getattr(s, name) != one:
                sub.fields[name] = one  # DeepSpeed's layout below stage 3: one partition over D
                sub.origin[name] = key
        elif name not in sub.typed and getattr(s, name) != one:
            sub.set(key, None, name, one, "below stage 3 DeepSpeed has no such partition: one over all D")


def _refused(typed: frozenset[str], s: Scenario, hpz: int, mics: int) -> None:
    """At stage 3: the pair together, a size that does not divide D, or either with ep > 1."""
    hpz_on, mics_on = hpz > 1, mics > 0
    if hpz_on and mics_on and not {"hpz", "shard_group"} & typed:  # a typed one: the lab's own rule
        raise DeepSpeedConfigError(
            _HPZ,
            f"{n(hpz)} with mics_shard_size {n(mics)}: ZeRO++'s secondary partition and MiCS together are not "
            "modelled (the lab does not take hpz with a shard group); DeepSpeed mixes them: "
            "_return_mics_optimizer drops zero_hpz_partition_size while MiCS_Init still builds hpZ's group",
        )
    for key, on, size, name in ((_HPZ, hpz_on, hpz, "hpz"), (_MICS, mics_on, mics, "shard_group")):
        if not on or name in typed:
            continue
        if s.dp % size:
            where = "groups._create_zero_param_parallel_group" if name == "hpz" else "mics_utils._generate_mics_config"
            raise DeepSpeedConfigError(
                key,
                f"{n(size)} does not divide D = {n(s.dp)} (as the lab's {name} must; DeepSpeed asserts it divides "
                f"the world size: {where})",
            )
        if s.ep > 1:
            raise DeepSpeedConfigError(
                key,
                f"{n(size)} with ep {n(s.ep)}: DeepSpeed refuses hpZ and MiCS with ZeRO-3's expert parallelism "
                "(engine.py, _validate_zero3_moe_compatibility), and the lab does not model them together",
            )


def _stage_3(sub: Report, s: Scenario, hpz_raw: object, hpz: int, mics_raw: object, mics: int) -> None:
    """The stage-3 lines: a secondary partition for hpZ, a shard group for MiCS (or DeepSpeed's defaults,
    where the scenario so far differs from them)."""
    dp = s.dp
    if hpz_raw is not None or ("hpz" not in sub.typed and s.hpz != 1):
        why = (
            f"ZeRO++ hpZ: beside its ⌈N ÷ D {n(dp)}⌉ primary shard each rank keeps a secondary ⌈N ÷ {n(hpz)}⌉ of "
            f"the parameters (partition_parameters.py, Init._partition_param_sec), so backward all-gathers within "
            f"{n(hpz)} ranks ({n(dp // hpz)} group{'s' if dp // hpz > 1 else ''})"
            if hpz > 1
            else "no secondary partition (DeepSpeed's default 1; hpZ is on above 1)"
        )
        sub.set(_HPZ, hpz_raw, "hpz", hpz if hpz > 1 else 1, why)
    if mics_raw is not None or ("shard_group" not in sub.typed and s.shard_group != dp):
        groups = dp // mics if mics > 0 else 1
        if mics > 0 and mics < dp:
            why = (
                f"MiCS: state sharded over {n(mics)} ranks, replicated across {n(groups)} "
                f"group{'s' if groups > 1 else ''} (mics_utils.create_mics_comm_groups); gradients are "
                "reduce-scattered within the group, then all-reduced across groups (MiCS_Optimizer)"
            )
        elif mics > 0:
            why = f"MiCS over one group of all D = {n(dp)} ranks: plain ZeRO-3's layout"
        else:
            why = "MiCS off (DeepSpeed's default -1; on above 0): state sharded over all D ranks"
        sub.set(_MICS, mics_raw, "shard_group", mics if mics > 0 else dp, why)
