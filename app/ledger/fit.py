"""The fit finder: per stage, the smallest sharding degree at which the peak fits the device, the
largest micro batch that fits at the current degree (when activations are modelled), and the
curve of per-rank peak against D for the chart.

The peak here is the ledger's own rules (ownership table, gather term, contingency) written as a
closed form in D, so that a search over 131,072 degrees costs a few microseconds per probe; a
property test holds it equal to the full ledger at every answer and one step before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.ledger.fields import FIELD_BY_NAME
from app.ledger.persistent import width_and_copies
from app.ledger.rules import CLASSES, PRODUCTION, STAGES
from app.ledger.scenario import Scenario

DP_MAX = FIELD_BY_NAME["dp"].maximum
MICRO_BATCH_MAX = FIELD_BY_NAME["micro_batch"].maximum
CURVE_DPS: tuple[int, ...] = tuple(2**k for k in range(18))  # 1 … 131,072, a log2 axis
# (k, 2^k) per point of the curve: a division by 2^k is a shift.
_CURVE_POWERS: tuple[tuple[int, int], ...] = tuple(enumerate(CURVE_DPS))
assert all(dp == 1 << k for k, dp in _CURVE_POWERS), "the curve's shifts need D = 2^k at point k"


@dataclass(slots=True)  # a value: never mutated; not frozen because frozen __init__ costs 5x (hot path)
class StageFit:
    stage: int
    smallest_dp: int | None  # None: no D within bounds fits
    largest_micro_batch: int | None  # None: not modelled, or not even one sequence fits


@dataclass(slots=True)  # a value: never mutated; not frozen because frozen __init__ costs 5x (hot path)
class FitFinder:
    stages: tuple[StageFit, ...]
    curve: tuple[tuple[int, tuple[int, ...]], ...]  # (D, peak per stage)
    micro_batch_modelled: bool


# Per stage, the classes (as indexes into CLASSES) that the production rules shard there.
_SHARDED_INDEXES: tuple[tuple[int, ...], ...] = tuple(
    tuple(i for i, sharded in enumerate(flags) if sharded) for flags in PRODUCTION.table
)


class _PeakModel:
    """peak(stage, D, activations) for one scenario, every other input fixed."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        # Per stage: total width of the classes sharded at that stage, and of the replicated ones.
        self.widths: list[tuple[int, int]] = []
        per_class = [width * copies for width, copies, _ in (width_and_copies(s, c, PRODUCTION) for c in CLASSES)]
        total = sum(per_class)
        for indexes in _SHARDED_INDEXES:
            sharded = sum([per_class[i] for i in indexes])
            self.widths.append((sharded, total - sharded))
        self.fixed = s.bucket_bytes + s.overhead_bytes
        self.room = self._max_subtotal()

    def peak(self, stage: int, dp: int, activations: int) -> int:
        s = self.s
        sharded, replicated = self.widths[stage]
        persistent = -(-s.params // dp) * sharded + s.params * replicated
        gather = 0
        if stage == 3:
            gather = (1 + s.prefetch) * (s.unit_params + (-s.unit_params // dp)) * s.gather_bytes
        subtotal = persistent + gather + self.fixed + activations
        return subtotal + -(-subtotal * s.contingency_pct // 100)

    def curve(self, activations: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """All four stages at each D of ``CURVE_DPS``, as the ledger computes them, in few big-int
        operations (each allocates; they were most of the curve's cost).

        A stage's peak is subtotal + ⌈subtotal × pct ÷ 100⌉ = ⌈subtotal × q ÷ 100⌉
        = ⌊(subtotal × q + 99) ÷ 100⌋ with q = 100 + pct, and its subtotal is shard × width + terms
        that do not depend on D, so those are multiplied by q once for the whole curve. The
        stage-3 gather (U − ⌈U ÷ D⌉) × (1 + P) × g is U × (1 + P) × g + ⌊−U ÷ D⌋ × (1 + P) × g.
        D = 2^k, so ⌊x ÷ D⌋ is x >> k. Stage 0 shards nothing: its peak is one number."""
        s = self.s
        n, u = s.params, s.unit_params
        q = 100 + s.contingency_pct
        (w0, r0), (w1, r1), (w2, r2), (w3, r3) = self.widths
        assert w0 == 0, "stage 0 replicates every class"
        base = self.fixed + activations
        per_gather = (1 + s.prefetch) * s.gather_bytes
        s0 = ((n * r0 + base) * q + 99) // 100
        c1, c2 = (n * r1 + base) * q + 99, (n * r2 + base) * q + 99
        c3 = (n * r3 + base + per_gather * u) * q + 99
        q1, q2, q3, qg = w1 * q, w2 * q, w3 * q, per_gather * q
        minus_n, minus_u = -n, -u
        out = []
        for k, dp in _CURVE_POWERS:
            shard = -(minus_n >> k)  # ⌈N ÷ D⌉
            s3 = (shard * q3 + qg * (minus_u >> k) + c3) // 100
            out.append((dp, (s0, (shard * q1 + c1) // 100, (shard * q2 + c2) // 100, s3)))
        return tuple(out)

    def _max_subtotal(self) -> int:
        """The largest subtotal whose peak (with contingency) still fits the capacity."""
        cap, pct = self.s.capacity_bytes, self.s.contingency_pct
        guess = cap * 100 // (100 + pct)  # at most one off: sub + ⌈sub × pct ÷ 100⌉ ≤ cap
        while guess + -(-guess * pct // 100) > cap:
            guess -= 1
        while (guess + 1) + -(-(guess + 1) * pct // 100) <= cap:
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
        dp = max(1, -(-s.params // most))
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
            tighter = self.smallest_dp_without_gather(3, activations + per_element * (unit + (-unit // low)))
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


# Tightening steps before the stage-3 search falls back to bisection: each costs well under a
# microsecond; of 80,000 random scenarios one needed more than 22 steps (90).
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
    cap = s.capacity_bytes
    act = s.activation_bytes
    stages = []
    memo: dict[int, int] = {}

    def modelled(b: int) -> int:
        if b not in memo:
            assert activations_at is not None
            memo[b] = activations_at(b)
        return memo[b]

    for stage in STAGES:
        dp = model.smallest_dp_without_gather(stage, act) if stage < 3 else model.smallest_dp_stage3(act)
        mb = None
        if activations_at is not None:
            mb = _largest(lambda b, st=stage: model.peak(st, s.dp, modelled(b)) <= cap, 1, MICRO_BATCH_MAX)  # type: ignore[misc]
        stages.append(StageFit(stage, dp, mb))
    curve = model.curve(act)
    return FitFinder(tuple(stages), curve, activations_at is not None)
