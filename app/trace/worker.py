"""Trace workers: ``zero3-lab worker`` runs huey's consumer on the trace queue, and ``zero3-lab serve`` starts and
supervises one of its own (the embedded default), so that the README's two commands stay the whole set-up.

A worker is huey's own consumer (:meth:`huey.Huey.create_consumer`) with thread workers: each thread waits on its
trace's child process (:mod:`app.trace.runner`), so threads cost nothing while a trace runs and torch never loads in
the worker itself. It stops as huey's consumer does (SIGINT: after its traces; SIGTERM: at once, its traces killed
and their jobs said to be stopped).

Nothing outlives its parent. A trace child ends once its worker is gone (:mod:`app.trace.watch`); a worker that
``serve`` started ends once ``serve`` is gone; ``serve`` starts its worker again, after a pause, if it stops by
itself. Standard library and huey only.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from huey.consumer import Consumer

from app.trace.runner import TraceRunner
from app.trace.watch import watch_parent

log = logging.getLogger("zero3_lab.trace.worker")
SERVE_ENV = "ZERO3_LAB_WORKER_PARENT"  # the pid of the serve that started this worker, which it watches
RESTART_PAUSE_S = (1.0, 30.0)  # a worker that stops by itself is started again after 1 s, doubling up to 30 s
STOP_WAIT_S = 5.0  # how long serve waits for its worker to stop before killing it
MAX_DELAY_S = 1.0  # an idle worker looks at a SQLite queue this often
ROOT = Path(__file__).resolve().parents[2]


def consumer_for(runner: TraceRunner, workers: int, max_delay_s: float = MAX_DELAY_S) -> Consumer:
    """huey's consumer of ``runner``'s queue: ``workers`` threads, each looking for a job at least every
    ``max_delay_s`` while idle (a Redis queue hands a job over at once; huey's default is 10 s)."""
    return runner.huey.create_consumer(
        workers=workers, worker_type="thread", periodic=False, initial_delay=min(0.1, max_delay_s),
        max_delay=max_delay_s,
    )  # fmt: skip


def run_worker(runner: TraceRunner, workers: int) -> int:
    """Run huey's consumer for ``runner``'s task with ``workers`` threads until it is stopped (main thread only:
    the consumer sets its signal handlers)."""
    watch_parent(SERVE_ENV)
    consumer_for(runner, workers).run()
    return 0


class Supervisor:
    """One ``zero3-lab worker`` child of ``serve``, started again when it stops by itself."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self._stopping = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._keep, name="zero3-lab: trace worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, SERVE_ENV: str(os.getpid())}
        return subprocess.Popen(self.argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)  # noqa: S603 - our own argv

    def _keep(self) -> None:
        pause = RESTART_PAUSE_S[0]
        while not self._stopping.is_set():
            self._proc = proc = self._spawn()
            code = proc.wait()
            if self._stopping.is_set():
                return
            log.warning("the trace worker stopped (status %s); starting it again in %g s", code, pause)
            if self._stopping.wait(pause):
                return
            pause = min(pause * 2, RESTART_PAUSE_S[1])

    def stop(self) -> None:
        """SIGTERM (huey's consumer stops at once, its traces killed), then SIGKILL after :data:`STOP_WAIT_S`."""
        self._stopping.set()
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def worker_argv(workers: int) -> list[str]:
    return [sys.executable, "-m", "app.cli", "worker", "--workers", str(workers)]


@contextmanager
def supervised_workers(workers: int) -> Iterator[Supervisor | None]:
    """``serve``'s own worker with ``workers`` threads while the block runs (none for 0)."""
    if workers == 0:
        yield None
        return
    supervisor = Supervisor(worker_argv(workers))
    supervisor.start()
    try:
        yield supervisor
    finally:
        supervisor.stop()
