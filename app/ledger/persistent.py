"""The persistent ledger: per stage, one line per tensor class, per busiest rank.

A line holds integers only; its formula and evidence are spelled out on demand, so the
mutants (which need the numbers, not the prose) never pay for formatting. The stages that own
a class the same way (replicated at stages 0–2, say) hold the very same line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.ledger.arithmetic import n
from app.ledger.rules import CLASSES, EVIDENCE_REPLICATED, EVIDENCE_SHARDED, Rules
from app.ledger.scenario import Scenario

_NO_MASTER = "no separate master copy (master_bytes = 0): the optimizer updates the parameters"
_MASTER_DROPPED = "master copy not counted"
_NO_OPTIMIZER = "no optimizer state (opt_states = 0)"


# A value: its fields never change (not frozen because frozen __init__ costs 5x on the hot path);
# only the formula is filled in, once, when first read.
@dataclass(slots=True)
class LedgerLine:
    """bytes = ⌈N ÷ owners⌉ × width × copies.

    A line does not name its stage: the stages that own a class the same way (replicated at
    stages 0–2, say) hold the same line, and the stage ledger holding it says which stage it is.
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
    # The formula, spelled out when first read (the stages sharing the line read it again).
    _formula: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def formula(self) -> str:
        """The rule with its numbers substituted."""
        if self._formula is None:
            self._formula = _spell_formula(self.params, self.owners, self.elements, self.width, self.copies, self.bytes)
        return self._formula

    @property
    def evidence(self) -> str:
        """Why this class is sharded or replicated at this stage."""
        return (EVIDENCE_SHARDED if self.sharded else EVIDENCE_REPLICATED)[self.tensor_class]


def _spell_formula(params: int, owners: int, elements: int, width: int, copies: int, size: int) -> str:
    # N, D and the shard come back in every line of a ledger, and the size on the page beside
    # the formula: n() spells each number once.
    noun = "copy" if copies == 1 else "copies"
    tail = f"elements × {width} B × {copies} {noun} = {n(size)} B"
    if owners > 1:
        return f"⌈{n(params)} ÷ {n(owners)}⌉ = {n(elements)} {tail}"
    return f"{n(elements)} {tail}"


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
    return LedgerLine(tensor_class, width, copies, owners, elements, elements * width * copies, s.params, sharded,
                      note)  # fmt: skip


def all_persistent_lines(s: Scenario, rules: Rules) -> list[tuple[LedgerLine, ...]]:
    """Every stage's lines: as :func:`ledger_line` per cell (a test holds them equal), with each
    class's line built once for the stages that shard it and once for those that replicate it."""
    n, dp = s.params, s.dp
    shard = -(-n // dp)
    sharded_lines, replicated_lines = [], []
    for c in CLASSES:
        width, copies, note = width_and_copies(s, c, rules)
        sharded_lines.append(LedgerLine(c, width, copies, dp, shard, shard * width * copies, n, True, note))
        replicated_lines.append(LedgerLine(c, width, copies, 1, n, n * width * copies, n, False, note))
    return [
        tuple([sharded_lines[i] if sharded else replicated_lines[i] for i, sharded in enumerate(flags)])
        for flags in rules.table
    ]
