"""The ledger under a set of rules: per stage, persistent lines, training peak, communication."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.peak.declared import Peak, training_peak
from app.ledger.scenario import Scenario
from app.ledger.state.communication import Communication, communication
from app.ledger.state.host import HostLedger, host_ledger
from app.ledger.state.persistent import LedgerLine, persistent_lines
from app.ledger.state.rules import PRODUCTION, STAGES, Rules


@dataclass(frozen=True, slots=True)
class StageLedger:
    """One stage: its persistent lines and total, its training peak and its communication."""

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
    host: HostLedger
    rules: Rules = PRODUCTION


def compute_ledger(s: Scenario, rules: Rules = PRODUCTION, *, schedule: bool = True) -> Ledger:
    """Every stage's ledger for ``s`` under ``rules`` (the spec's rules unless a mutant's).

    ``schedule=False`` leaves every peak the declared one: for checks that read only the persistent
    lines (the kill lists try those first)."""
    stages = []
    for stage in STAGES:
        lines = persistent_lines(s, stage, rules)
        persistent = sum(line.bytes for line in lines)
        peak = training_peak(s, stage, persistent, rules, lines if schedule else ())
        stages.append(StageLedger(stage, lines, persistent, peak, communication(s, stage)))
    return Ledger(s, tuple(stages), host_ledger(s, rules), rules)
