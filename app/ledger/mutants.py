"""The five mutants and the kill list.

Each mutant is the production :class:`Rules` with exactly one rule changed; its ledger is
computed by the real ledger code, then the named checks run on it. A mutant that no check
tells apart is reported as surviving, with the reason it is equivalent on that scenario.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from app.ledger.arithmetic import ceil_div
from app.ledger.checks import ALL_CHECKS, FROZEN_SCENARIO, SCENARIO_CHECKS, run_checks
from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.rules import SHARDED_FROM, Rules
from app.ledger.scenario import Scenario


def _unsplittable(s: Scenario) -> str | None:
    if s.dp == 1:
        return "dp = 1: sharding is the identity"
    if s.params == 1:
        return "params = 1: ⌈1 ÷ D⌉ = 1, one element cannot be split"
    return None


def _why_replicate_optimizer(s: Scenario) -> str | None:
    if s.master_bytes == 0 and s.opt_states == 0:
        return "master_bytes = 0 and opt_states = 0: there is no optimizer state to replicate"
    return _unsplittable(s)


def _why_shard_params(s: Scenario) -> str | None:
    return _unsplittable(s)


def _why_omit_master(s: Scenario) -> str | None:
    if s.master_bytes == 0:
        return "master_bytes = 0: the scenario has no master copy to omit"
    return None


def _why_divide_activations(s: Scenario) -> str | None:
    if s.dp == 1:
        return "dp = 1: dividing by D is the identity"
    if s.activation_bytes == 0:
        return "activation_bytes = 0: nothing to divide"
    return None


def _why_erase_gather(s: Scenario) -> str | None:
    if s.dp == 1:
        return "dp = 1: the rank already holds every unit whole"
    if s.unit_params == 0:
        return "unit_params = 0: no unit to gather"
    if s.unit_params == ceil_div(s.unit_params, s.dp):
        return f"unit_params = {s.unit_params}: the rank's own shard is the whole unit"
    return None


@dataclass(frozen=True, slots=True)
class Mutant:
    id: str
    rule: str
    rules: Rules
    equivalent_because: Callable[[Scenario], str | None]

    def evaluate(self, s: Scenario) -> Ledger:
        """The mutant's ledger of any scenario."""
        return compute_ledger(s, self.rules)


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "replicate-optimizer-stage1",
        "stage 1 keeps master weights and optimizer states replicated",
        Rules(overrides={("master_weights", 1): False, ("optimizer_states", 1): False}),
        _why_replicate_optimizer,
    ),
    Mutant(
        "shard-params-stage2",
        "stage 2 also divides parameters by D",
        Rules(sharded_from={**SHARDED_FROM, "parameters": 2}),
        _why_shard_params,
    ),
    Mutant("omit-master-copy", "the FP32 master copy is dropped", Rules(master_copy=False), _why_omit_master),
    Mutant(
        "divide-activations-by-dp",
        "activations are divided by D",
        Rules(activations_divided_by_dp=True),
        _why_divide_activations,
    ),
    Mutant(
        "erase-gather-peak",
        "the stage-3 all-gather term is set to 0",
        Rules(gather_peak=False),
        _why_erase_gather,
    ),
)


@dataclass(frozen=True, slots=True)
class MutationResult:
    id: str
    rule: str
    killed: bool
    check: str  # the first named check that failed; "" for a survivor
    message: str  # the failing check's message, or why the mutant survived
    failed_checks: tuple[str, ...]


def try_mutant(mutant: Mutant, s: Scenario, checks: tuple[str, ...], *, first_failure: bool = False) -> MutationResult:
    """Run ``checks`` on the mutant's ledger for ``s``: the first failing check kills it.

    ``failed_checks`` lists every check that fails, or with ``first_failure`` only the one that
    killed it (the checks stop there).
    """
    results = run_checks(mutant.evaluate(s), mutant.evaluate, checks, stop_at_failure=first_failure)
    failed = [r for r in results if not r.passed]
    if failed:
        names = tuple(r.check for r in failed)
        return MutationResult(mutant.id, mutant.rule, True, names[0], failed[0].message, names)
    reason = mutant.equivalent_because(s) or "no check tells it apart on this scenario"
    return MutationResult(mutant.id, mutant.rule, False, "", f"survived: {reason}", ())


def kill_list(s: Scenario) -> tuple[MutationResult, ...]:
    """The kill list on the user's scenario: checks 1–4 run there, each mutant named with the check
    that killed it; equivalent mutants survive."""
    return tuple(try_mutant(m, s, SCENARIO_CHECKS, first_failure=True) for m in MUTANTS)


@cache  # a constant: the frozen scenario never changes, so neither does its kill list
def reference_kill_list() -> tuple[MutationResult, ...]:
    """The kill list on the frozen scenario, checks 1–5: all five are always killed."""
    return tuple(try_mutant(m, FROZEN_SCENARIO, ALL_CHECKS) for m in MUTANTS)
