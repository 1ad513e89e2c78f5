"""Estimate against observed, per instant and rank, every byte of the difference named.

What a rank's device holds at a moment is ``observed = reserved + context``: the caching allocator's
reserved memory (``torch.cuda.memory_reserved``) and what lives outside it, measured once at the
start as the device's used memory minus reserved (the CUDA context, and anything else another
library or process holds). The lab's estimate is what the schedule says is *allocated* then, so::

    observed = estimate + allocator reserve + CUDA context + unexplained
    allocator reserve = reserved − allocated       (cached blocks, rounding, fragmentation)
    CUDA context      = used − reserved at start    (the driver's context, outside the allocator)
    unexplained       = allocated − estimate        (negative: the lab holds more than the run did)

Each mark of the probe gives two comparisons. **At** the mark, the current figures: ``end-of-forward``
against the lab's instant of the same key, ``end-of-backward`` and ``after-step`` against the steady
state (the lab's ``optimizer-step`` instant without its temporaries: every gradient and the model
state). **Peak** since the previous mark (the probe resets the device's peak counters at every mark):
``max_allocated`` against the worst lab instant of that stretch of the step — the forward's instants
before ``end-of-forward``, ``loss-backward`` and every backward instant before ``end-of-backward``,
``optimizer-step`` before ``after-step`` — or the previous mark's resident state when that is more.
The step's peak is the highest ``max_allocated`` of the step against the lab's stage-3 peak before
contingency (its worst instant).

Every figure is an exact Python int: sums and differences, never a division.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from app.ledger.ledger import compute_ledger
from app.ledger.peak.schedule import Instant, Schedule
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import canonical_query
from app.observed.probe import MARKS, START
from app.observed.records import Observed, ObservedError, Problem, Record, Sample, Where

ALLOCATOR_RESERVE = "allocator_reserve"
CUDA_CONTEXT = "cuda_context"
UNEXPLAINED = "unexplained"
ENTRY_LABELS: dict[str, str] = {
    ALLOCATOR_RESERVE: "allocator reserve above allocated (reserved − allocated)",
    CUDA_CONTEXT: "CUDA context, measured at start (device used − reserved)",
    UNEXPLAINED: "unexplained (allocated − estimate)",
}
# The lab's schedule phases in each mark's stretch, counted from the mark before it in step order.
PHASES_BEFORE: dict[str, tuple[str, ...]] = {
    "end-of-forward": ("forward",),
    "end-of-backward": ("loss", "backward"),
    "after-step": ("optimizer",),
}
assert tuple(PHASES_BEFORE) == MARKS
STEADY = "steady state"


@dataclass(frozen=True, slots=True)
class Entry:
    """One named part of the difference between the estimate and the observed figure."""

    name: str  # a key of ENTRY_LABELS
    bytes: int

    @property
    def label(self) -> str:
        return ENTRY_LABELS[self.name]


@dataclass(frozen=True, slots=True)
class Row:
    """One rank's comparison: estimate, observed, and the entries between them (they add up exactly)."""

    rank: int
    where: Where  # the probe's line this row reads ("" source for the step's peak: the highest line)
    estimate: int
    lab: str  # which of the lab's instants the estimate is (the worst of a stretch names it)
    allocated: int  # allocated at the mark, or the peak's max_allocated
    reserved: int  # reserved at the mark, or the peak's max_reserved (reserved when not recorded)
    context: int  # 0 when the rank has no start record (context_measured False)
    context_measured: bool

    @property
    def observed(self) -> int:
        return self.reserved + self.context

    @property
    def entries(self) -> tuple[Entry, ...]:
        return (
            Entry(ALLOCATOR_RESERVE, self.reserved - self.allocated),
            Entry(CUDA_CONTEXT, self.context),
            Entry(UNEXPLAINED, self.allocated - self.estimate),
        )

    def entry(self, name: str) -> int:
        return next(e.bytes for e in self.entries if e.name == name)


@dataclass(frozen=True, slots=True)
class Range:
    """The smallest and largest value of one figure across ranks, with the ranks that hold them, and its sum over
    the ranks (the mean, rounded down, is ``total // ranks``)."""

    name: str
    min: int
    min_rank: int
    max: int
    max_rank: int
    total: int = 0
    ranks: int = 1

    @property
    def mean(self) -> int:
        """The mean across ranks, rounded down to a whole byte."""
        return self.total // self.ranks


@dataclass(frozen=True, slots=True)
class Comparison:
    key: str  # "end-of-forward", "end-of-forward:peak", …, "step:peak"
    mark: str  # the probe's mark, or "step" for the step's peak
    kind: str  # at | peak
    title: str
    rows: tuple[Row, ...]

    @property
    def ranges(self) -> tuple[Range, ...]:
        """min/max across ranks of the estimate, the observed figure and each entry."""
        figures: list[tuple[str, list[tuple[int, int]]]] = [
            ("estimate", [(r.estimate, r.rank) for r in self.rows]),
            ("observed", [(r.observed, r.rank) for r in self.rows]),
        ]
        figures += [(name, [(r.entry(name), r.rank) for r in self.rows]) for name in ENTRY_LABELS]
        return tuple(_range(name, values) for name, values in figures)

    def range_of(self, name: str) -> Range:
        return next(r for r in self.ranges if r.name == name)

    def worst(self, n: int) -> tuple[Row, ...]:
        """The ``n`` ranks with the highest observed figure (the lowest rank among equals): the page shows these,
        the download every rank."""
        return tuple(sorted(self.rows, key=lambda r: (-r.observed, r.rank))[:n])


def _range(name: str, values: Sequence[tuple[int, int]]) -> Range:
    low = min(values)  # (value, rank): the lowest rank among equals
    high = max(values, key=lambda v: (v[0], -v[1]))
    return Range(name, low[0], low[1], high[0], high[1], sum(v for v, _ in values), len(values))


@dataclass(frozen=True, slots=True)
class Reconciliation:
    scenario: Scenario
    step: int
    ranks: tuple[int, ...]
    world: int | None
    comparisons: tuple[Comparison, ...]  # in step order: each mark at, then its peak; the step's peak last
    peak_instant: str  # the key of the lab's worst instant
    peak_subtotal: int  # the lab's stage-3 peak before contingency (the worst instant's total)
    contingency: int
    peak_total: int  # with contingency: what the verdict uses
    capacity: int
    notes: tuple[str, ...]

    @property
    def step_peak(self) -> Comparison:
        return self.comparisons[-1]

    @property
    def covered(self) -> bool:
        """Whether the lab's peak (with its contingency) covers every rank's observed peak footprint."""
        return all(r.observed <= self.peak_total for r in self.step_peak.rows)

    @property
    def measured_reserve(self) -> int:
        """The allocator's reserve above allocated at the step's peak, the highest across ranks (max_memory_reserved −
        max_memory_allocated): what the scenario's ``reserve_bytes`` takes from this run."""
        return self.step_peak.range_of(ALLOCATOR_RESERVE).max

    @property
    def reserve_query(self) -> str | None:
        """The scenario with the measured reserve set (``reserve_source = measured``), as a canonical query; None
        when there is none to set (0 B) or it would be above the capacity."""
        reserve = self.measured_reserve
        if reserve <= 0 or reserve > self.scenario.capacity_bytes:
            return None
        return canonical_query(replace(self.scenario, reserve_bytes=reserve, reserve_source="measured"))

    @property
    def fits_capacity(self) -> bool:
        """Whether every rank's observed peak footprint stayed within the scenario's capacity."""
        return all(r.observed <= self.capacity for r in self.step_peak.rows)


# --------------------------------------------------------------------------- the lab's side


@dataclass(frozen=True, slots=True)
class _Lab:
    schedule: Schedule
    steady: int  # optimizer-step without its temporaries: model state and every gradient

    def at(self, mark: str) -> tuple[int, str]:
        if mark == "end-of-forward":
            instant = self.instant("end-of-forward")
            return instant.total, instant.key
        return self.steady, f"{STEADY} (optimizer-step without its temporaries)"

    def instant(self, key: str) -> Instant:
        return next(i for i in self.schedule.instants if i.key == key)

    def stretch(self, previous: str | None, mark: str) -> tuple[int, str]:
        """The worst the lab holds between ``previous`` (a mark, ``start`` or None) and ``mark``."""
        phases = stretch_phases(previous, mark)
        inside = [i for i in self.schedule.instants if i.phase in phases]
        worst = max(inside, key=lambda i: i.total)  # the first of equals, in step order
        lab = (f"worst of {len(inside)} instants ({inside[0].key} … {inside[-1].key}): {worst.key}"
               if len(inside) > 1 else worst.key)  # fmt: skip
        if previous in MARKS:
            held, what = self.at(previous)
            if held > worst.total:  # the stretch opens with the previous mark's resident state
                return held, f"{what}, held at {previous} (above {lab})"
        return worst.total, lab


def stretch_phases(previous: str | None, mark: str) -> tuple[str, ...]:
    """The lab's phases between two marks in step order; the start (or no mark) sits before a forward.
    The same mark twice (a loop that marks once a step) is a whole step."""
    i = MARKS.index(previous) if previous in MARKS else len(MARKS) - 1
    end = MARKS.index(mark)
    phases: list[str] = []
    while True:
        i = (i + 1) % len(MARKS)
        phases.extend(PHASES_BEFORE[MARKS[i]])
        if i == end:
            return tuple(phases)


def _lab(s: Scenario) -> tuple[_Lab, int, int, int, str]:
    peak = compute_ledger(s).stages[3].peak
    if peak.schedule is None:
        why = (
            f"has no schedule to reconcile with: {peak.why_declared}; name the model (--model or --model-config) "
            "and leave params and unit_params to it"
        )
        raise ObservedError([Problem(None, "scenario", why)])
    step = next(i for i in peak.schedule.instants if i.key == "optimizer-step")
    lab = _Lab(peak.schedule, step.total - step.bytes_of("temporaries"))
    return lab, peak.subtotal, peak.contingency, peak.total, peak.schedule.peak.key


# --------------------------------------------------------------------------- choosing the step


def _steps(samples: Iterable[Sample]) -> set[int]:
    return {s.record.step for s in samples if s.record.instant != START}


def choose_step(observed: Observed, step: int | None) -> int:
    """``step`` when every rank recorded it; by default the last step every rank recorded."""
    by_rank = {rank: _steps(samples) for rank, samples in observed.ranks.items()}
    if step is not None:
        missing = [rank for rank, steps in by_rank.items() if step not in steps]
        if missing:
            raise ObservedError([Problem(None, "step", f"{step:,} is not recorded by rank{_plural(missing)}")])
        return step
    common = set.intersection(*by_rank.values())
    if not common:
        empty = [rank for rank, steps in by_rank.items() if not steps]
        why = f"rank{_plural(empty)} recorded no step" if empty else "no step is recorded by every rank"
        raise ObservedError([Problem(None, "step", why)])
    return max(common)


def _plural(ranks: Sequence[int]) -> str:
    shown = ", ".join(f"{r:,}" for r in ranks[:8]) + (f" and {len(ranks) - 8:,} more" if len(ranks) > 8 else "")
    return ("s " if len(ranks) > 1 else " ") + shown


# --------------------------------------------------------------------------- reconciling


def reconcile(s: Scenario, observed: Observed, step: int | None = None) -> Reconciliation:
    lab, subtotal, contingency, total, worst = _lab(s)
    chosen = choose_step(observed, step)
    at: dict[str, list[Row]] = {m: [] for m in MARKS}
    peak: dict[str, list[Row]] = {m: [] for m in MARKS}
    step_rows: list[Row] = []
    for rank, samples in observed.ranks.items():
        start = observed.start_of(rank)
        context = 0 if start is None else _context(start)
        previous: str | None = None
        in_step: list[tuple[Sample, Row]] = []
        for sample in samples:
            r = sample.record
            if r.instant != START and r.step == chosen:
                measured = start is not None
                held, held_lab = lab.at(r.instant)
                at[r.instant].append(
                    Row(rank, sample.where, held, held_lab, r.allocated, r.reserved, context, measured)
                )
                worst_held, worst_lab = lab.stretch(previous, r.instant)
                top = Row(
                    rank, sample.where, worst_held, worst_lab, r.max_allocated, _max_reserved(r), context, measured
                )
                peak[r.instant].append(top)
                in_step.append((sample, top))
            previous = r.instant
        highest = max(in_step, key=lambda pair: pair[1].allocated)[1]
        step_rows.append(Row(rank, highest.where, subtotal, f"the stage-3 peak before contingency: {worst}",
                             highest.allocated, max(row.reserved for _, row in in_step), context,
                             highest.context_measured))  # fmt: skip
    comparisons: list[Comparison] = []
    for mark in MARKS:
        if at[mark]:
            comparisons.append(Comparison(mark, mark, "at", f"at {mark}", tuple(at[mark])))
            comparisons.append(Comparison(f"{mark}:peak", mark, "peak", f"peak before {mark}", tuple(peak[mark])))
    comparisons.append(Comparison("step:peak", "step", "peak", f"peak of step {chosen:,}", tuple(step_rows)))
    return Reconciliation(
        scenario=s,
        step=chosen,
        ranks=tuple(observed.ranks),
        world=observed.world,
        comparisons=tuple(comparisons),
        peak_instant=worst,
        peak_subtotal=subtotal,
        contingency=contingency,
        peak_total=total,
        capacity=s.capacity_bytes,
        notes=tuple(_notes(s, observed, chosen, at)),
    )


def _context(start: Record) -> int:
    """What the device holds outside the caching allocator at the start: used − reserved."""
    assert start.device_used is not None  # records.py refuses a start record without it
    return start.device_used - start.reserved


def _max_reserved(r: Record) -> int:
    # Without max_reserved, reserved at the mark: the caching allocator only grows between marks
    # unless the loop calls empty_cache(), so it is the stretch's highest.
    return r.reserved if r.max_reserved is None else r.max_reserved


def _notes(s: Scenario, observed: Observed, step: int, at: dict[str, list[Row]]) -> list[str]:
    notes: list[str] = []
    no_start = [rank for rank in observed.ranks if observed.start_of(rank) is None]
    if no_start:
        notes.append(f"no start record for rank{_plural(no_start)}: the CUDA context is not measured there (0)")
    if observed.world is not None and observed.world != s.dp:
        notes.append(f"the probe's world size is {observed.world:,} and the scenario's dp {s.dp:,}: "
                     "the estimate is for dp ranks")  # fmt: skip
    if observed.world is not None and len(observed.ranks) < observed.world:
        notes.append(f"{len(observed.ranks):,} of {observed.world:,} ranks recorded")
    for mark in MARKS:
        marked = {row.rank for row in at[mark]}
        unmarked = [rank for rank in observed.ranks if rank not in marked]
        if unmarked:
            notes.append(f"no {mark} in step {step:,} on rank{_plural(unmarked)}: the stretch before it is "
                         "in the next mark's peak there")  # fmt: skip
    if step == 0:
        notes.append(
            "step 0 runs before the optimizer creates its states (AdamW does so in its first step): "
            "its forward and backward hold less than the lab's steady state; reconcile a later step"
        )
    if s.overhead_bytes:
        notes.append(
            f"the scenario declares overhead_bytes {s.overhead_bytes:,}: it is inside every estimate, and the "
            "context measured is named beside it (set it to 0 to see the measured overhead alone)"
        )
    return notes
