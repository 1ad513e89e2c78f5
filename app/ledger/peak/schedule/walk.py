"""The walk: one stage's step run into the sum-only sink, each instant spelled with the entry-keeping one
the first time it is asked for.

Every question about a schedule is this walk. :func:`schedule` (the ledger's peak, check 3's
:func:`saved_activations`) keeps whole walks, cached, keyed by the values that make them (the frozen
scenario, the stage, its persistent lines, the rules, the padding): the kill lists and their checks ask for
the same walk again (the production ledger once per check). The fit finder's question, :func:`totals`, is
the same walk into the sum-only sink with nothing kept: it asks for a hundred walks at other degrees and
micro batches per answer, and keeping each (~100 objects the garbage collector tracks) made full
collections the tail of a workshop's live updates (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache

from app.ledger.peak.schedule.carved import CarvedStep
from app.ledger.peak.schedule.chunked import ChunkedRootStep, ChunkedStep
from app.ledger.peak.schedule.fused import FusedRootStep, FusedStep
from app.ledger.peak.schedule.instants import CARVED_NOTE, EMBED_TAIL_NOTE, NOTES, Entry, Instant, Schedule
from app.ledger.peak.schedule.layout import layout
from app.ledger.peak.schedule.sinks import EntrySink, SumSink
from app.ledger.peak.schedule.step import Moment, Step
from app.ledger.scenario import Scenario
from app.ledger.state.persistent import LedgerLine, persistent_lines
from app.ledger.state.rules import Rules


def schedule(s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, *, padded: bool = True) -> Schedule:
    """The instants of one step at ``stage`` for ``s`` (which must be schedulable: see
    :func:`not_schedulable`), with ``lines`` the stage's persistent lines under ``rules``.

    Each instant's numbers are walked at once; its entries with their formulas when first asked for (the
    page spells only the worst instant's, a receipt every one). ``padded=False`` leaves FSDP2's dim-0
    padding out (the fit finder's lower bound)."""
    return _walked(s, stage, lines, rules, padded)


# Sized for one whole answer with its kill lists (Llama 3.1 8B's: 79 distinct walks, 36 asked again). No deeper:
# a walk is ~25 objects the garbage collector tracks, and every full collection traverses the cache. At 1,024
# walks of ~100 objects a collection paused a worker ~20 ms in process and the workshop's live-update p99
# tripled (docs/performance.md); its hits all come from within one answer.
@lru_cache(maxsize=128)
def _walked(s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, padded: bool) -> Schedule:
    spelling = _Spelling(s, stage, lines, rules, padded)
    step = spelling.step()
    instants = tuple(
        Instant(m.key, m.name, m.phase, sum(sums), tuple(sums), spelling, index)
        for index, (m, sums) in enumerate(_summed(step))
    )
    peak = max(instants, key=lambda i: i.total)  # max() keeps the first of equals: step order
    note = NOTES[stage]
    if stage == 3 and s.wrap == "embed-tail":
        note += CARVED_NOTE if isinstance(step, CarvedStep) else EMBED_TAIL_NOTE
    return Schedule(stage, instants, peak, note)


def _step(s: Scenario, stage: int) -> type[Step]:
    """The stage-3 walk of Accelerate's carved units (untied models; with torchtitan's chunked loss on them), else
    the root recipe's."""
    if stage == 3 and s.wrap == "embed-tail" and not layout(s.model, s.dp).tied:
        return ChunkedStep if s.loss == "chunked" else FusedStep if s.loss == "fused" else CarvedStep
    return ChunkedRootStep if s.loss == "chunked" else FusedRootStep if s.loss == "fused" else Step


def resident(step: Step) -> list[int]:
    """The bytes every instant holds, per category: the model state and the declared buckets and overhead
    (summed once per walk, not once per instant)."""
    out = SumSink()
    step.state(out)
    step.declared(out)
    return out.sums


def _summed(step: Step) -> Iterator[tuple[Moment, list[int]]]:
    """Each moment of the plan with its bytes per category."""
    every = resident(step)
    for moment in step.moments():
        yield moment, summed(moment, every)


def summed(moment: Moment, every: list[int]) -> list[int]:
    """``moment`` walked into the sum-only sink on top of ``every`` (:func:`resident`): its bytes per category."""
    out = SumSink(every)
    moment.fill(out)
    return out.sums


class _Spelling:
    """A walk's entries, instant by instant: the step walked again into the entry-keeping sink, each instant
    once, when first asked for; the model state first and the declared buckets and overhead last, as in
    every instant. One per walk, holding only what makes the step: a cached walk keeps its instants and this
    (not a step and its plan per instant, objects the garbage collector would traverse at every full
    collection); the step is made again for the walks that are spelled."""

    __slots__ = ("args", "entries", "plan")

    def __init__(self, s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, padded: bool) -> None:
        self.args = (s, stage, lines, rules, padded)
        self.plan: tuple[Step, list[Moment]] | None = None
        self.entries: dict[int, tuple[Entry, ...]] = {}

    def step(self) -> Step:
        s, stage, lines, rules, padded = self.args
        return _step(s, stage)(s, stage, lines, rules, padded)

    def __call__(self, index: int) -> tuple[Entry, ...]:
        found = self.entries.get(index)
        if found is None:
            if self.plan is None:
                step = self.step()
                self.plan = (step, step.moments())
            step, moments = self.plan
            out = EntrySink()
            step.state(out)
            moments[index].fill(out)
            step.declared(out)
            found = self.entries[index] = tuple(out.entries)
        return found


def floor(s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules) -> int:
    """A lower bound of the walk's largest total, without the walk: what every instant holds (:func:`resident`)
    and every gradient, which the optimizer step's instant holds beside it. The fit finder checks it first."""
    step = _step(s, stage)(s, stage, lines, rules, True)
    return sum(resident(step)) + step.all_gradients()[0]


def totals(s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, *, padded: bool = True) -> list[int]:
    """Every instant's total (before contingency), in step order: the walk into the sum-only sink, nothing
    spelled or kept."""
    return [sum(sums) for _, sums in _summed(_step(s, stage)(s, stage, lines, rules, padded))]


def largest_totals(walks: Sequence[tuple[Scenario, tuple[LedgerLine, ...]]], stage: int, rules: Rules) -> list[int]:
    """The largest total (before contingency) of each walk, for walks of one stage, in an order along which no
    instant's total grows: stages 0–2 over a rising D, where every term is a constant or a ⌈x ÷ D⌉ (a
    property test holds it). Each instant's total in the walk before bounds it in the next, so a walk sums its
    instants from the largest bound down and stops at the first bound no larger than the largest total found:
    the fit finder's curve then sums two or three instants a degree, not every one (the same answer)."""
    bounds: list[int] = []
    peaks = []
    for s, lines in walks:
        step = _step(s, stage)(s, stage, lines, rules, True)
        moments, every = step.moments(), resident(step)
        if not bounds:
            bounds = [sum(summed(m, every)) for m in moments]
            peaks.append(max(bounds))
            continue
        assert len(moments) == len(bounds), "the walks of one stage have the same instants"
        best = 0
        for i in sorted(range(len(moments)), key=bounds.__getitem__, reverse=True):
            if bounds[i] <= best:
                break  # this instant and every one after it holds at most what was found
            bounds[i] = sum(summed(moments[i], every))
            best = max(best, bounds[i])
        peaks.append(best)
    return peaks


def over(s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, room: int, first: int = 0) -> int | None:
    """Whether the walk fits: the index of an instant whose total (before contingency) passes ``room``, trying
    instant ``first`` before the others, or None when every instant stays within it. A walk that does not fit
    stops at the first instant over: the fit finder's searches through degrees and micro batches that do not
    fit (a MoE model's padded experts: hundreds of degrees) then sum one instant each, not every one."""
    step = _step(s, stage)(s, stage, lines, rules, True)
    moments, every = step.moments(), resident(step)
    first = first if first < len(moments) else 0
    order: list[int] = [first, *range(first), *range(first + 1, len(moments))]
    for i in order:
        if sum(summed(moments[i], every)) > room:
            return i
    return None


def saved_activations(s: Scenario, rules: Rules) -> dict[str, int]:
    """Each instant's saved activations, by key. They do not depend on the stage (only which instants a
    stage walks does), so stage 3's walk, which has every key a stage can have, answers for all four."""
    walk = _walked(s, 3, persistent_lines(s, 3, rules), rules, True)
    return {i.key: i.bytes_of("activations") for i in walk.instants}
