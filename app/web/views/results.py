"""``partials/_results.html``: everything the results show for a valid scenario, one part per partial
(:mod:`~app.web.views.answer`, :mod:`~app.web.views.model`, :mod:`~app.web.views.parallel`,
:mod:`~app.web.views.persistent`, :mod:`~app.web.views.peak`, :mod:`~app.web.views.lower`,
:mod:`~app.web.views.kills`), less the parts a live update defers.

Everything is read off one :class:`~app.ledger.estimate.Estimate`; the figures stay exact integers
(the templates format them) and the lab's own texts (formulas, evidence, messages) are passed as
they are, for the templates to escape like any other text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from app.ledger.estimate import estimate
from app.ledger.scenario import Scenario
from app.web.views.answer import Answer, answer
from app.web.views.kills import Kills
from app.web.views.kills import kills as kills  # re-exported: tests/browser/test_present.py imports it from here
from app.web.views.lower import Lower, lower_section
from app.web.views.model import ModelSection, model_section
from app.web.views.parallel import ParallelView, parallel_view
from app.web.views.peak import PeakSection, peak_section
from app.web.views.persistent import PersistentSection, persistent_section
from app.web.views.run import Run, run


@dataclass(frozen=True, slots=True)
class Results:
    """Everything ``_results.html`` shows for a valid scenario."""

    capacity: int
    run: Run  # first: the run as described, at its stage (its change deferred with the lower sections)
    answer: Answer
    model: ModelSection | None
    persistent: PersistentSection
    peak: PeakSection
    # None: deferred, loaded when it comes into view (partials/_lower_pending.html, partials/_kills_pending.html)
    lower: Lower | None
    kills: Kills | None
    parallel: ParallelView | None = None  # None: plain data parallelism (nothing to show)


# The parts of the results a live update may defer, each then loaded by a request of its own when it comes
# into view (partials/_lower_pending.html, partials/_kills_pending.html): the sections below the peak
# (the fit finder's searches, the trace panel's lookups) and the kill lists, the two costliest parts.
DEFERRABLE = frozenset({"lower", "kills"})


def results(s: Scenario, *, deferred: frozenset[str] = frozenset()) -> Results:
    """Everything the results show for ``s``, less the parts named in ``deferred`` (of :data:`DEFERRABLE`):
    ``lower`` (the sections below the peak, then from /lower), ``kills`` (the kill lists, then
    from /kills)."""
    return _whole_results(s) if not deferred else _results(s, deferred)


# Cached: a room opens the same link at once (the default scenario, a preset: a workshop's 200 first page
# loads are one answer, the costliest there is, kill lists included). Live updates are each attendee's own
# edits and are not cached: they seldom repeat across a room, and would only push these out. Results are
# frozen, so requests share them safely; an answer is ~36 KB (tracemalloc), ~2 MB in all.
@lru_cache(maxsize=64)
def _whole_results(s: Scenario) -> Results:
    return _results(s, frozenset())


def _results(s: Scenario, deferred: frozenset[str]) -> Results:
    unknown = deferred - DEFERRABLE
    if unknown:
        raise ValueError(f"not a deferrable part of the results: {sorted(unknown)}")
    with_kills = "kills" not in deferred
    e = estimate(s, with_kill_lists=with_kills)  # its fit finder is searched only if lower_section reads it
    return Results(
        capacity=s.capacity_bytes,
        run=run(e, with_change="lower" not in deferred),
        answer=answer(e),
        model=model_section(e),
        persistent=persistent_section(e),
        peak=peak_section(e),
        lower=None if "lower" in deferred else lower_section(e),
        kills=Kills(e.mutations, e.reference_mutations, e.checks) if with_kills else None,
        parallel=parallel_view(e),
    )
