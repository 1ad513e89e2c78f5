"""The page's trace jobs: one worker process runs one trace at a time, the rest wait in a bounded FIFO.

:class:`TraceQueue` takes a scenario's canonical query, answers at once from the store when the trace is
finished or already queued or running (here or in another worker: the same query never runs twice),
refuses with :class:`QueueFull` when its queue is full, and otherwise queues it. One thread per queue,
started by the first job, runs the jobs in order, each as a child process (:mod:`app.trace.process`)
with a time limit. Everything a page shows of a job is in the store (:mod:`app.trace.store`).

No web stack and no torch here: the command that runs a trace is given to the queue (the web app
gives :func:`trace_argv`; the tests give small fake commands).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from app import __version__
from app.ledger.models.reference import resolve
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.scenario.fields import FIELD_BY_NAME
from app.trace.process import STEPS, error_message, progress_step, run_process
from app.trace.store import HEARTBEAT_S, JobStatus, StoreError, TraceStore, summarise

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
# The code a report's modelled figures come from (the ledger, the receipts' FSDP2 section, the trace's
# own report): a change to any of it makes every cached trace out of date.
MODELLED_BY = ("app/ledger", "app/receipts", "app/trace")
MAX_QUEUED = 8
PER_CLIENT = 2  # traces one client (address) may have waiting or running at once; the others keep their place
RETRY_AFTER_S = 120.0  # a failed trace is not run again sooner: a scenario that fails does not hold the queue
# The page's trace budget, in parameter tensors. On fake tensors a trace's time follows the modules and tensors it
# runs, not their sizes or the tokens (measured on this 2-core machine, tiny Llama layers of 9 tensors: 16 layers
# 9.2 s, 32 21.9 s, 48 37.9 s; 2 layers at s 512 to 262,144 all 1.2-3 s): about 200 s of the 300 s limit. The CLI
# has no budget.
BUDGET_TENSORS = 1_300
TIMEOUT_S = 300.0
STARTING = "starting Python and importing torch"

Command = Callable[[str], Sequence[str]]


class QueueFull(Exception):
    """This worker already has its :attr:`TraceQueue.max_queued` traces waiting."""

    def __init__(self, max_queued: int) -> None:
        self.max_queued = max_queued
        super().__init__(
            f"{max_queued} traces are already waiting for this server; try again in a few minutes "
            "(or run the command below in a terminal)"
        )


class ClientBusy(Exception):
    """This client already has :attr:`TraceQueue.per_client` traces waiting or running here."""

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


def trace_tensors(query: str) -> int:
    """The parameter tensors a trace of ``query`` runs (its model's, each expert's counted): its cost here."""
    s = scenario_of(query)
    return resolve(s.model).inventory.tensor_count if s.model else 0


class RetryLater(Exception):
    """The scenario's trace failed moments ago: it is not run again before :data:`RETRY_AFTER_S`."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        super().__init__(f"this trace failed moments ago; it can be tried again in {seconds} s")


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
    """The store's version key: the lab's version and a digest of :data:`MODELLED_BY`'s sources, so that
    a cached trace never shows modelled figures that the lab no longer computes (a change between
    releases, or in a checkout, would otherwise keep the old ones under the same version)."""
    digest = hashlib.sha256()
    for folder in MODELLED_BY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:12]}"


class TraceQueue:
    """One worker's trace jobs (see the module docstring). ``close`` stops its thread (tests)."""

    def __init__(
        self,
        store: TraceStore,
        command: Command = trace_argv,
        *,
        max_queued: int = MAX_QUEUED,
        per_client: int = PER_CLIENT,
        retry_after_s: float = RETRY_AFTER_S,
        budget_tensors: int = BUDGET_TENSORS,
        timeout_s: float = TIMEOUT_S,
        heartbeat_s: float = HEARTBEAT_S,
        cwd: Path | None = ROOT,
    ) -> None:
        self.store = store
        self.command = command
        self.max_queued = max_queued
        self.per_client = per_client
        self.retry_after_s = retry_after_s
        self.budget_tensors = budget_tensors
        self.timeout_s = timeout_s
        self.heartbeat_s = heartbeat_s
        self.cwd = cwd
        self.owner = f"{uuid.uuid4().hex[:12]}"  # this queue, in the store's rows (workers share the file)
        self._lock = threading.Condition()
        self._pending: deque[str] = deque()
        self._clients: dict[str, str] = {}  # a waiting or running query → the client that asked for it
        self._thread: threading.Thread | None = None
        self._closed = False
        self._stop = threading.Event()  # kills the running trace when the queue closes

    def status(self, query: str) -> JobStatus | None:
        """The job of ``query`` as the store has it: one lookup, no work started."""
        return self.store.get(query)

    def submit(self, query: str, client: str = "") -> JobStatus:
        """Queue the trace of ``query`` for ``client`` (its address), or join the one that is finished, queued or
        running. Refused: a trace that failed less than :attr:`retry_after_s` ago (:class:`RetryLater`), a model
        past the page's trace budget (:class:`TooLarge`), a client
        with :attr:`per_client` traces already waiting or running here (:class:`ClientBusy`), a full queue."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the trace queue is closed")
            existing = self.store.get(query)
            if existing is not None and existing.state != "failed":
                return existing
            wait = 0.0 if existing is None or existing.gone else self.retry_after_s - self.store.age(existing)
            if wait > 0:  # a trace that failed by itself moments ago (one whose worker stopped may run at once)
                raise RetryLater(int(wait) + 1)
            if (tensors := trace_tensors(query)) > self.budget_tensors:
                raise TooLarge(tensors, self.budget_tensors)
            if sum(1 for asker in self._clients.values() if asker == client) >= self.per_client:
                raise ClientBusy(self.per_client)
            if len(self._pending) >= self.max_queued:
                raise QueueFull(self.max_queued)
            joined = self.store.claim(query, self.owner, place=len(self._pending) + 1)
            if joined is not None:  # another worker took it between the two looks
                return joined
            self._pending.append(query)
            self._clients[query] = client
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="zero3-lab trace jobs", daemon=True)
                self._thread.start()
            self._lock.notify()
            return JobStatus(query, "queued", place=len(self._pending))

    def close(self, timeout: float = 10) -> None:
        """Stop taking jobs; the thread finishes the running trace's bookkeeping and exits."""
        with self._lock:
            self._closed = True
            self._stop.set()
            dropped = list(self._pending)
            self._pending.clear()
            self._clients.clear()
            self._lock.notify_all()
            thread = self._thread
        for query in dropped:  # said at once, rather than left to go stale
            with suppress(StoreError):
                self.store.fail(query, self.owner, "the server stopped before this trace ran; ask again")
        if thread is not None:
            thread.join(timeout)

    # ------------------------------------------------------------------ the worker thread

    def _next(self) -> tuple[str, list[str]] | None:
        """The next job and the ones still waiting behind it, once there is one (None: closed)."""
        with self._lock:
            while not self._pending and not self._closed:
                self._lock.wait()
            if self._closed:
                return None
            query = self._pending.popleft()
            return query, list(self._pending)

    def _work(self) -> None:
        while (job := self._next()) is not None:
            query, waiting = job
            try:
                self.store.start(query, self.owner, STEPS, STARTING, waiting)
                self._run(query)
            except Exception as exc:  # a job's failure is the job's, never the thread's
                log.exception("the trace of %s could not be run", query)  # the details (paths) stay in the log
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                with suppress(Exception):  # the store itself may be what failed
                    self.store.fail(query, self.owner, f"the trace could not be run ({why})")
            finally:
                with self._lock:
                    self._clients.pop(query, None)  # its client may ask for another

    def _run(self, query: str) -> None:
        done = 0

        def heard(line: str) -> None:
            nonlocal done
            step = progress_step(line)
            if step is not None:
                done = min(done + 1, STEPS)
                with suppress(StoreError):  # a missed progress write must not stop the trace
                    self.store.progress(query, self.owner, done, STEPS, step)

        def tick() -> None:
            with suppress(StoreError):  # nor a missed heartbeat (the next one may land)
                self.store.heartbeat(self.owner)

        outcome = run_process(
            self.command(query),
            timeout_s=self.timeout_s,
            on_line=heard,
            on_tick=tick,
            tick_s=self.heartbeat_s,
            cwd=self.cwd,
            stop=self._stop,
        )
        if self._stop.is_set():
            self.store.fail(query, self.owner, "the server stopped while the trace ran; ask again")
            return
        if outcome.returncode != 0:
            self.store.fail(query, self.owner, error_message(outcome, self.timeout_s))
            return
        report = _report(outcome.stdout)
        if report is None:
            self.store.fail(query, self.owner, "the trace printed no JSON report")
            return
        try:
            summary = summarise(report)
        except (KeyError, TypeError, ValueError) as exc:
            self.store.fail(query, self.owner, f"the trace's report lacks what the page shows ({exc!r})")
            return
        self.store.finish(query, self.owner, outcome.stdout, summary)


def _report(stdout: str) -> dict[str, Any] | None:
    """The JSON object a successful trace printed, or None."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return None
    return report if isinstance(report, dict) else None
