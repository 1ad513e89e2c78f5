"""The training peak: persistent state plus one declared transient, and the fit verdict."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.rules import Rules
from app.ledger.scenario import Scenario


@dataclass(frozen=True, slots=True)
class Peak:
    """peak = subtotal + contingency, subtotal = persistent + gather + buckets + activations + overhead."""

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
    gather_formula: str
    activations_formula: str
    contingency_formula: str


def remote_unit_elements(s: Scenario) -> int:
    """Elements of the largest unit this rank does not own: U − ⌈U ÷ D⌉."""
    return s.unit_params - ceil_div(s.unit_params, s.dp)


def gather_bytes(s: Scenario, stage: int, rules: Rules) -> tuple[int, str]:
    """(1 + P) × (U − ⌈U ÷ D⌉) × gather_bytes at stage 3, else 0 (the seed's lower bound)."""
    if stage != 3:
        return 0, "stages 0–2 hold full parameters: nothing to gather"
    if not rules.gather_peak:
        return 0, "all-gather not counted"
    remote = remote_unit_elements(s)
    size = (1 + s.prefetch) * remote * s.gather_bytes
    formula = (
        f"(1 + {s.prefetch}) × ({n(s.unit_params)} − ⌈{n(s.unit_params)} ÷ {n(s.dp)}⌉) × "
        f"{s.gather_bytes} B = {1 + s.prefetch} × {n(remote)} × {s.gather_bytes} B = {n(size)} B"
    )
    return size, formula


def activation_bytes(s: Scenario, rules: Rules) -> tuple[int, str]:
    """Activations are never divided by D: ZeRO partitions model state, not activations."""
    if rules.activations_divided_by_dp:
        size = s.activation_bytes // s.dp
        return size, f"{n(s.activation_bytes)} B ÷ {n(s.dp)} = {n(size)} B"
    return s.activation_bytes, f"{n(s.activation_bytes)} B as declared, not divided by D"


def training_peak(s: Scenario, stage: int, persistent: int, rules: Rules) -> Peak:
    gather, gather_formula = gather_bytes(s, stage, rules)
    activations, activations_formula = activation_bytes(s, rules)
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
        gather_formula=gather_formula,
        activations_formula=activations_formula,
        contingency_formula=f"⌈{n(subtotal)} × {s.contingency_pct} ÷ 100⌉ = {n(contingency)} B",
    )
