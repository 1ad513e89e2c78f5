"""The fit finder: per stage, the smallest sharding degree at which the peak fits the device, the
largest micro batch that fits at the current degree (when activations are modelled), and the
curve of per-rank peak against D for the chart.

Without a model the peak here is the declared peak (:mod:`app.ledger.peak.declared`: its gather
term, subtotal and contingency) with the persistent term, the ownership table's, split by how it
depends on D, so that the smallest D can be solved for rather than searched. With a model it is the
schedule-aware peak, each evaluation one walk of the schedule (:mod:`app.ledger.peak.schedule`,
cached): stages 0–2 never grow with D, so a bisection finds the smallest D in 17 evaluations;
stage 3's padded units can, so a bound without padding (which never grows) is bisected first
and the answer searched up from it. Property tests hold both equal to the full ledger at every
answer, one step before it and at every point of the curve.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from app.ledger.arithmetic import ceil_div
from app.ledger.models.fsdp2 import uneven_experts
from app.ledger.models.reference import resolve
from app.ledger.peak.declared import contingency, declared_subtotal, gather_bytes, max_subtotal
from app.ledger.peak.schedule.layout import layout, not_schedulable
from app.ledger.peak.schedule.walk import floor, largest_totals, over, totals
from app.ledger.peak.search import boundary, largest_micro_batch, smallest
from app.ledger.scenario import Scenario
from app.ledger.scenario.fields import FIELD_BY_NAME
from app.ledger.state.persistent import (
    LedgerLine,
    ledger_line,
    persistent_lines,
    shard_elements,
    width_and_copies,
)
from app.ledger.state.rules import CLASSES, PRODUCTION, STAGES

DP_MAX = FIELD_BY_NAME["dp"].maximum
CURVE_DPS: tuple[int, ...] = tuple(2**k for k in range(18))  # 1 … 131,072, a log2 axis


@dataclass(frozen=True, slots=True)
class StageFit:
    stage: int
    smallest_dp: int | None  # None: no D within bounds fits
    largest_micro_batch: int | None  # None: not modelled, or not even one sequence fits


@dataclass(frozen=True, slots=True)
class FitFinder:
    stages: tuple[StageFit, ...]
    curve: tuple[tuple[int, tuple[int, ...]], ...]  # (D, peak per stage)
    micro_batch_modelled: bool


class _PeakModel:
    """peak(stage, D, activations) for one scenario, every other input fixed: the declared peak
    (:func:`app.ledger.peak.declared.declared_peak`) with its persistent term split by how it depends on D."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        # Per stage: total width of the classes sharded at that stage, and of the replicated ones.
        self.widths: list[tuple[int, int]] = []
        for stage in STAGES:
            sharded = replicated = 0
            for c in CLASSES:
                width, copies, _ = width_and_copies(s, c, PRODUCTION, stage)
                if PRODUCTION.sharded(c, stage):
                    sharded += width * copies
                else:
                    replicated += width * copies
            self.widths.append((sharded, replicated))
        self.room = max_subtotal(s.allocatable_bytes, s.contingency_pct)
        # A shard group, hpZ, expert parallelism or frozen parameters: ⌈N ÷ D⌉ is no longer the only term in D, and
        # D must be a multiple of the groups (``step``); the smallest D is then bisected instead of solved for.
        # (cp > 1 too: the sharded term is ⌈N ÷ (D × cp)⌉, which the bisection reads from the ledger's own lines)
        self.plain = (len(s.shards()) == 1 and s.shard_group == s.dp and s.hpz == 1
                      and s.trainable_params == s.params and s.cp == 1)  # fmt: skip
        self.step = math.lcm(s.ep, s.hpz, 1 if s.shard_group == s.dp else s.shard_group)

    def persistent(self, stage: int, dp: int) -> int:
        """The stage's persistent lines at D = ``dp``."""
        if self.plain:  # ⌈N ÷ D⌉ × the sharded classes' widths, + N × the replicated ones'
            sharded, replicated = self.widths[stage]
            return shard_elements(self.s.shards(dp)) * sharded + self.s.params * replicated
        return sum(ledger_line(self.s, stage, c, PRODUCTION, dp).bytes for c in CLASSES)

    def subtotal(self, stage: int, dp: int, activations: int) -> int:
        """The declared peak before contingency."""
        gather = gather_bytes(self.s, stage, PRODUCTION, dp)
        return declared_subtotal(self.s, self.persistent(stage, dp), gather, activations, stage)

    def peak(self, stage: int, dp: int, activations: int) -> int:
        subtotal = self.subtotal(stage, dp, activations)
        return subtotal + contingency(subtotal, self.s.contingency_pct)

    def largest_micro_batch(self, stage: int, activations_at: Callable[[int], int]) -> int | None:
        """The largest micro batch whose modelled activations fit at the scenario's own D."""
        return largest_micro_batch(lambda b: [self.subtotal(stage, self.s.dp, activations_at(b))], self.room)

    def curve(self, activations: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """All four stages' peaks at each D of ``CURVE_DPS``."""
        return tuple((dp, tuple(self.peak(stage, dp, activations) for stage in STAGES)) for dp in CURVE_DPS)

    def smallest_dp_without_gather(self, stage: int, activations: int) -> int | None:
        """Stages 0–2 in closed form: ⌈N ÷ D⌉ × sharded ≤ room  ⟺  D ≥ ⌈N ÷ ⌊room ÷ sharded⌋⌉."""
        if not self.plain:
            return self._bisected(stage, activations)
        s = self.s
        sharded, replicated = self.widths[stage]
        room = self.room - declared_subtotal(s, s.params * replicated, 0, activations, stage)  # left for the sharded
        if room < 0:
            return None
        if sharded == 0:
            return 1
        most = room // sharded  # the largest ⌈N ÷ D⌉ that fits
        if most == 0:
            return None
        dp = max(1, ceil_div(s.params, most))
        return dp if dp <= DP_MAX else None

    def tightened_stage3(self, activations: int) -> tuple[int | None, bool]:
        """Stage 3's answer by tightening a lower bound: ``(D, True)`` when it settles (D is then
        the smallest D that fits, ``None`` when none does), ``(bound, False)`` after
        ``_TIGHTEN`` steps without settling.

        The persistent state shrinks with D while the gather grows. With ``low`` a lower bound on
        the answer, every D ≥ low gathers at least gather(low), so no D fits before the closed
        form's answer for that extra gather: a new lower bound, larger unless ``low`` fits. When
        the bound repeats, it fits. Most scenarios settle in one or two steps."""
        low = self.smallest_dp_without_gather(3, activations)
        for _ in range(_TIGHTEN):
            if low is None:
                return None, True
            tighter = self.smallest_dp_without_gather(3, activations + gather_bytes(self.s, 3, PRODUCTION, low))
            if tighter == low:
                return low, True
            low = tighter
        return low, low is None

    def smallest_dp_stage3(self, activations: int) -> int | None:
        """Stage 3: the smallest D that fits when the tightening settles (see
        ``tightened_stage3``); otherwise a bisection, as before it, between the D that fits
        without the gather and the D that fits even with the largest one, (1 + P) × U × g,
        which finds a D that fits where D − 1 does not."""
        answer, settled = self.tightened_stage3(activations)
        if settled:
            return answer
        s = self.s
        low = self.smallest_dp_without_gather(3, activations)
        assert low is not None  # the tightening started from it
        high = self.smallest_dp_without_gather(3, activations + (1 + s.prefetch) * s.gather_bytes * s.unit_params)
        cap = s.allocatable_bytes
        found = smallest(lambda d: self.peak(3, d, activations) <= cap, low, DP_MAX if high is None else high)
        if found is None or self.step == 1:
            return found
        dp = ceil_div(found, self.step) * self.step  # the groups must divide D
        return dp if dp <= DP_MAX and self.peak(3, dp, activations) <= cap else None

    def _bisected(self, stage: int, activations: int) -> int | None:
        """The smallest multiple of ``step`` at which the state without the gather fits: the persistent state
        never grows with D, so bisect over the multiples."""
        step = self.step

        def fits(k: int) -> bool:
            return declared_subtotal(self.s, self.persistent(stage, k * step), 0, activations, stage) <= self.room

        k = smallest(fits, 1, DP_MAX // step)
        return None if k is None else k * step


# Tightening steps before the stage-3 search falls back to bisection: of 80,000 random scenarios
# one needed more than 22 steps (90).
_TIGHTEN = 128


class _SchedulePeak:
    """peak(stage, D, b) for a scenario with a model: the schedule-aware peak, every other input fixed.

    ``activations_at`` (modelled activations) lets the micro batch vary: the scenario at micro
    batch b carries the model's activation total at b, so the schedule reads it as modelled."""

    def __init__(self, s: Scenario, activations_at: Callable[[int], int] | None) -> None:
        self.s = s
        self.activations_at = activations_at
        # The scenario at (D, b), made once: the curve and the searches ask for each of the four stages; and each
        # walk's totals, made once: the searches start from points of the curve. Both go with the finder.
        self._at: dict[tuple[int, int], Scenario] = {}
        self._totals: dict[tuple[int, int, int, bool], list[int]] = {}
        # The persistent lines do not read the micro batch: made once per (stage, D) for the micro-batch search.
        self._lines: dict[tuple[int, int], tuple[LedgerLine, ...]] = {}
        # The largest total before contingency that fits; and per stage the instant that last did not fit, tried
        # first at the next degree or micro batch searched (the same instant, mostly).
        self.room = max_subtotal(s.allocatable_bytes, s.contingency_pct)
        self._over: dict[int, int] = {}

    def scenario(self, dp: int, micro_batch: int | None = None) -> Scenario:
        s, at = self.s, self.activations_at
        b = s.micro_batch if micro_batch is None or at is None else micro_batch
        found = self._at.get((dp, b))
        if found is None:
            if at is None or b == s.micro_batch:
                found = s.with_(dp=dp)
            else:
                found = s.with_(dp=dp, micro_batch=b, activation_bytes=at(b))
            self._at[(dp, b)] = found
        return found

    def walked(self, stage: int, dp: int, micro_batch: int | None = None, *, padded: bool = True) -> list[int]:
        """Every instant's total (before contingency) of the stage at (D, b)."""
        s = self.scenario(dp, micro_batch)
        key = (stage, s.dp, s.micro_batch, padded)
        found = self._totals.get(key)
        if found is None:
            found = self._totals[key] = totals(s, stage, self._lines_at(stage, s), PRODUCTION, padded=padded)
        return found

    def _lines_at(self, stage: int, s: Scenario) -> tuple[LedgerLine, ...]:
        """The stage's persistent lines at ``s``'s D (they do not read the micro batch): made once per (stage, D)."""
        lines = self._lines.get((stage, s.dp))
        if lines is None:
            lines = self._lines[(stage, s.dp)] = persistent_lines(s, stage, PRODUCTION)
        return lines

    def peak(self, stage: int, dp: int, micro_batch: int | None = None, *, padded: bool = True) -> int:
        subtotal = max(self.walked(stage, dp, micro_batch, padded=padded))
        return subtotal + contingency(subtotal, self.s.contingency_pct)

    def fits(self, stage: int, dp: int, micro_batch: int | None = None) -> bool:
        """Whether the stage's peak at (D, b) fits: from its totals when walked, else walking until an instant
        does not fit (:func:`over`)."""
        s = self.scenario(dp, micro_batch)
        walked = self._totals.get((stage, s.dp, s.micro_batch, True))
        if walked is not None:
            return max(walked) <= self.room
        at = over(s, stage, self._lines_at(stage, s), PRODUCTION, self.room, self._over.get(stage, 0))
        if at is not None:
            self._over[stage] = at
        return at is None

    def floor_fits(self, stage: int, dp: int) -> bool:
        """Whether the state every instant holds fits (no walk): a necessary condition of :meth:`fits`. Under
        FSDP2's padding a MoE model's fused experts keep a whole expert a rank past D = E, which no D removes."""
        s = self.scenario(dp)
        least = floor(s, stage, self._lines_at(stage, s), PRODUCTION)
        return least + contingency(least, s.contingency_pct) <= s.allocatable_bytes

    def curve(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """Every stage's peak at each D of ``CURVE_DPS`` (the curve's property tests hold every point equal to the
        full ledger at that D). Stage 0 replicates everything, so nothing in its step depends on D: it is
        evaluated once. No instant of stages 1–2 grows with D, so each degree's walk sums only the instants that
        the degree before bounds above its largest (:func:`largest_totals`). Stage 3's padded units can grow with
        D, but not where no tensor is padded (FSDP2 then shards as the unpadded bound does, whose instants never
        grow with D once D > 1): that run of degrees, 2 … 256 for most models' power-of-two dimensions, is walked
        the same way, and each degree past it whole."""
        replicated = self.peak(0, CURVE_DPS[0])
        model = self.s.model
        unpadded = [dp for dp in CURVE_DPS[1:] if layout(model, dp) == layout(model, dp, False)]
        assert unpadded == list(CURVE_DPS[1 : 1 + len(unpadded)]), "divisible by 2D, a dimension is divisible by D"
        runs = {1: list(CURVE_DPS), 2: list(CURVE_DPS), 3: unpadded}
        peaks = {stage: dict(zip(dps, self._largest(stage, dps), strict=True)) for stage, dps in runs.items()}
        for dp in CURVE_DPS[1 + len(unpadded) :]:  # past the unpadded run: each degree walked whole
            peaks[3][dp] = self.peak(3, dp)
        peaks[3][CURVE_DPS[0]] = self.peak(3, CURVE_DPS[0])  # D = 1: no all-gather output, a step of its own
        return tuple((dp, (replicated, peaks[1][dp], peaks[2][dp], peaks[3][dp])) for dp in CURVE_DPS)

    def _largest(self, stage: int, dps: list[int]) -> list[int]:
        """The stage's peaks at ``dps``, along which no instant grows (:func:`largest_totals`)."""
        at = [self.scenario(dp) for dp in dps]
        pct = self.s.contingency_pct
        return [p + contingency(p, pct) for p in largest_totals([(t, self._lines_at(stage, t)) for t in at], stage,
                                                                 PRODUCTION)]  # fmt: skip

    def smallest_dp(self, stage: int, curve: tuple[tuple[int, tuple[int, ...]], ...]) -> int | None:
        """Stages 0–2: the peak never grows with D (only ⌈x ÷ D⌉ terms depend on it), so bisect, between
        the last point of ``curve`` (the peaks at powers of two) that does not fit and the first that does.
        Stage 3: D = 1 apart (no all-gather output there), the peak without FSDP2's dim-0 padding
        never grows with D and is at most the peak: bisect it for a lower bound (no larger than the first
        point of the curve that fits), then search up from there; past ``_SCAN`` steps, bisect the peak
        itself (a D that fits where D − 1 does not)."""
        cap = self.s.allocatable_bytes
        first_fit = next((dp for dp, peaks in curve if peaks[stage] <= cap), None)
        if stage < 3:
            # the curve's points bracket the answer: the last that does not fit and the first that does
            if first_fit is None or first_fit == 1:
                return first_fit  # none fits, not even DP_MAX (the curve's last point); or D = 1 does
            return boundary(lambda d: self.fits(stage, d), first_fit // 2, first_fit)
        first_fit = DP_MAX if first_fit is None else first_fit
        if curve[0][1][3] <= cap:
            return 1
        low = smallest(lambda d: self.peak(3, d, padded=False) <= cap, 2, max(2, first_fit))
        if low is None:
            return None
        # The floor never grows with D either (every term a shard, padded or not, ⌈x ÷ D⌉ rows or elements):
        # bisect where it first fits, so that a MoE model whose padded experts fit at no D costs ~17 checks.
        floor_low = smallest(lambda d: self.floor_fits(3, d), low, DP_MAX)
        if floor_low is None:
            return None
        for dp in range(floor_low, min(low + _SCAN, DP_MAX + 1)):
            if self.fits(3, dp):
                return dp
        return smallest(lambda d: self.fits(3, d), max(floor_low, min(low + _SCAN, DP_MAX)), DP_MAX)

    def largest_micro_batch(self, stage: int) -> int | None:
        """The largest micro batch that fits at the scenario's own D, from each instant's totals."""
        dp = self.s.dp
        return largest_micro_batch(lambda b: self.walked(stage, dp, b), self.room, lambda b: self.fits(stage, dp, b))


_SCAN = 256  # stage 3 with a model: degrees searched up from the unpadded bound before bisecting


# Sized for a workshop: 200 attendees each edit D (the most common edit) a few seconds after their last
# change, when that scenario's entry must still be here (~80 new scenarios a second: 1,024 entries last
# ~12 s). An entry is ~7 KiB with its key (measured with tracemalloc), so ~7 MiB in all.
@lru_cache(maxsize=1024)
def _over_d(s: Scenario) -> tuple[tuple[int | None, ...], tuple[tuple[int, tuple[int, ...]], ...]]:
    """With a model: each stage's smallest D and the curve over D, which do not depend on the scenario's
    own D (``s`` comes with dp = 1 and no name), cached: editing D on the page reuses them."""
    subtotals = _curve(
        s.with_(capacity_bytes=_ANY_CAPACITY, reserve_bytes=0, reserve_source="declared", contingency_pct=0)
    )
    pct = s.contingency_pct
    curve = tuple((dp, tuple(p + contingency(p, pct) for p in peaks)) for dp, peaks in subtotals)
    sched = _SchedulePeak(s, None)
    return tuple(sched.smallest_dp(stage, curve) for stage in STAGES), curve


# The walks over D read neither the device nor the contingency (only the verdicts compare with the one, and the
# other is added on top of the worst instant), so the curve is cached before both, as subtotals: a capacity,
# reserve or contingency edit walks the smallest-D searches (1–15 walks), not the curve's 55.
_ANY_CAPACITY = 80_000_000_000


@lru_cache(maxsize=256)
def _curve(s: Scenario) -> tuple[tuple[int, tuple[int, ...]], ...]:
    return _SchedulePeak(s, None).curve()


def find_fit(s: Scenario, activations_at: Callable[[int], int] | None = None) -> FitFinder:
    """Fit figures for ``s``. ``activations_at(b)`` gives the modelled activation peak for micro
    batch ``b`` (with a model and no measured value); without it the micro batch is not searched.

    Stages 0–2 are closed forms. Stage 3 tightens a lower bound with the same closed form (see
    ``tightened_stage3``) and gives the smallest D that fits, even where the gather outgrows the
    state (U × (1 + P) × g > N × state width, a model of one or two units with prefetch) and the
    peak can rise with D. A scenario that does not settle in ``_TIGHTEN`` steps is bisected as
    before: a D that fits where D − 1 does not; the page shows the whole curve.
    """
    if not_schedulable(s) is None:
        sched = _SchedulePeak(s, activations_at)
        smallest, curve = _over_d(s.with_(dp=1, name=""))
        fits = tuple(
            StageFit(stage, _shardable(s, stage, smallest[stage], sched.fits),
                     None if activations_at is None else sched.largest_micro_batch(stage))
            for stage in STAGES
        )  # fmt: skip
        return FitFinder(fits, curve, activations_at is not None)
    model = _PeakModel(s)
    act = s.activation_bytes
    stages = []
    for stage in STAGES:
        dp = model.smallest_dp_without_gather(stage, act) if stage < 3 else model.smallest_dp_stage3(act)
        mb = None if activations_at is None else model.largest_micro_batch(stage, activations_at)
        stages.append(StageFit(stage, dp, mb))
    return FitFinder(tuple(stages), model.curve(act), activations_at is not None)


def _shardable(s: Scenario, stage: int, dp: int | None, fits: Callable[[int, int], bool]) -> int | None:
    """``dp``, or where the stack cannot shard the model over it (torchtitan's experts on an uneven dim 1,
    :func:`~app.ledger.models.fsdp2.uneven_experts`) the next D it can that fits; None when none up to the bound."""
    if dp is None or not s.model:
        return dp
    inv = resolve(s.model).inventory
    for d in range(dp, DP_MAX + 1):
        if not uneven_experts(inv, s.stack, d * s.cp) and (d == dp or fits(stage, d)):
            return d
    return None
