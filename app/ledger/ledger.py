"""The ledger under a set of rules: per stage, persistent lines, training peak, communication."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.communication import Communication, communication
from app.ledger.peak import Peak, training_peak
from app.ledger.persistent import LedgerLine, all_persistent_lines, ledger_line, persistent_lines
from app.ledger.rules import PRODUCTION, STAGES, Rules
from app.ledger.scenario import Scenario


@dataclass(slots=True)  # a value: never mutated; not frozen because frozen __init__ costs 5x (hot path)
class StageLedger:
    stage: int
    lines: tuple[LedgerLine, ...]
    persistent: int
    peak: Peak
    communication: Communication

    def bytes_of(self, tensor_class: str) -> int:
        for line in self.lines:
            if line.tensor_class == tensor_class:
                return line.bytes
        raise KeyError(tensor_class)


@dataclass(slots=True)  # a value: never mutated; not frozen because frozen __init__ costs 5x (hot path)
class Ledger:
    scenario: Scenario
    stages: tuple[StageLedger, ...]
    rules: Rules = PRODUCTION


def stage_ledger(s: Scenario, stage: int, rules: Rules = PRODUCTION) -> StageLedger:
    lines = persistent_lines(s, stage, rules)
    persistent = sum(line.bytes for line in lines)
    return StageLedger(stage, lines, persistent, training_peak(s, stage, persistent, rules), communication(s, stage))


def compute_ledger(s: Scenario, rules: Rules = PRODUCTION) -> Ledger:
    """Every stage's ledger for ``s`` under ``rules`` (the spec's rules unless a mutant's)."""
    stages = []
    for stage, lines in zip(STAGES, all_persistent_lines(s, rules), strict=True):
        persistent = sum([line.bytes for line in lines])
        stages.append(
            StageLedger(stage, lines, persistent, training_peak(s, stage, persistent, rules), communication(s, stage))
        )
    return Ledger(s, tuple(stages), rules)


def rederive(base: Ledger, rules: Rules, changed: frozenset[tuple[int, str]] | None = None) -> Ledger:
    """``base`` recomputed under ``rules``, reusing every line that the rule change cannot touch.

    Equal to ``compute_ledger(base.scenario, rules)`` (a property test says so), but a mutant
    that changes one cell's ownership recomputes that cell and the peaks, not all sixteen lines.
    ``changed`` may carry ``rules.cells_differing_from(base.rules)`` computed once in advance.
    """
    s = base.scenario
    if changed is None:
        changed = rules.cells_differing_from(base.rules)
    touched: dict[int, set[str]] = {}
    for stage, tensor_class in changed:
        touched.setdefault(stage, set()).add(tensor_class)
    peaks_differ = rules.peak_rules_differ_from(base.rules)
    stages = []
    for st in base.stages:
        classes = touched.get(st.stage)
        if classes is None and not peaks_differ:
            stages.append(st)
            continue
        lines, persistent = st.lines, st.persistent
        if classes is not None:
            lines = tuple(
                ledger_line(s, st.stage, ln.tensor_class, rules) if ln.tensor_class in classes else ln for ln in lines
            )
            persistent = sum(ln.bytes for ln in lines)
        stages.append(StageLedger(st.stage, lines, persistent, training_peak(s, st.stage, persistent, rules),
                                  st.communication))  # fmt: skip
    return Ledger(s, tuple(stages), rules)
