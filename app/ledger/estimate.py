"""One scenario's whole answer: ledger, checks, checkpoint ledger and both kill lists."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.checkpoint import CheckpointPolicy, checkpoint_policies
from app.ledger.checks import ALL_CHECKS, CheckResult, run_checks
from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.mutants import MutationResult, kill_list, reference_kill_list
from app.ledger.scenario import Scenario


@dataclass(frozen=True, slots=True)
class Estimate:
    scenario: Scenario
    ledger: Ledger
    checks: tuple[CheckResult, ...]
    checkpoint: tuple[CheckpointPolicy, ...]
    mutations: tuple[MutationResult, ...]
    reference_mutations: tuple[MutationResult, ...]


def estimate(s: Scenario) -> Estimate:
    ledger = compute_ledger(s)
    return Estimate(
        scenario=s,
        ledger=ledger,
        checks=run_checks(ledger, compute_ledger, ALL_CHECKS),
        checkpoint=checkpoint_policies(s, tuple(stage.persistent for stage in ledger.stages)),
        mutations=kill_list(s),
        reference_mutations=reference_kill_list(),
    )
