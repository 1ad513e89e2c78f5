"""The fit finder: per stage, the smallest sharding degree at which the peak fits the device, the
largest micro batch that fits at the current degree (when activations are modelled), and the
curve of per-rank peak against D for the chart.

The peak here is the ledger's own rules (ownership table, gather term, contingency) written as a
closed form in D, so that the smallest D can be solved for rather than searched; property tests
hold it equal to the full ledger at every answer, one step before it and at every point of the curve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div
from app.ledger.fields import FIELD_BY_NAME
from app.ledger.persistent import width_and_copies
from app.ledger.rules import CLASSES, PRODUCTION, STAGES
from app.ledger.scenario import Scenario

DP_MAX = FIELD_BY_NAME["dp"].maximum
MICRO_BATCH_MAX = FIELD_BY_NAME["micro_batch"].maximum
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
    """peak(stage, D, activations) for one scenario, every other input fixed."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        # Per stage: total width of the classes sharded at that stage, and of the replicated ones.
        self.widths: list[tuple[int, int]] = []
        for stage in STAGES:
            sharded = replicated = 0
            for c in CLASSES:
                width, copies, _ = width_and_copies(s, c, PRODUCTION)
                if PRODUCTION.sharded(c, stage):
                    sharded += width * copies
                else:
                    replicated += width * copies
            self.widths.append((sharded, replicated))
        self.fixed = s.bucket_bytes + s.overhead_bytes
        self.room = self._max_subtotal()

    def peak(self, stage: int, dp: int, activations: int) -> int:
        s = self.s
        sharded, replicated = self.widths[stage]
        persistent = ceil_div(s.params, dp) * sharded + s.params * replicated
        gather = 0
        if stage == 3:
            gather = (1 + s.prefetch) * (s.unit_params - ceil_div(s.unit_params, dp)) * s.gather_bytes
        subtotal = persistent + gather + self.fixed + activations
        return subtotal + ceil_div(subtotal * s.contingency_pct, 100)

    def curve(self, activations: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """All four stages' peaks at each D of ``CURVE_DPS``."""
        return tuple((dp, tuple(self.peak(stage, dp, activations) for stage in STAGES)) for dp in CURVE_DPS)

    def _max_subtotal(self) -> int:
        """The largest subtotal whose peak (with contingency) still fits the capacity."""
        cap, pct = self.s.capacity_bytes, self.s.contingency_pct
        guess = cap * 100 // (100 + pct)  # at most one off: sub + ⌈sub × pct ÷ 100⌉ ≤ cap
        while guess + ceil_div(guess * pct, 100) > cap:
            guess -= 1
        while (guess + 1) + ceil_div((guess + 1) * pct, 100) <= cap:
            guess += 1
        return guess

    def smallest_dp_without_gather(self, stage: int, activations: int) -> int | None:
        """Stages 0–2 in closed form: ⌈N ÷ D⌉ × sharded ≤ room  ⟺  D ≥ ⌈N ÷ ⌊room ÷ sharded⌋⌉."""
        s = self.s
        sharded, replicated = self.widths[stage]
        room = self.room - s.params * replicated - self.fixed - activations
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
        s = self.s
        per_element = (1 + s.prefetch) * s.gather_bytes
        unit = s.unit_params
        low = self.smallest_dp_without_gather(3, activations)
        for _ in range(_TIGHTEN):
            if low is None:
                return None, True
            tighter = self.smallest_dp_without_gather(3, activations + per_element * (unit - ceil_div(unit, low)))
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
        cap = s.capacity_bytes
        return _smallest(lambda d: self.peak(3, d, activations) <= cap, low, DP_MAX if high is None else high)


# Tightening steps before the stage-3 search falls back to bisection: of 80,000 random scenarios
# one needed more than 22 steps (90).
_TIGHTEN = 128


def _smallest(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """The smallest x in [low, high] with fits(x), searching for the boundary by bisection."""
    if fits(low):
        return low
    if not fits(high):
        return None
    # invariant: fits(high) and not fits(low)
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid
    return high


def _largest(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """The largest x in [low, high] with fits(x), for a predicate that only turns false: one
    before the first x that does not fit."""
    first_miss = _smallest(lambda x: not fits(x), low, high)
    if first_miss is None:
        return high
    return first_miss - 1 if first_miss > low else None


def find_fit(s: Scenario, activations_at: Callable[[int], int] | None = None) -> FitFinder:
    """Fit figures for ``s``. ``activations_at(b)`` gives the modelled activation peak for micro
    batch ``b`` (with a model and no measured value); without it the micro batch is not searched.

    Stages 0–2 are closed forms. Stage 3 tightens a lower bound with the same closed form (see
    ``tightened_stage3``) and gives the smallest D that fits, even where the gather outgrows the
    state (U × (1 + P) × g > N × state width, a model of one or two units with prefetch) and the
    peak can rise with D. A scenario that does not settle in ``_TIGHTEN`` steps is bisected as
    before: a D that fits where D − 1 does not; the page shows the whole curve.
    """
    model = _PeakModel(s)
    act = s.activation_bytes
    stages = []
    for stage in STAGES:
        dp = model.smallest_dp_without_gather(stage, act) if stage < 3 else model.smallest_dp_stage3(act)
        mb = None if activations_at is None else _largest_micro_batch(model, stage, activations_at)
        stages.append(StageFit(stage, dp, mb))
    return FitFinder(tuple(stages), model.curve(act), activations_at is not None)


def _largest_micro_batch(model: _PeakModel, stage: int, activations_at: Callable[[int], int]) -> int | None:
    """The largest micro batch whose modelled activations fit at the scenario's own D."""
    s = model.s
    return _largest(lambda b: model.peak(stage, s.dp, activations_at(b)) <= s.capacity_bytes, 1, MICRO_BATCH_MAX)
