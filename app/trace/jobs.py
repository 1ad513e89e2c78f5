"""The page's trace jobs, from the web side: admission (what may be queued, for whom), and where a job stands.

:class:`TraceQueue` takes a scenario's canonical query and answers at once when its trace is finished, queued or
running (the same query is never queued twice: the store's claim is one transaction), refuses what it must before
anything is queued (a trace that failed moments ago, a model past the page's trace budget, a client that already
has its share of traces waiting, a full queue), and otherwise hands the job to the task queue
(:mod:`app.trace.queue`), whose workers run it (:mod:`app.trace.runner`). Where a job stands is read from the queue:
its place among the pending jobs, its progress record, its end record (copied into the store the first time a page
sees it, and then dropped from the queue).

No torch, no web stack.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from app.ledger.models.reference import resolve
from app.trace.runner import STALE_S, STOPPED, TraceRunner, scenario_of
from app.trace.store import JobStatus, Row, StoreError, TraceStore

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_QUEUED = 8
PER_CLIENT = 2  # traces one client (address) may have waiting or running at once; the others keep their place
RETRY_AFTER_S = 120.0  # a failed trace is not run again sooner: a scenario that fails does not hold the queue
# The page's trace budget, in parameter tensors. On fake tensors a trace's time follows the modules and tensors it
# runs, not their sizes or the tokens (measured on this 2-core machine, tiny Llama layers of 9 tensors: 16 layers
# 9.2 s, 32 21.9 s, 48 37.9 s; 2 layers at s 512 to 262,144 all 1.2-3 s): about 200 s of the 300 s limit. The CLI
# has no budget.
BUDGET_TENSORS = 1_300
PENDING_LOOK = 64  # the pending jobs read for a place (the queue holds at most MAX_QUEUED from the page)
LOST = "the trace worker that held this trace stopped before it finished; ask again"
UNREACHABLE = "the trace queue cannot be reached just now; ask again in a moment"


class QueueFull(Exception):
    """The queue already has :attr:`TraceQueue.max_queued` traces waiting."""

    def __init__(self, max_queued: int) -> None:
        self.max_queued = max_queued
        super().__init__(
            f"{max_queued} traces are already waiting for this server; try again in a few minutes "
            "(or run the command below in a terminal)"
        )


class ClientBusy(Exception):
    """This client already has :attr:`TraceQueue.per_client` traces waiting or running."""

    def __init__(self, per_client: int) -> None:
        self.per_client = per_client
        super().__init__(
            f"you already have {per_client} traces waiting or running on this server; ask again once one has "
            "finished (or run the command below in a terminal)"
        )


class TooLarge(Exception):
    """The scenario's model has more parameter tensors than the page's trace budget (:data:`BUDGET_TENSORS`)."""

    def __init__(self, tensors: int, budget: int) -> None:
        self.tensors, self.budget = tensors, budget
        super().__init__(
            f"this model has {tensors:,} parameter tensors, more than the {budget:,} a trace here may run (about "
            "200 s of its 300 s limit): run the command below in a terminal, which has no such limit"
        )


class RetryLater(Exception):
    """The scenario's trace failed moments ago: it is not run again before :data:`RETRY_AFTER_S`."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        super().__init__(f"this trace failed moments ago; it can be tried again in {seconds} s")


class QueueDown(Exception):
    """The task queue's storage (its SQLite file, its Redis) failed or cannot be reached."""

    def __init__(self) -> None:
        super().__init__(UNREACHABLE)


def trace_tensors(query: str) -> int:
    """The parameter tensors a trace of ``query`` runs (its model's; a MoE layer's experts are two fused tensors):
    its cost here."""
    s = scenario_of(query)
    return resolve(s.model).inventory.tensor_count if s.model else 0


class TraceQueue:
    """The page's view of the trace jobs (see the module docstring)."""

    def __init__(
        self,
        store: TraceStore,
        runner: TraceRunner,
        *,
        max_queued: int = MAX_QUEUED,
        per_client: int = PER_CLIENT,
        retry_after_s: float = RETRY_AFTER_S,
        budget_tensors: int = BUDGET_TENSORS,
    ) -> None:
        self.store, self.runner, self.huey = store, runner, runner.huey
        self.max_queued, self.per_client = max_queued, per_client
        self.retry_after_s, self.budget_tensors = retry_after_s, budget_tensors
        self._submitting = threading.Lock()  # this process's submissions one at a time (the claim is the store's)

    # ------------------------------------------------------------------ where a job stands

    def status(self, query: str, *, look: bool = False) -> JobStatus | None:
        """The job of ``query``: one store lookup, and for a job on the queue a few reads of the queue's storage.
        ``look``: where the store has no row, the queue is asked for the scenario's end too (a trace that ended
        while the store's file was lost; the polling status region and the report ask, a page render does not)."""
        row = self.store.get(query)
        if row is not None and row.state != "queued":
            return row.ended(query)
        try:
            if row is None:
                end = self._ask(lambda: self.runner.record("end", query)) if look else None
                return None if end is None else self._settle(query, str(end["task"]), end)
            return self._live(query, row)
        except QueueDown:
            return (
                None if row is None else JobStatus(query, "failed", error=UNREACHABLE, updated=row.updated, gone=True)
            )

    def _live(self, query: str, row: Row) -> JobStatus:
        progress = self._ask(lambda: self.runner.record("progress", query))  # before the end: see TraceRunner.run
        end = self._ask(lambda: self.runner.record("end", query))
        if end is not None and end.get("task") == row.task:
            return self._settle(query, row.task, end)
        if progress is not None and progress.get("task") == row.task:
            if self.store.age(float(progress["updated"])) > STALE_S:
                return self._settle(query, row.task, {"error": LOST, "gone": True})
            done, total, step = int(progress["done"]), int(progress["total"]), str(progress["step"])
            return JobStatus(query, "running", done=done, total=total, step=step, updated=float(progress["updated"]))
        pending = self._ask(lambda: [job.id for job in self.huey.pending(PENDING_LOOK)])
        if row.task in pending:
            return JobStatus(query, "queued", place=pending.index(row.task) + 1, updated=row.updated)
        if self.store.age(row.updated) > STALE_S:  # neither waiting, nor running, nor ended: the queue lost it
            return self._settle(query, row.task, {"error": LOST, "gone": True})
        return JobStatus(query, "queued", place=1, updated=row.updated)  # a worker is taking it just now

    def _settle(self, query: str, task: str, end: dict[str, Any]) -> JobStatus:
        """Keep the job's end in the store and drop it from the queue (kept there if the store cannot be written).
        A job found lost is settled too, so that a client's rows on the queue stay as few as its traces there."""
        try:
            if "error" in end:
                self.store.fail(query, task, str(end["error"]))
            else:
                self.store.finish(query, task, str(end["report"]), end["summary"])
        except StoreError:
            log.warning("the end of the trace of %s could not be kept in the trace cache", query, exc_info=True)
        else:
            self._ask(lambda: self.runner.forget("end", query, task))
        now = self.store.clock()
        if "error" in end:
            return JobStatus(query, "failed", error=str(end["error"]), updated=now, gone=bool(end.get("gone")))
        return JobStatus(query, "finished", summary=end["summary"], updated=now)

    def report(self, query: str) -> str | None:
        """A finished trace's whole JSON report (its end copied from the queue first, if no page has seen it yet)."""
        self.status(query, look=True)
        return self.store.report(query)

    def _ask(self, read: Callable[[], T]) -> T:
        """A read or write of the queue's storage; whatever it raises (a SQLite error, Redis down) is
        :class:`QueueDown`, logged once here."""
        try:
            return read()
        except Exception as exc:
            log.warning("the trace queue failed: %r", exc)
            raise QueueDown from exc

    # ------------------------------------------------------------------ asking for a trace

    def submit(self, query: str, client: str = "") -> JobStatus:
        """Queue the trace of ``query`` for ``client`` (its address), or join the job that is finished, queued or
        running. Refused: a trace that failed less than :attr:`retry_after_s` ago (:class:`RetryLater`), a model
        past the page's trace budget (:class:`TooLarge`), a client with :attr:`per_client` traces already waiting
        or running (:class:`ClientBusy`), a full queue (:class:`QueueFull`); the queue failing is :class:`QueueDown`,
        the store failing :class:`StoreError`."""
        with self._submitting:
            existing = self.status(query, look=True)
            if existing is not None and existing.state != "failed":
                return existing
            if (
                wait := self.retry_in(existing)
            ) > 0:  # a trace that failed by itself moments ago (one whose worker stopped may run at once)
                raise RetryLater(int(wait) + 1)
            if (tensors := trace_tensors(query)) > self.budget_tensors:
                raise TooLarge(tensors, self.budget_tensors)
            if sum(1 for asked in self.store.queued_for(client) if self._active(asked)) >= self.per_client:
                raise ClientBusy(self.per_client)
            if self._ask(self.huey.pending_count) >= self.max_queued:
                raise QueueFull(self.max_queued)
            row = self.store.get(query)
            job = self.runner.job(query)
            taken = self.store.claim(query, job.id, client, replacing=None if row is None else row.updated)
            if taken is not None:  # another web worker claimed it between the two looks: join that job
                return self.status(query) or JobStatus(query, "queued", place=1)
            try:
                self._ask(lambda: self.huey.enqueue(job))
            except QueueDown:
                self.store.fail(query, job.id, UNREACHABLE)
                raise
            return self.status(query) or JobStatus(query, "queued", place=1)

    def retry_in(self, status: JobStatus | None) -> float:
        """Seconds before a failed job may be asked for again: none for one whose worker stopped or whose queue
        could not be reached (nothing in the scenario failed), else what is left of :attr:`retry_after_s`."""
        if status is None or status.state != "failed" or status.gone or status.error in (STOPPED, LOST, UNREACHABLE):
            return 0.0
        return self.retry_after_s - self.store.age(status.updated)

    def _active(self, query: str) -> bool:
        status = self.status(query)
        return status is not None and status.active


__all__ = [
    "BUDGET_TENSORS", "MAX_QUEUED", "PER_CLIENT", "RETRY_AFTER_S", "STOPPED", "ClientBusy", "QueueDown", "QueueFull",
    "RetryLater", "TooLarge", "TraceQueue", "trace_tensors",
]  # fmt: skip
