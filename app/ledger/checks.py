"""The five named checks that run on every scenario (spec "The independent oracle").

Each check receives a ledger computed under some rules (the production rules, or a mutant's)
and returns a named pass/fail whose message names the stage, the class and both numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.ledger.arithmetic import n
from app.ledger.ledger import Ledger
from app.ledger.oracle import stage_table
from app.ledger.peak import activation_bytes
from app.ledger.rules import CLASSES
from app.ledger.scenario import DEFAULT_SCENARIO, Scenario

Evaluate = Callable[[Scenario], Ledger]

TITLES: dict[str, str] = {
    "oracle-agreement": "1. oracle agreement, per stage and class, exact",
    "monotonic-lower-bounds": "2. persistent(3) ≤ persistent(2) ≤ persistent(1) ≤ persistent(0)",
    "activation-invariance": "3. activation bytes in the peak do not change with D",
    "gather-presence": "4. stage 3 with D > 1 and U > 0 holds the remote shards of one unit",
    "frozen-scenario": "5. the frozen scenario reproduces its hand-computed values",
}
SCENARIO_CHECKS: tuple[str, ...] = (
    "oracle-agreement",
    "monotonic-lower-bounds",
    "activation-invariance",
    "gather-presence",
)
ALL_CHECKS: tuple[str, ...] = (*SCENARIO_CHECKS, "frozen-scenario")

FROZEN_SCENARIO = DEFAULT_SCENARIO

# Hand-computed from the seed (7B params, D = 8, BF16 params and grads, FP32 master, two FP32
# Adam moments, U = 400M, P = 0, 20 GB declared activations): the spec's worked example.
FROZEN_PERSISTENT: dict[int, dict[str, int]] = {
    0: {
        "parameters": 14_000_000_000,
        "gradients": 14_000_000_000,
        "master_weights": 28_000_000_000,
        "optimizer_states": 56_000_000_000,
    },
    1: {
        "parameters": 14_000_000_000,
        "gradients": 14_000_000_000,
        "master_weights": 3_500_000_000,
        "optimizer_states": 7_000_000_000,
    },
    2: {
        "parameters": 14_000_000_000,
        "gradients": 1_750_000_000,
        "master_weights": 3_500_000_000,
        "optimizer_states": 7_000_000_000,
    },
    3: {
        "parameters": 1_750_000_000,
        "gradients": 1_750_000_000,
        "master_weights": 3_500_000_000,
        "optimizer_states": 7_000_000_000,
    },
}
FROZEN_PEAK: dict[int, dict[str, int]] = {
    0: {"gather": 0, "activations": 20_000_000_000, "total": 132_000_000_000},
    1: {"gather": 0, "activations": 20_000_000_000, "total": 58_500_000_000},
    2: {"gather": 0, "activations": 20_000_000_000, "total": 46_250_000_000},
    3: {"gather": 700_000_000, "activations": 20_000_000_000, "total": 34_700_000_000},
}


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    passed: bool
    message: str

    @property
    def title(self) -> str:
        return TITLES[self.check]


def _ok(check: str, message: str) -> CheckResult:
    return CheckResult(check, True, message)


def _fail(check: str, message: str) -> CheckResult:
    return CheckResult(check, False, message)


def oracle_agreement(ledger: Ledger) -> CheckResult:
    s = ledger.scenario
    table = stage_table(s.params, s.dp, s.param_bytes, s.grad_bytes, s.master_bytes, s.opt_states, s.opt_bytes)
    for stage in ledger.stages:
        row = table[stage.stage]
        for line in stage.lines:
            expected = row[line.tensor_class]
            if line.bytes != expected:
                return _fail(
                    "oracle-agreement",
                    f"stage {stage.stage} {line.tensor_class}: ledger {n(line.bytes)} B ≠ oracle {n(expected)} B",
                )
    return _ok("oracle-agreement", "all 16 (stage, class) cells equal the oracle's")


def monotonic_lower_bounds(ledger: Ledger) -> CheckResult:
    totals = [stage.persistent for stage in ledger.stages]
    for stage in (1, 2, 3):
        if totals[stage] > totals[stage - 1]:
            return _fail(
                "monotonic-lower-bounds",
                f"stage {stage} total: persistent {n(totals[stage])} B > stage {stage - 1}'s {n(totals[stage - 1])} B",
            )
    return _ok("monotonic-lower-bounds", " ≥ ".join(f"{n(t)} B" for t in totals))


def activation_invariance(ledger: Ledger) -> CheckResult:
    """Each stage's activation term equals the one the same rules give the scenario at dp = 1."""
    s = ledger.scenario
    at_one = activation_bytes(s, ledger.rules, dp=1)
    for stage in ledger.stages:
        if stage.peak.activations != at_one:
            return _fail(
                "activation-invariance",
                f"stage {stage.stage} activations: {n(stage.peak.activations)} B at dp = {n(s.dp)} but "
                f"{n(at_one)} B at dp = 1",
            )
    return _ok("activation-invariance", f"{n(s.activation_bytes)} B at dp = {n(s.dp)} and at dp = 1")


def gather_presence(ledger: Ledger) -> CheckResult:
    s = ledger.scenario
    if s.dp == 1 or s.unit_params == 0:
        return _ok("gather-presence", "not applicable: dp = 1 or unit_params = 0")
    peak = ledger.stages[3].peak
    remote = (s.unit_params - (s.unit_params + s.dp - 1) // s.dp) * s.gather_bytes
    gathered = peak.subtotal - peak.persistent - peak.buckets - peak.activations - peak.overhead
    if gathered < remote:
        return _fail(
            "gather-presence",
            f"stage 3 parameters: the peak holds {n(gathered)} B of gathered parameters, fewer than the "
            f"{n(remote)} B of remote shards of one {n(s.unit_params)}-parameter unit",
        )
    return _ok("gather-presence", f"stage 3 peak holds {n(gathered)} B ≥ {n(remote)} B of remote shards")


def frozen_scenario(evaluate: Evaluate) -> CheckResult:
    ledger = evaluate(FROZEN_SCENARIO)
    for stage in ledger.stages:
        for tensor_class in CLASSES:
            got, want = stage.bytes_of(tensor_class), FROZEN_PERSISTENT[stage.stage][tensor_class]
            if got != want:
                return _fail(
                    "frozen-scenario",
                    f"stage {stage.stage} {tensor_class}: got {n(got)} B, hand-computed {n(want)} B",
                )
        for part, want in FROZEN_PEAK[stage.stage].items():
            got = getattr(stage.peak, part)
            if got != want:
                return _fail(
                    "frozen-scenario",
                    f"stage {stage.stage} peak {part}: got {n(got)} B, hand-computed {n(want)} B",
                )
    return _ok("frozen-scenario", "the seed's example reproduces 112 / 38.5 / 26.25 / 14 GB and a 0.7 GB gather")


# The checks that read only the ledger (check 5 computes a ledger of its own).
_LEDGER_CHECKS: dict[str, Callable[[Ledger], CheckResult]] = {
    "oracle-agreement": oracle_agreement,
    "monotonic-lower-bounds": monotonic_lower_bounds,
    "activation-invariance": activation_invariance,
    "gather-presence": gather_presence,
}


def run_checks(
    ledger: Ledger, evaluate: Evaluate, checks: tuple[str, ...], *, stop_at_failure: bool = False
) -> tuple[CheckResult, ...]:
    """Run the named checks in order on ``ledger``; ``evaluate`` computes the frozen scenario's
    ledger under the same rules (check 5). With ``stop_at_failure`` the first failure ends the run."""
    results = []
    for check in checks:
        result = frozen_scenario(evaluate) if check == "frozen-scenario" else _LEDGER_CHECKS[check](ledger)
        results.append(result)
        if stop_at_failure and not result.passed:
            break
    return tuple(results)
