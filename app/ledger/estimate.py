"""One scenario's whole answer: ledger, checks, checkpoint ledger and both kill lists."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from app.ledger.checkpoint import CheckpointPolicy, checkpoint_policies
from app.ledger.checks import SCENARIO_CHECKS, CheckResult, frozen_scenario, run_checks
from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.mutants import MutationResult, kill_list, reference_kill_list
from app.ledger.scenario import Scenario


@dataclass(slots=True)  # a value: never mutated; not frozen because frozen __init__ costs 5x (hot path)
class Estimate:
    scenario: Scenario
    ledger: Ledger
    checks: tuple[CheckResult, ...]
    checkpoint: tuple[CheckpointPolicy, ...]
    mutations: tuple[MutationResult, ...]
    reference_mutations: tuple[MutationResult, ...]


@cache
def production_frozen_check() -> CheckResult:
    """Check 5 for the production rules: the frozen scenario never changes, so neither does this."""
    return frozen_scenario(compute_ledger)


def estimate(s: Scenario) -> Estimate:
    ledger = compute_ledger(s)
    return Estimate(
        scenario=s,
        ledger=ledger,
        checks=(*run_checks(ledger, compute_ledger, SCENARIO_CHECKS), production_frozen_check()),
        checkpoint=checkpoint_policies(s, tuple(stage.persistent for stage in ledger.stages)),
        mutations=kill_list(s, ledger),
        reference_mutations=reference_kill_list(),
    )
