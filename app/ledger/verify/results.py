"""What a check answers: its number and title, pass or fail, and a message naming the stage, the class
(or the instant) and both numbers; which checks run on a scenario and which on a frozen reference."""

from __future__ import annotations

from dataclasses import dataclass

TITLES: dict[str, str] = {
    "oracle-agreement": "1. oracle agreement, per stage and class, exact",
    "monotonic-lower-bounds": "2. persistent(3) ≤ persistent(2) ≤ persistent(1) ≤ persistent(0)",
    "activation-invariance": "3. activation bytes in the peak do not change with D (with a model: at every instant)",
    "gather-presence": "4. stage 3 with D > 1 and U > 0 holds the remote shards of one unit",
    "frozen-scenario": "5. the frozen scenario reproduces its hand-computed values",
    "reduce-scatter-presence": "6. with a model, stages 2–3: the root's post-backward holds its reduce-scatter input",
    "gradient-filling": "7. with a model: no gradient before backward (set_to_none), every one at the optimizer step",
    "frozen-model-scenario": "8. the frozen model reference reproduces its hand-computed instants",
    "host-agreement": "9. the host ledger equals the host oracle, as given and with both offloads to the CPU",
}
SCENARIO_CHECKS: tuple[str, ...] = (
    "oracle-agreement",
    "monotonic-lower-bounds",
    "activation-invariance",
    "gather-presence",
    "reduce-scatter-presence",
    "gradient-filling",
    "host-agreement",
)
FROZEN_CHECKS: tuple[str, ...] = ("frozen-scenario", "frozen-model-scenario")
LINE_CHECKS: tuple[str, ...] = ("oracle-agreement", "monotonic-lower-bounds")  # they read the persistent lines only
ALL_CHECKS: tuple[str, ...] = tuple(TITLES)  # in their numbered order


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    passed: bool
    message: str

    @property
    def title(self) -> str:
        return TITLES[self.check]


def ok(check: str, message: str) -> CheckResult:
    return CheckResult(check, True, message)


def fail(check: str, message: str) -> CheckResult:
    return CheckResult(check, False, message)
