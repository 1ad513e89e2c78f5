"""The named checks: production passes them, and each one fails on a deliberately wrong ledger."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from app.ledger.estimate import estimate
from app.ledger.ledger import Ledger, StageLedger, compute_ledger
from app.ledger.scenario import DEFAULT_SCENARIO, Scenario
from app.ledger.state.rules import Rules
from app.ledger.verify.checks import (
    activation_invariance,
    frozen_scenario,
    gather_presence,
    monotonic_lower_bounds,
    oracle_agreement,
    run_checks,
)
from app.ledger.verify.frozen import FROZEN_SCENARIO
from app.ledger.verify.oracle import stage_table
from app.ledger.verify.results import ALL_CHECKS, SCENARIO_CHECKS, TITLES, CheckResult


def with_stage(ledger: Ledger, stage: int, **changes: object) -> Ledger:
    """A copy of ``ledger`` with some fields of one stage replaced."""
    stages = list(ledger.stages)
    stages[stage] = dataclasses.replace(stages[stage], **changes)  # type: ignore[arg-type]
    return dataclasses.replace(ledger, stages=tuple(stages))


def with_line_bytes(ledger: Ledger, stage: int, tensor_class: str, size: int) -> Ledger:
    st: StageLedger = ledger.stages[stage]
    lines = tuple(dataclasses.replace(ln, bytes=size) if ln.tensor_class == tensor_class else ln for ln in st.lines)
    return with_stage(ledger, stage, lines=lines, persistent=sum(ln.bytes for ln in lines))


def with_peak(ledger: Ledger, stage: int, **changes: Any) -> Ledger:
    return with_stage(ledger, stage, peak=dataclasses.replace(ledger.stages[stage].peak, **changes))


DEGENERATE: list[Scenario] = [
    DEFAULT_SCENARIO,
    DEFAULT_SCENARIO.with_(dp=1),
    DEFAULT_SCENARIO.with_(activation_bytes=0),
    DEFAULT_SCENARIO.with_(master_bytes=0),
    DEFAULT_SCENARIO.with_(unit_params=0),
    DEFAULT_SCENARIO.with_(params=1, unit_params=1),
    DEFAULT_SCENARIO.with_(params=7, unit_params=7, dp=131_072),
    DEFAULT_SCENARIO.with_(opt_states=0, master_bytes=0, prefetch=8, contingency_pct=100),
]


def test_check_names_and_order() -> None:
    assert SCENARIO_CHECKS == ("oracle-agreement", "monotonic-lower-bounds", "activation-invariance", "gather-presence",
                               "reduce-scatter-presence", "gradient-filling", "host-agreement")  # fmt: skip
    assert list(ALL_CHECKS) == [*SCENARIO_CHECKS[:4], "frozen-scenario", *SCENARIO_CHECKS[4:6], "frozen-model-scenario",
                                "host-agreement"]  # fmt: skip
    assert set(TITLES) == set(ALL_CHECKS)
    for number, check in enumerate(ALL_CHECKS, start=1):
        assert TITLES[check].startswith(f"{number}. ")


def test_frozen_scenario_is_the_seed() -> None:
    assert FROZEN_SCENARIO == DEFAULT_SCENARIO
    assert (FROZEN_SCENARIO.params, FROZEN_SCENARIO.dp, FROZEN_SCENARIO.activation_bytes) == (
        7_000_000_000,
        8,
        20_000_000_000,
    )


@pytest.mark.parametrize("s", DEGENERATE)
def test_production_passes_all_five_checks(s: Scenario) -> None:
    results = run_checks(compute_ledger(s), compute_ledger, ALL_CHECKS)
    assert [r.check for r in results] == list(ALL_CHECKS)
    assert all(r.passed for r in results), [r.message for r in results if not r.passed]
    assert all(r.message for r in results)


def test_estimate_runs_all_five_checks(seed: Scenario) -> None:
    checks = estimate(seed).checks
    assert [c.check for c in checks] == list(ALL_CHECKS)
    assert all(c.passed for c in checks)
    assert checks[0].title == TITLES["oracle-agreement"]


def test_oracle_table_worked_example() -> None:
    """The oracle alone reproduces the worked example: 112 / 38.5 / 26.25 / 14 GB."""
    table = stage_table(7_000_000_000, 8, 2, 2, 4, 2, 4)
    assert [sum(table[s].values()) for s in range(4)] == [
        112_000_000_000,
        38_500_000_000,
        26_250_000_000,
        14_000_000_000,
    ]


# --------------------------------------------------------------------------- each check fails


def test_oracle_agreement_fails_on_an_unsharded_gradient(seed: Scenario) -> None:
    """Stage 2 gradients left whole: 7e9 × 2 = 14e9 B instead of ⌈7e9 ÷ 8⌉ × 2 = 1.75e9 B."""
    wrong = with_line_bytes(compute_ledger(seed), 2, "gradients", 14_000_000_000)
    result = oracle_agreement(wrong)
    assert result.passed is False
    assert result.check == "oracle-agreement"
    assert "stage 2" in result.message
    assert "gradients" in result.message
    assert "14,000,000,000" in result.message
    assert "1,750,000,000" in result.message


def test_oracle_agreement_catches_an_off_by_one(seed: Scenario) -> None:
    """One byte off in one cell out of 16 is enough."""
    wrong = with_line_bytes(compute_ledger(seed), 3, "optimizer_states", 7_000_000_001)
    result = oracle_agreement(wrong)
    assert result.passed is False
    assert "stage 3 optimizer_states" in result.message
    assert "7,000,000,001" in result.message


def test_monotonic_lower_bounds_fails_when_a_later_stage_grows(seed: Scenario) -> None:
    wrong = with_stage(compute_ledger(seed), 3, persistent=30_000_000_000)
    result = monotonic_lower_bounds(wrong)
    assert result.passed is False
    assert result.check == "monotonic-lower-bounds"
    assert "stage 3" in result.message
    assert "30,000,000,000" in result.message
    assert "26,250,000,000" in result.message


def test_monotonic_lower_bounds_allows_equality(seed: Scenario) -> None:
    """dp = 1: every stage equals stage 0, which is still monotonic (≤)."""
    assert monotonic_lower_bounds(compute_ledger(seed.with_(dp=1))).passed


def test_activation_invariance_fails_when_activations_depend_on_dp(seed: Scenario) -> None:
    """A ledger whose stage 1 activations are 20e9 ÷ 8 = 2.5e9 while the dp = 1 evaluation keeps 20e9."""
    wrong = with_peak(compute_ledger(seed), 1, activations=2_500_000_000)
    result = activation_invariance(wrong)
    assert result.passed is False
    assert result.check == "activation-invariance"
    assert "stage 1" in result.message
    assert "activations" in result.message
    assert "2,500,000,000" in result.message
    assert "20,000,000,000" in result.message


def test_activation_invariance_evaluates_the_ledgers_own_rules_at_dp1(seed: Scenario) -> None:
    """Under rules that divide activations by D, 20e9 at dp = 8 is 2.5e9, and at dp = 1 it is 20e9."""
    divided = compute_ledger(seed, Rules(activations_divided_by_dp=True))
    assert divided.stages[0].peak.activations == 2_500_000_000
    result = activation_invariance(divided)
    assert result.passed is False
    assert "2,500,000,000 B at dp = 8 but 20,000,000,000 B at dp = 1" in result.message
    assert activation_invariance(compute_ledger(seed)).passed


def test_gather_presence_fails_without_the_gather(seed: Scenario) -> None:
    """Stage 3 peak with the 700,000,000 B gather removed: subtotal 34.7e9 − 0.7e9 = 34e9."""
    wrong = with_peak(compute_ledger(seed), 3, gather=0, subtotal=34_000_000_000, total=34_000_000_000)
    result = gather_presence(wrong)
    assert result.passed is False
    assert result.check == "gather-presence"
    assert "stage 3" in result.message
    assert "parameters" in result.message
    assert "0 B" in result.message
    assert "700,000,000" in result.message


def test_gather_presence_fails_on_a_partial_gather(seed: Scenario) -> None:
    """One byte short of the 350,000,000 × 2 remote bytes."""
    wrong = with_peak(compute_ledger(seed), 3, subtotal=34_699_999_999)
    result = gather_presence(wrong)
    assert result.passed is False
    assert "699,999,999" in result.message


@pytest.mark.parametrize("s", [DEFAULT_SCENARIO.with_(dp=1), DEFAULT_SCENARIO.with_(unit_params=0)])
def test_gather_presence_not_applicable(s: Scenario) -> None:
    result = gather_presence(with_peak(compute_ledger(s), 3, gather=0))
    assert result.passed
    assert "not applicable" in result.message


def test_frozen_scenario_fails_on_a_wrong_persistent_cell(seed: Scenario) -> None:
    wrong = with_line_bytes(compute_ledger(seed), 1, "master_weights", 28_000_000_000)
    result = frozen_scenario(lambda s: wrong)
    assert result.passed is False
    assert result.check == "frozen-scenario"
    assert "stage 1 master_weights" in result.message
    assert "28,000,000,000" in result.message
    assert "3,500,000,000" in result.message


def test_frozen_scenario_fails_on_a_wrong_peak(seed: Scenario) -> None:
    """Stage 3 peak total 34.7e9 + 1."""
    wrong = with_peak(compute_ledger(seed), 3, total=34_700_000_001)
    result = frozen_scenario(lambda s: wrong)
    assert result.passed is False
    assert "stage 3 peak total" in result.message
    assert "34,700,000,001" in result.message
    assert "34,700,000,000" in result.message


def test_frozen_scenario_evaluates_the_frozen_scenario() -> None:
    seen: list[Scenario] = []

    def evaluate(s: Scenario) -> Ledger:
        seen.append(s)
        return compute_ledger(s)

    assert frozen_scenario(evaluate).passed
    # the seed, then with both offloads to the CPU (its host RAM is hand-computed too), then in shard groups of 4
    assert seen == [
        FROZEN_SCENARIO,
        FROZEN_SCENARIO.with_(offload_optimizer="cpu", offload_param="cpu"),
        FROZEN_SCENARIO.with_(shard_group=4),
    ]


def test_frozen_scenario_fails_if_the_evaluator_changes_the_scenario() -> None:
    """A ledger computed for N = 6e9 instead of 7e9 cannot pass: 6e9 × 2 = 12e9 ≠ 14e9."""
    result = frozen_scenario(lambda s: compute_ledger(s.with_(params=6_000_000_000)))
    assert result.passed is False
    assert "stage 0 parameters" in result.message
    assert "12,000,000,000" in result.message


def test_run_checks_reports_every_failure(seed: Scenario) -> None:
    wrong = with_line_bytes(compute_ledger(seed), 3, "parameters", 200_000_000_000)
    results = run_checks(wrong, compute_ledger, ALL_CHECKS)
    failed = {r.check for r in results if not r.passed}
    assert failed == {"oracle-agreement", "monotonic-lower-bounds"}
    assert all(isinstance(r, CheckResult) for r in results)
