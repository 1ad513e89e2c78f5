"""Trace jobs for the tests: a :class:`TraceQueue` on its own SQLite queue and cache in a test's folder, its jobs
run by huey's own consumer (:func:`app.trace.worker.consumer_for`, as ``zero3-lab worker`` runs it) in this process,
each trace the fake child of :mod:`tests.support.trace_fakes`.

huey's consumer sets signal handlers when it starts (it expects a process of its own): the test process's are put
back at once, and the consumer is stopped as ``zero3-lab worker`` stops on SIGTERM (its running traces killed and
their jobs said to be stopped), so that no fake trace outlives its test.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from huey import Huey
from huey.consumer import Consumer

from app.trace.jobs import TraceQueue
from app.trace.queue import make_huey, release
from app.trace.runner import TraceRunner
from app.trace.store import TraceStore
from app.trace.worker import consumer_for
from tests.support.trace_fakes import fake_command

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def start_consumer(runner: TraceRunner, workers: int = 1) -> Consumer:
    saved = {signum: signal.getsignal(signum) for signum in SIGNALS}
    consumer = consumer_for(runner, workers, max_delay_s=0.05)
    try:
        consumer.start()
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    return consumer


def stop_consumer(consumer: Consumer) -> None:
    """As huey's consumer stops on SIGTERM: the flag set, the unfinished tasks told they were interrupted."""
    consumer.stop(graceful=False)
    consumer.huey.notify_interrupted_tasks()
    for _, thread in consumer.worker_threads:
        thread.join(10)


class Jobs:
    """Makes trace queues in ``folder`` and stops their consumers (and releases their storages' connections: a
    Redis socket left to the collector warns in whichever later test collects it) at the end of the test."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.consumers: list[Consumer] = []
        self.hueys: list[Huey] = []

    def __call__(
        self,
        modes: dict[str, str] | None = None,
        *,
        store: TraceStore | None = None,
        queue_file: Path | None = None,
        queue_url: str | None = None,
        version: str = "v",
        timeout_s: float = 300.0,
        clock: Callable[[], float] | None = None,
        workers: int = 1,
        **options: Any,
    ) -> TraceQueue:
        """A queue of fake traces with a running consumer; one client may queue many and a failure may be retried
        at once, unless ``options`` say otherwise (the tests of those limits)."""
        store = store or TraceStore(self.folder / "cache" / "traces.sqlite3", version)
        huey = make_huey(queue_url or f"sqlite:///{queue_file or self.folder / 'queue' / 'queue.sqlite3'}")
        self.hueys.append(huey)
        extra = {} if clock is None else {"clock": clock}
        runner = TraceRunner(huey, store.version, fake_command(self.folder, modes), timeout_s=timeout_s,
                             heartbeat_s=0.05, cwd=None, **extra)  # fmt: skip
        if workers:
            self.consumers.append(start_consumer(runner, workers))
        return TraceQueue(store, runner, **{"per_client": 100, "retry_after_s": 0.0, **options})

    def stop(self) -> None:
        while self.consumers:
            stop_consumer(self.consumers.pop())
        while self.hueys:
            release(self.hueys.pop())


@contextmanager
def jobs_in(folder: Path) -> Iterator[Jobs]:
    jobs = Jobs(folder)
    try:
        yield jobs
    finally:
        jobs.stop()
