"""The trace task: what a trace worker does with one job it takes from the queue (:mod:`app.trace.queue`).

It runs ``python -m app.cli trace --format json <the scenario's flags>`` as a child process with a time limit
(:mod:`app.trace.process`: killed with everything it started when it overruns), and writes to the queue's key-value
storage, which the web side reads (:mod:`app.trace.jobs`), two records per scenario, each naming its task: its
*progress*, on each finished step and every :data:`HEARTBEAT_S` while it runs (a record unrefreshed for
:data:`STALE_S` is a worker that is gone), and at the end its *end*: the report and the page's summary of it, or an
error. Keyed by the scenario, not the task, so that an end is found even by a server that lost its cache meanwhile.

huey's own parts do the rest: its consumer takes the jobs in order, one per worker thread; its task lock keeps the
same scenario from running twice at once (a lock left by a worker that died is taken over once its progress is
stale); its "interrupted" signal says which trace a stopping worker leaves unfinished. Standard library and huey
only: no web stack, no torch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from huey import Huey, signals
from huey.api import Task, TaskLock, TaskWrapper
from huey.exceptions import TaskLockedException

from app import __version__
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.scenario.fields import FIELD_BY_NAME
from app.trace.bounded import bounded_report
from app.trace.process import STEPS, error_message, progress_step, run_process
from app.trace.store import summarise

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
# The code a report's modelled figures come from (the ledger, the receipts' FSDP2 section, the trace's
# own report): a change to any of it makes every cached trace out of date.
MODELLED_BY = ("app/ledger", "app/receipts", "app/trace")
TASK_NAME = "zero3-lab.trace"
TIMEOUT_S = 300.0
HEARTBEAT_S = 2.0
# A progress record unrefreshed for STALE_S belongs to a worker that is gone. Several heartbeats fit in it, so that
# a busy disk does not orphan a job; workers on other machines need clocks within a few seconds of the server's.
STALE_S = 30.0
STARTING = "starting Python and importing torch"
STOPPED = "the trace worker stopped while this trace ran; ask again"

Command = Callable[[str], Sequence[str]]


def scenario_of(query: str) -> Scenario:
    """The scenario of a canonical query (``dp=8&model=llama-2-7b``); a bad one raises ScenarioError."""
    return parse_scenario(dict(parse_qsl(query, keep_blank_values=True)), allow_unknown=False)


def scenario_flags(s: Scenario) -> list[str]:
    """The scenario's CLI flags, one ``--flag=value`` per input that differs from its default (the
    canonical query's fields): ``=`` keeps a value that starts with ``-`` (a name) a value."""
    return [f"{FIELD_BY_NAME[name].flag}={value}" for name, value in s.non_default_items()]


def trace_argv(query: str) -> list[str]:
    """``python -m app.cli trace --format json <the scenario's flags>``, with this very interpreter."""
    return [sys.executable, "-m", "app.cli", "trace", "--format", "json", *scenario_flags(scenario_of(query))]


@cache
def cache_version() -> str:
    """The lab's version and a digest of :data:`MODELLED_BY`'s sources: the key of cached traces, so that a cached
    trace never shows modelled figures that the lab no longer computes, and what a worker checks a job against (a
    worker running other code would report other modelled figures)."""
    digest = hashlib.sha256()
    for folder in MODELLED_BY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:12]}"


def _digest(version: str, query: str) -> str:
    return hashlib.sha256(f"{version}\0{query}".encode()).hexdigest()[:24]


def record_key(kind: str, version: str, query: str) -> str:
    """The queue storage's key of a scenario's ``progress`` or ``end`` record."""
    return f"{kind}.{_digest(version, query)}"


class TraceRunner:
    """The trace task on ``huey``, registered as :data:`TASK_NAME` (the web side makes its jobs with
    :attr:`task`; a worker's consumer runs :meth:`run`)."""

    def __init__(
        self,
        huey: Huey,
        version: str,
        command: Command = trace_argv,
        *,
        timeout_s: float = TIMEOUT_S,
        heartbeat_s: float = HEARTBEAT_S,
        cwd: Path | None = ROOT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.huey, self.version, self.command = huey, version, command
        self.timeout_s, self.heartbeat_s, self.cwd, self.clock = timeout_s, heartbeat_s, cwd, clock
        self._stops: dict[str, threading.Event] = {}  # a running task's id → the event that kills its trace
        self.task: TaskWrapper = huey.task(name=TASK_NAME, context=True)(self.run)
        huey.signal(signals.SIGNAL_INTERRUPTED)(self._interrupted)

    def job(self, query: str) -> Task:
        """A job for ``query`` (not yet queued): its id is known before it is."""
        return self.task.s(query, self.version)

    def record(self, kind: str, query: str) -> dict[str, Any] | None:
        """The scenario's ``progress`` record (``task``, ``done``, ``total``, ``step``, ``updated``) or its ``end``
        record (``task``, then ``report`` and ``summary``, or ``error`` and ``gone`` for a stopped worker), if any."""
        record = self.huey.get(record_key(kind, self.version, query), peek=True)
        return record if isinstance(record, dict) else None

    def forget(self, kind: str, query: str, task_id: str) -> None:
        """Drop the scenario's record of ``kind`` if it is ``task_id``'s (a newer task's is left alone)."""
        record = self.record(kind, query)
        if record is not None and record.get("task") == task_id:
            self.huey.delete(record_key(kind, self.version, query))

    # ------------------------------------------------------------------ the worker's side

    def run(self, query: str, version: str, task: Task) -> None:
        """Trace ``query``; the end record is written first and the progress record dropped after it, so that a
        reader that finds neither record's news in between cannot happen (it reads progress, then the end)."""
        if version != self.version:
            end: dict[str, Any] = {"error": f"this trace worker runs lab {self.version}, the server {version}"}
        else:
            lock = self.huey.lock_task(_digest(version, query))
            if not self._acquire(lock, query):  # a live worker is tracing the same scenario for an older job
                end = {"error": "another trace worker is tracing this scenario just now; ask again in a moment"}
            else:
                try:
                    end = self._traced(query, task.id)
                finally:
                    lock.release()
        self.huey.put(record_key("end", version, query), {**end, "task": task.id})
        self.forget("progress", query, task.id)

    def _acquire(self, lock: TaskLock, query: str) -> bool:
        """The scenario's lock, taken over from a worker that died holding it (its progress stale)."""
        try:
            return bool(lock.acquire())
        except TaskLockedException:
            record = self.record("progress", query)
            if record is not None and self.clock() - float(record["updated"]) <= STALE_S:
                return False
            lock.clear()
            try:
                return bool(lock.acquire())
            except TaskLockedException:
                return False

    def _traced(self, query: str, task_id: str) -> dict[str, Any]:
        stop = self._stops[task_id] = threading.Event()
        done, step = 0, STARTING

        def record() -> None:
            value = {"task": task_id, "done": done, "total": STEPS, "step": step, "updated": self.clock()}
            try:
                self.huey.put(record_key("progress", self.version, query), value)
            except Exception:
                log.warning("the progress of %s could not be written", query, exc_info=True)

        def heard(line: str) -> None:
            nonlocal done, step
            if (finished := progress_step(line)) is not None:
                done, step = min(done + 1, STEPS), finished
                record()

        try:
            record()
            outcome = run_process(
                self.command(query), timeout_s=self.timeout_s, on_line=heard, on_tick=record,
                tick_s=self.heartbeat_s, cwd=self.cwd, stop=stop,
            )  # fmt: skip
        except Exception as exc:  # a job's failure is the job's, never the worker's
            log.exception("the trace of %s could not be run", query)  # the details (paths) stay in the log
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            return {"error": f"the trace could not be run ({why})"}
        finally:
            self._stops.pop(task_id, None)
        if stop.is_set():
            return {"error": STOPPED, "gone": True}
        if outcome.returncode != 0:
            return {"error": error_message(outcome, self.timeout_s)}
        return _ended(outcome.stdout)

    def _interrupted(self, signal: str, task: Task) -> None:
        """huey's consumer is stopping with ``task`` unfinished: its trace is killed and the job said to be gone."""
        if (stop := self._stops.get(task.id)) is not None:
            stop.set()
        query, version = task.args
        self.huey.put(record_key("end", version, query), {"error": STOPPED, "gone": True, "task": task.id})


def _ended(stdout: str) -> dict[str, Any]:
    """The end record of a trace that exited 0: its report (bounded) and summary, or why it has none."""
    try:
        report = json.loads(stdout)
    except ValueError:
        report = None
    if not isinstance(report, dict):
        return {"error": "the trace printed no JSON report"}
    try:
        summary = summarise(report)
    except (KeyError, TypeError, ValueError) as exc:
        return {"error": f"the trace's report lacks what the page shows ({exc!r})"}
    return {"report": bounded_report(stdout), "summary": summary}
