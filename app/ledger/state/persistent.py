"""The persistent ledger: per stage, one line per tensor class, per busiest rank."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.formula import Formula, Remark
from app.ledger.scenario import Scenario
from app.ledger.state.rules import CLASSES, EVIDENCE_REPLICATED, EVIDENCE_SHARDED, Rules

_NO_MASTER = "no separate master copy (master_bytes = 0): the optimizer updates the parameters"
_MASTER_DROPPED = "master copy not counted"
_NO_OPTIMIZER = "no optimizer state (opt_states = 0)"


def shard(elements: int, owners: int) -> int:
    """⌈elements ÷ owners⌉: the busiest rank's share when ``owners`` ranks split ``elements`` (ZeRO's flat
    partition; where it does not divide, some ranks hold one element more)."""
    return ceil_div(elements, owners)


def shard_elements(parts: tuple[tuple[int, int], ...]) -> int:
    """The busiest rank's elements of a class split in ``parts`` ((elements, owners) each, as
    :meth:`Scenario.shards` gives them): Σ ⌈part ÷ owners⌉."""
    return sum(shard(p, o) for p, o in parts)


def offloaded(s: Scenario, stage: int, tensor_class: str) -> str:
    """Where ``tensor_class`` lives instead of the device at ``stage`` ("cpu" or "nvme"), or "" when on it.

    Optimizer offload (DeepSpeed ZeRO-Offload, stages 1–3) moves the master copy and the optimizer states,
    and from stage 2 on the gradient partition too: each unit's gradients are reduced on the device, then
    copied into the host's FP32 partition the CPU optimizer steps. Parameter offload is stage 3's only.
    """
    if tensor_class in ("master_weights", "optimizer_states") and stage >= 1:
        return "" if s.offload_optimizer == "none" else s.offload_optimizer
    if tensor_class == "gradients" and stage >= 2:
        return "" if s.offload_optimizer == "none" else s.offload_optimizer
    if tensor_class == "parameters" and stage == 3:
        return "" if s.offload_param == "none" else s.offload_param
    return ""


@dataclass(frozen=True, slots=True)
class LedgerLine:
    """bytes = ⌈N ÷ owners⌉ × width × copies, for one tensor class at one stage (the stage ledger
    holding the line says which stage).

    With expert parallelism a sharded class splits in two parts, each ⌈part ÷ its owners⌉ (``parts``:
    the dense parameters over D, the experts over D ÷ ep); with ZeRO++'s hpZ stage 3's parameters add
    the secondary partition, ⌈N ÷ hpz⌉ elements (``secondary``). ``elements`` counts them all.
    """

    tensor_class: str
    width: int
    copies: int
    owners: int
    elements: int
    bytes: int
    params: int
    sharded: bool
    note: str
    parts: tuple[tuple[int, int], ...] = ()  # (parameters, owners) when a sharded class splits in several
    secondary: int = 0  # hpZ: elements of the secondary partition
    hpz: int = 1
    # parameters only, when frozen ones keep another width (Accelerate upcasts only what trains): their count,
    # the rank's elements of them and their width; params and elements are then the trainable ones'
    frozen: int = 0
    frozen_elements: int = 0
    frozen_width: int = 0

    @property
    def formula(self) -> Formula:
        """The rule with its numbers substituted."""
        noun = "copy" if self.copies == 1 else "copies"
        tail = f"elements × {self.width} B × {self.copies} {noun} = {n(self.bytes)} B"
        if self.frozen_elements:
            trained, frozen = (
                (f"⌈{n(self.params)} ÷ {n(self.owners)}⌉", f"⌈{n(self.frozen)} ÷ {n(self.owners)}⌉")
                if self.owners > 1
                else (n(self.params), n(self.frozen))
            )
            return Formula.of(f"({trained} = {n(self.elements)} trained × {self.width} B + {frozen} = "
                              f"{n(self.frozen_elements)} frozen × {self.frozen_width} B) × {self.copies} {noun} = "
                              f"{n(self.bytes)} B")  # fmt: skip
        if len(self.parts) > 1:
            terms = " + ".join(f"⌈{n(p)} ÷ {n(o)}⌉" for p, o in self.parts)
            # which group divides which term is part of the arithmetic, not a remark
            return Formula.of(f"{terms} (dense over D, experts over D ÷ ep) = {n(self.elements)} {tail}")
        if self.secondary:
            return Formula.of(f"⌈{n(self.params)} ÷ {n(self.owners)}⌉ + ⌈{n(self.params)} ÷ {n(self.hpz)}⌉",
                              Remark("hpZ secondary partition"), f" = {n(self.elements)} {tail}")  # fmt: skip
        if self.owners > 1:
            return Formula.of(f"⌈{n(self.params)} ÷ {n(self.owners)}⌉ = {n(self.elements)} {tail}")
        return Formula.of(f"{n(self.elements)} {tail}")

    @property
    def evidence(self) -> str:
        """Why this class is sharded or replicated at this stage."""
        return (EVIDENCE_SHARDED if self.sharded else EVIDENCE_REPLICATED)[self.tensor_class]


def width_and_copies(s: Scenario, tensor_class: str, rules: Rules, stage: int) -> tuple[int, int, str]:
    """Element width, copies per parameter on the device, and a note when the class is empty there."""
    where = offloaded(s, stage, tensor_class)
    if where:
        width = {"parameters": s.param_bytes, "gradients": s.grad_bytes, "master_weights": s.master_bytes,
                 "optimizer_states": s.opt_bytes}[tensor_class]  # fmt: skip
        return width, 0, f"offloaded to {where}: counted in the host ledger, not on the device"
    if tensor_class == "parameters":
        return s.param_bytes, 1, ""
    if tensor_class == "gradients":
        return s.grad_bytes, 1, ""
    if tensor_class == "master_weights":
        if s.master_bytes == 0:
            return 0, 0, _NO_MASTER
        if not rules.master_copy:
            return s.master_bytes, 0, _MASTER_DROPPED
        return s.master_bytes, 1, ""
    if s.opt_states == 0:
        return s.opt_bytes, 0, _NO_OPTIMIZER
    return s.opt_bytes, s.opt_states, ""


def ledger_line(s: Scenario, stage: int, tensor_class: str, rules: Rules, degree: int | None = None) -> LedgerLine:
    """One class at one stage (at D = ``degree``, the fit finder's, or the scenario's own). Parameters count every
    parameter; gradients, the master copy and the optimizer states only those that train."""
    sharded = rules.sharded(tensor_class, stage)
    hierarchical = rules.hierarchical_groups
    dp = s.dp if degree is None else degree
    # the frozen ones' stored elements (a 4-bit base: its packed BF16 elements), at a width of their own
    frozen = s.frozen_elements if tensor_class == "parameters" else 0
    split = bool(frozen) and (s.frozen_bytes != s.param_bytes or s.base_quant != "none")
    count = s.trainable_params if tensor_class != "parameters" or split else s.params
    parts = (s.shards(dp, count) if hierarchical else ((count, dp),)) if sharded else ((count, 1),)
    owners = parts[0][1]
    elements = shard_elements(parts)
    frozen_elements = (shard(frozen, owners) if sharded else frozen) if split else 0
    secondary = 0
    if tensor_class == "parameters" and stage == 3 and sharded and s.hpz > 1 and hierarchical:
        secondary = shard(s.params, s.hpz)  # ZeRO++ keeps it beside the primary shard
        elements += secondary
    width, copies, note = width_and_copies(s, tensor_class, rules, stage)
    if secondary and not note:
        note = f"ZeRO++ hpZ: a secondary 1 ÷ {s.hpz} partition, which backward all-gathers within its group"
    frozen_width = s.frozen_bytes if split else 0
    return LedgerLine(
        tensor_class=tensor_class,
        width=width,
        copies=copies,
        owners=owners,
        elements=elements,
        bytes=(elements * width + frozen_elements * frozen_width) * copies,
        params=count,
        sharded=sharded,
        note=note,
        parts=parts if len(parts) > 1 else (),
        secondary=secondary,
        hpz=s.hpz,
        frozen=frozen if split else 0,
        frozen_elements=frozen_elements,
        frozen_width=frozen_width,
    )


def persistent_lines(s: Scenario, stage: int, rules: Rules) -> tuple[LedgerLine, ...]:
    """The stage's persistent lines, one per tensor class in :data:`CLASSES`' order."""
    return tuple(ledger_line(s, stage, c, rules) for c in CLASSES)
