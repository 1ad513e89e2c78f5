"""The ledger under a set of rules: per stage, persistent lines, training peak, communication."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.communication import Communication, communication
from app.ledger.peak import Peak, training_peak
from app.ledger.persistent import LedgerLine, all_persistent_lines, ledger_line, persistent_lines
from app.ledger.rules import CLASSES, PRODUCTION, STAGES, Rules
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


@dataclass(frozen=True, slots=True)
class Rederivation:
    """What a change of rules touches in a ledger: per stage, the indexes (in CLASSES order) of the
    lines whose rule differs, and whether the peak's own rules (gather, activations) differ."""

    lines: tuple[tuple[int, ...], ...]
    peaks: bool


def rederivation(base: Rules, rules: Rules) -> Rederivation:
    changed = rules.cells_differing_from(base)
    return Rederivation(
        tuple(tuple(i for i, c in enumerate(CLASSES) if (stage, c) in changed) for stage in STAGES),
        rules.peak_rules_differ_from(base),
    )


def rederive(base: Ledger, rules: Rules, plan: Rederivation | None = None) -> Ledger:
    """``base`` recomputed under ``rules``, reusing every line that the rule change cannot touch.

    Equal to ``compute_ledger(base.scenario, rules)`` (a property test says so), but a mutant
    that changes one cell's ownership recomputes that cell and the peaks, not all sixteen lines.
    ``plan`` may carry ``rederivation(base.rules, rules)`` worked out once in advance.
    """
    s = base.scenario
    if plan is None:
        plan = rederivation(base.rules, rules)
    stages = []
    for st, changed in zip(base.stages, plan.lines, strict=True):
        if not changed and not plan.peaks:
            stages.append(st)
            continue
        lines, persistent = st.lines, st.persistent
        if changed:
            new = list(lines)
            for i in changed:
                new[i] = ledger_line(s, st.stage, CLASSES[i], rules)
            lines = tuple(new)
            persistent = sum([line.bytes for line in lines])
        stages.append(StageLedger(st.stage, lines, persistent, training_peak(s, st.stage, persistent, rules),
                                  st.communication))  # fmt: skip
    return Ledger(s, tuple(stages), rules)
