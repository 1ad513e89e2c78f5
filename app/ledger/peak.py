"""The training peak: persistent state plus one declared transient, and the fit verdict."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.rules import Rules
from app.ledger.scenario import Scenario


@dataclass(frozen=True, slots=True)
class Peak:
    """peak = subtotal + contingency, subtotal = persistent + gather + buckets + activations + overhead.

    Integers only; the formulas are spelled out on demand from ``scenario``.
    """

    stage: int
    persistent: int
    gather: int
    buckets: int
    activations: int
    overhead: int
    subtotal: int
    contingency: int
    total: int
    capacity: int
    fits: bool
    headroom: int
    scenario: Scenario
    gather_counted: bool  # False only at stage 3 under rules that drop the gather (stages 0–2 gather nothing)
    activations_divided: bool

    @property
    def gather_formula(self) -> str:
        s = self.scenario
        if self.stage != 3:
            return "stages 0–2 hold full parameters: nothing to gather"
        if not self.gather_counted:
            return "all-gather not counted"
        remote = remote_unit_elements(s)
        return (
            f"(1 + {s.prefetch}) × ({n(s.unit_params)} − ⌈{n(s.unit_params)} ÷ {n(s.dp)}⌉) × "
            f"{s.gather_bytes} B = {1 + s.prefetch} × {n(remote)} × {s.gather_bytes} B = {n(self.gather)} B"
        )

    @property
    def activations_formula(self) -> str:
        s = self.scenario
        if self.activations_divided:
            return f"{n(s.activation_bytes)} B ÷ {n(s.dp)} = {n(self.activations)} B"
        return f"{n(s.activation_bytes)} B, not divided by D"

    @property
    def contingency_formula(self) -> str:
        return f"⌈{n(self.subtotal)} × {self.scenario.contingency_pct} ÷ 100⌉ = {n(self.contingency)} B"


def remote_unit_elements(s: Scenario) -> int:
    """Elements of the largest unit this rank does not own: U − ⌈U ÷ D⌉."""
    return s.unit_params - ceil_div(s.unit_params, s.dp)


def gather_bytes(s: Scenario, stage: int, rules: Rules) -> int:
    """(1 + P) × (U − ⌈U ÷ D⌉) × gather_bytes at stage 3, else 0 (the seed's lower bound)."""
    if stage != 3 or not rules.gather_peak:
        return 0
    return (1 + s.prefetch) * remote_unit_elements(s) * s.gather_bytes


def activation_bytes(s: Scenario, rules: Rules, dp: int | None = None) -> int:
    """Activations are never divided by D: ZeRO partitions model state, not activations.

    ``dp`` evaluates the same rule at another sharding degree (check 3 asks for dp = 1).
    """
    if rules.activations_divided_by_dp:
        return s.activation_bytes // (s.dp if dp is None else dp)
    return s.activation_bytes


def training_peak(s: Scenario, stage: int, persistent: int, rules: Rules) -> Peak:
    gather = gather_bytes(s, stage, rules)
    activations = activation_bytes(s, rules)
    subtotal = persistent + gather + s.bucket_bytes + activations + s.overhead_bytes
    contingency = ceil_div(subtotal * s.contingency_pct, 100)
    total = subtotal + contingency
    return Peak(
        stage=stage,
        persistent=persistent,
        gather=gather,
        buckets=s.bucket_bytes,
        activations=activations,
        overhead=s.overhead_bytes,
        subtotal=subtotal,
        contingency=contingency,
        total=total,
        capacity=s.capacity_bytes,
        fits=total <= s.capacity_bytes,
        headroom=s.capacity_bytes - total,
        scenario=s,
        # Only stage 3 gathers, so only there can the rule leave the gather uncounted.
        gather_counted=rules.gather_peak or stage != 3,
        activations_divided=rules.activations_divided_by_dp,
    )
