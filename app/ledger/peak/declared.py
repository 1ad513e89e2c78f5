"""The training peak and the fit verdict: the seed's declared peak, or with a model the schedule-aware one.

The **declared peak** is the seed's sum: persistent state plus one declared transient of each kind
(the all-gather of the largest unit, buckets, activations, overhead), then the contingency. With a
model the lab knows the layer structure, and the peak is the **schedule-aware** one
(:mod:`app.ledger.peak.schedule`): the worst of the named instants of one step, its parts the
categories resident at that instant, the declared peak kept beside it (``declared``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.ledger.arithmetic import ceil_div, n
from app.ledger.formula import Formula
from app.ledger.peak.schedule.instants import PARTS, Instant, Schedule
from app.ledger.peak.schedule.layout import not_schedulable
from app.ledger.peak.schedule.walk import schedule
from app.ledger.scenario import Scenario
from app.ledger.state.persistent import LedgerLine, shard
from app.ledger.state.rules import Rules


@dataclass(frozen=True, slots=True)
class Peak:
    """peak = subtotal + contingency, subtotal = persistent + gather + buckets + activations + overhead.

    For the declared peak the parts are the seed's terms (``persistent`` the stage's persistent
    total). For a schedule-aware peak (``schedule`` set) they are the categories resident at the
    worst instant, summed into the same five parts (:data:`app.ledger.peak.schedule.instants.CATEGORIES`):
    ``persistent`` the model state held then (gradients only as far as they exist), ``gather`` the
    unsharded parameters and all-gather outputs, ``buckets`` the reduce-scatter input, unsharded
    gradients and declared buckets, ``activations`` the saved activations and the op's temporaries.

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
    fits: bool
    headroom: int
    scenario: Scenario
    gather_counted: bool  # False only at stage 3 under rules that drop the gather (stages 0–2 gather nothing)
    activations_divided: bool
    schedule: Schedule | None = None  # the schedule-aware peak's instants; None: this is the declared peak
    declared: Peak | None = None  # beside a schedule-aware peak: the seed's declared peak
    why_declared: str = ""  # for a declared peak: why there is no schedule (no model, typed params, tp)

    @property
    def reserved(self) -> int:
        """The reserved estimate: the allocated peak + the allocator reserve (measured or declared; 0 by default).
        ``fits`` and ``headroom`` compare it with the capacity."""
        return self.total + self.scenario.reserve_bytes

    @property
    def kind(self) -> str:
        """``schedule`` (the worst instant of a step) or ``declared`` (the seed's sum)."""
        return "declared" if self.schedule is None else "schedule"

    @property
    def instant(self) -> Instant | None:
        return None if self.schedule is None else self.schedule.peak

    @property
    def declared_peak(self) -> Peak:
        """The seed's declared peak: this one, or the one beside the schedule-aware peak."""
        return self if self.declared is None else self.declared

    def _instant_formula(self, part: str, empty: str) -> Formula:
        instant = self.instant
        assert instant is not None
        entries = [e for e in instant.entries if e.part == part]
        if not entries:
            return Formula.words(f"{empty} at the {instant.name}")
        total = sum(e.bytes for e in entries)
        shown = " + ".join(f"{e.what}: {e.formula}" for e in entries)
        return Formula.of(f"at the {instant.name}: {shown}" + (f"; total {n(total)} B" if len(entries) > 1 else ""))

    @property
    def gather_formula(self) -> Formula:
        s = self.scenario
        if self.stage != 3:
            return Formula.words("stages 0–2 hold full parameters: nothing to gather")
        if self.schedule is not None:
            return self._instant_formula("gather", "nothing unsharded")
        if not self.gather_counted:
            return Formula.words("all-gather not counted")
        remote = remote_unit_elements(s)
        if self.gather != (1 + s.prefetch) * remote * s.gather_bytes:  # every unit kept between micro batches
            kept = [f"({n(p)} − ⌈{n(p)} ÷ {n(o)}⌉)" for p, o in s.shards()]
            return Formula.of(f"every unit kept gathered between micro batches (reshard_after_backward 0): "
                              f"{' + '.join(kept)} × {s.gather_bytes} B = {n(self.gather)} B")  # fmt: skip
        shards = [f"⌈{n(p)} ÷ {n(o)}⌉" for p, o in s.unit_shards()]
        # Subtracted as one: an expert-split unit owns a dense shard and an expert shard.
        own = shards[0] if len(shards) == 1 else f"({' + '.join(shards)})"
        return Formula.of(
            f"(1 + {s.prefetch}) × ({n(s.unit_params)} − {own}) × "
            f"{s.gather_bytes} B = {1 + s.prefetch} × {n(remote)} × {s.gather_bytes} B = {n(self.gather)} B"
        )

    @property
    def activations_formula(self) -> Formula:
        s = self.scenario
        if self.schedule is not None:
            return self._instant_formula("activations", "no activations")
        if self.activations_divided:
            return Formula.of(f"{n(s.activation_bytes)} B ÷ {n(s.dp)} = {n(self.activations)} B")
        return Formula.words(f"{n(s.activation_bytes)} B, not divided by D")

    @property
    def contingency_formula(self) -> Formula:
        return Formula.of(f"⌈{n(self.subtotal)} × {self.scenario.contingency_pct} ÷ 100⌉ = {n(self.contingency)} B")


def contingency(subtotal: int, pct: int) -> int:
    """⌈subtotal × pct ÷ 100⌉: the margin on top of a peak's subtotal (``pct``: the scenario's contingency)."""
    return ceil_div(subtotal * pct, 100)


def max_subtotal(capacity: int, pct: int) -> int:
    """The largest subtotal whose peak (with its contingency rounded up) still fits ``capacity``: the
    inverse of :func:`contingency`, for the fit finder: g = ⌊100·c ÷ (100 + p)⌋ exactly.

    g fits: g·(100 + p) ≤ 100·c, so g·p ÷ 100 ≤ c − g, an integer, so ⌈g·p ÷ 100⌉ ≤ c − g. g + 1 does not:
    (g + 1)·(100 + p) > 100·c, so ⌈(g + 1)·p ÷ 100⌉ ≥ (g + 1)·p ÷ 100 > c − (g + 1)."""
    return capacity * 100 // (100 + pct)


def remote_unit_elements(s: Scenario, dp: int | None = None) -> int:
    """Elements of the largest unit this rank does not own: U − ⌈U ÷ D⌉ (D: the shard group; with expert
    parallelism the unit's experts over D ÷ ep). ``dp`` evaluates it at another D (the fit finder's)."""
    return sum(p - shard(p, o) for p, o in s.unit_shards(dp))


def gather_bytes(s: Scenario, stage: int, rules: Rules, dp: int | None = None) -> int:
    """(1 + P) × (U − ⌈U ÷ D⌉) × gather_bytes at stage 3, else 0 (the seed's lower bound); with every unit kept
    gathered between micro batches (reshard_after_backward 0) the whole model's remote shards, (N − ⌈N ÷ D⌉) ×
    gather_bytes, if more; ``dp``: at another D."""
    if stage != 3 or not rules.gather_peak:
        return 0
    unit = (1 + s.prefetch) * remote_unit_elements(s, dp)
    if s.keeps_units_gathered:
        unit = max(unit, sum(p - shard(p, o) for p, o in s.shards(dp)))
    return unit * s.gather_bytes


def accumulated_bytes(s: Scenario, stage: int) -> int:
    """Accumulating without sync at stages 2–3: every unit's unsharded gradient in the reduce width, T × r for the T
    parameters that train (FSDP2 keeps them from the first micro batch's backward to the last's reduce-scatter);
    else 0."""
    return s.trainable_params * s.reduce_bytes if s.accumulates_unsharded(stage) else 0


def declared_subtotal(s: Scenario, persistent: int, gather: int, activations: int, stage: int) -> int:
    """persistent + gather + buckets + activations + overhead: the seed's sum, before the contingency (buckets: the
    declared ones, and the accumulated unsharded gradients of :func:`accumulated_bytes`)."""
    buckets = s.bucket_bytes + accumulated_bytes(s, stage)
    return persistent + gather + buckets + activations + s.overhead_bytes


def activation_bytes(s: Scenario, rules: Rules, dp: int | None = None) -> int:
    """Activations are never divided by D: ZeRO partitions model state, not activations.

    ``dp`` evaluates the same rule at another sharding degree (check 3 asks for dp = 1).
    """
    if rules.activations_divided_by_dp:
        return s.activation_bytes // (s.dp if dp is None else dp)
    return s.activation_bytes


def training_peak(s: Scenario, stage: int, persistent: int, rules: Rules, lines: tuple[LedgerLine, ...] = ()) -> Peak:
    """The stage's peak: schedule-aware when ``s`` has a model whose layer structure describes it
    (and the stage's persistent ``lines`` are given), else the seed's declared peak."""
    declared = declared_peak(s, stage, persistent, rules)
    why = not_schedulable(s) if lines else "no ledger lines given"
    if why is not None:
        return replace(declared, why_declared=why)
    walk = schedule(s, stage, lines, rules)  # the numbers now, each instant's entries on demand
    worst = walk.peak
    parts = {part: worst.part(part) for part in PARTS}
    subtotal = worst.total
    margin = contingency(subtotal, s.contingency_pct)
    total = subtotal + margin
    return Peak(
        stage=stage,
        persistent=parts["persistent"],
        gather=parts["gather"],
        buckets=parts["buckets"],
        activations=parts["activations"],
        overhead=parts["overhead"],
        subtotal=subtotal,
        contingency=margin,
        total=total,
        fits=total <= s.allocatable_bytes,
        headroom=s.allocatable_bytes - total,
        scenario=s,
        gather_counted=declared.gather_counted,
        activations_divided=rules.activations_divided_by_dp,
        schedule=walk,
        declared=declared,
    )


def declared_peak(s: Scenario, stage: int, persistent: int, rules: Rules) -> Peak:
    """The seed's declared peak: persistent + gather + buckets + activations + overhead + contingency."""
    gather = gather_bytes(s, stage, rules)
    activations = activation_bytes(s, rules)
    subtotal = declared_subtotal(s, persistent, gather, activations, stage)
    margin = contingency(subtotal, s.contingency_pct)
    total = subtotal + margin
    return Peak(
        stage=stage,
        persistent=persistent,
        gather=gather,
        buckets=s.bucket_bytes + accumulated_bytes(s, stage),
        activations=activations,
        overhead=s.overhead_bytes,
        subtotal=subtotal,
        contingency=margin,
        total=total,
        fits=total <= s.allocatable_bytes,
        headroom=s.allocatable_bytes - total,
        scenario=s,
        # Only stage 3 gathers, so only there can the rule leave the gather uncounted.
        gather_counted=rules.gather_peak or stage != 3,
        activations_divided=rules.activations_divided_by_dp,
    )
