"""The walk: one stage's step run into the sum-only sink, each instant spelled with the entry-keeping one
the first time it is asked for.

Every question about a schedule goes through :func:`schedule`: the ledger's peak, the fit finder's
:func:`worst_total` and check 3's :func:`saved_activations`. Whole walks are cached, keyed by the values
that make them (the frozen scenario, the stage, its persistent lines, the rules, the padding): the fit
finder, the kill lists and their checks ask for the same walk again (a stage at the scenario's own D, the
production ledger once per check) and for hundreds of others per answer.
"""

from __future__ import annotations

from functools import lru_cache

from app.ledger.peak.schedule.carved import CarvedStep
from app.ledger.peak.schedule.chunked import ChunkedRootStep, ChunkedStep
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


# Sized for one whole answer: its fit finder (about 80 walks at other degrees and micro batches) and its kill lists
# (about 60 distinct). No deeper: a walk is ~100 objects the garbage collector tracks, and every full collection
# traverses the cache. At 1,024 walks (~100,000 objects) a collection paused a worker ~20 ms in process and the
# workshop's live-update p99 tripled (docs/performance.md); its hits all come from within one answer.
@lru_cache(maxsize=256)
def _walked(s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, padded: bool) -> Schedule:
    step = _step(s, stage)(s, stage, lines, rules, padded)
    every = resident(step)
    instants = tuple(summed(step, moment, every) for moment in step.plan())
    peak = max(instants, key=lambda i: i.total)  # max() keeps the first of equals: step order
    note = NOTES[stage]
    if stage == 3 and s.wrap == "embed-tail":
        note += CARVED_NOTE if isinstance(step, CarvedStep) else EMBED_TAIL_NOTE
    return Schedule(stage, instants, peak, note)


def _step(s: Scenario, stage: int) -> type[Step]:
    """The stage-3 walk of Accelerate's carved units (untied models; with torchtitan's chunked loss on them), else
    the root recipe's."""
    if stage == 3 and s.wrap == "embed-tail" and not layout(s.model, s.dp).tied:
        return ChunkedStep if s.loss == "chunked" else CarvedStep
    return ChunkedRootStep if s.loss == "chunked" else Step


def resident(step: Step) -> list[int]:
    """The bytes every instant holds, per category: the model state and the declared buckets and overhead
    (summed once per walk, not once per instant)."""
    out = SumSink()
    step.state(out)
    step.declared(out)
    return out.sums


def summed(step: Step, moment: Moment, every: list[int]) -> Instant:
    """``moment`` walked into the sum-only sink on top of ``every`` (:func:`resident`); its entries
    spelled on demand by the same walk."""
    out = SumSink(every)
    moment.fill(out)
    return Instant(moment.key, moment.name, moment.phase, sum(out.sums), tuple(out.sums), _Spelling(step, moment))


class _Spelling:
    """An instant's entries: ``moment`` walked again into the entry-keeping sink, once, when first asked for;
    the model state first and the declared buckets and overhead last, as in every instant."""

    __slots__ = ("entries", "moment", "step")

    def __init__(self, step: Step, moment: Moment) -> None:
        self.step, self.moment = step, moment
        self.entries: tuple[Entry, ...] | None = None

    def __call__(self) -> tuple[Entry, ...]:
        if self.entries is None:
            out = EntrySink()
            self.step.state(out)
            self.moment.fill(out)
            self.step.declared(out)
            self.entries = tuple(out.entries)
        return self.entries


def worst_total(s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, *, padded: bool = True) -> int:
    """The worst instant's total (before contingency): the fit finder's question."""
    return _walked(s, stage, lines, rules, padded).peak.total


def saved_activations(s: Scenario, rules: Rules) -> dict[str, int]:
    """Each instant's saved activations, by key. They do not depend on the stage (only which instants a
    stage walks does), so stage 3's walk, which has every key a stage can have, answers for all four."""
    walk = _walked(s, 3, persistent_lines(s, 3, rules), rules, True)
    return {i.key: i.bytes_of("activations") for i in walk.instants}
