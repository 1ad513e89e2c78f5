"""The ledger under a set of rules: per stage, persistent lines, training peak, communication."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.communication import Communication, communication
from app.ledger.peak import Peak, training_peak
from app.ledger.persistent import LedgerLine, persistent_lines
from app.ledger.rules import PRODUCTION, STAGES, Rules
from app.ledger.scenario import Scenario


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Ledger:
    scenario: Scenario
    stages: tuple[StageLedger, ...]


def stage_ledger(s: Scenario, stage: int, rules: Rules = PRODUCTION) -> StageLedger:
    lines = persistent_lines(s, stage, rules)
    persistent = sum(line.bytes for line in lines)
    return StageLedger(
        stage=stage,
        lines=lines,
        persistent=persistent,
        peak=training_peak(s, stage, persistent, rules),
        communication=communication(s, stage),
    )


def compute_ledger(s: Scenario, rules: Rules = PRODUCTION) -> Ledger:
    """Every stage's ledger for ``s`` under ``rules`` (the spec's rules unless a mutant's)."""
    return Ledger(s, tuple(stage_ledger(s, stage, rules) for stage in STAGES))
