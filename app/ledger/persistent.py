"""The persistent ledger: one line per (stage, tensor class), per busiest rank.

A line holds integers only; its formula and evidence are spelled out on demand, so the
mutants (which need the numbers, not the prose) never pay for formatting.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.rules import CLASSES, EVIDENCE_REPLICATED, EVIDENCE_SHARDED, STAGES, Rules
from app.ledger.scenario import Scenario

_NO_MASTER = "no separate master copy (master_bytes = 0): the optimizer updates the parameters"
_MASTER_DROPPED = "master copy not counted"
_NO_OPTIMIZER = "no optimizer state (opt_states = 0)"


@dataclass(slots=True)  # a value: never mutated; not frozen because frozen __init__ costs 5x (hot path)
class LedgerLine:
    """bytes = ⌈N ÷ owners⌉ × width × copies."""

    stage: int
    tensor_class: str
    width: int
    copies: int
    owners: int
    elements: int
    bytes: int
    params: int
    sharded: bool
    note: str

    @property
    def formula(self) -> str:
        """The rule with its numbers substituted."""
        noun = "copy" if self.copies == 1 else "copies"
        tail = f"elements × {self.width} B × {self.copies} {noun} = {self.bytes:,} B"
        if self.owners > 1:
            return f"⌈{self.params:,} ÷ {self.owners:,}⌉ = {self.elements:,} {tail}"
        return f"{self.elements:,} {tail}"

    @property
    def evidence(self) -> str:
        """Why this class is sharded or replicated at this stage."""
        return (EVIDENCE_SHARDED if self.sharded else EVIDENCE_REPLICATED)[self.tensor_class]


def width_and_copies(s: Scenario, tensor_class: str, rules: Rules) -> tuple[int, int, str]:
    """Element width, copies per parameter, and a note when the class is empty."""
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


def ledger_line(s: Scenario, stage: int, tensor_class: str, rules: Rules) -> LedgerLine:
    sharded = rules.sharded(tensor_class, stage)
    owners = s.dp if sharded else 1
    elements = -(-s.params // owners)  # ⌈N ÷ owners⌉: the busiest rank's share
    width, copies, note = width_and_copies(s, tensor_class, rules)
    return LedgerLine(stage, tensor_class, width, copies, owners, elements, elements * width * copies, s.params,
                      sharded, note)  # fmt: skip


def persistent_lines(s: Scenario, stage: int, rules: Rules) -> tuple[LedgerLine, ...]:
    return all_persistent_lines(s, rules)[stage]


def all_persistent_lines(s: Scenario, rules: Rules) -> list[tuple[LedgerLine, ...]]:
    """Every stage's lines: as :func:`ledger_line` per cell, with each class's width and copies
    worked out once rather than once per stage (the same numbers; a test holds them equal)."""
    n, dp = s.params, s.dp
    shard = -(-n // dp)
    per_class = [(c, *width_and_copies(s, c, rules)) for c in CLASSES]
    out = []
    for stage, flags in zip(STAGES, rules.table, strict=True):
        out.append(tuple(
            LedgerLine(stage, c, width, copies, dp, shard, shard * width * copies, n, True, note) if sharded
            else LedgerLine(stage, c, width, copies, 1, n, n * width * copies, n, False, note)
            for (c, width, copies, note), sharded in zip(per_class, flags, strict=True)
        ))  # fmt: skip
    return out
