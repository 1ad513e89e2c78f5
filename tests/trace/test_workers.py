"""Trace workers as processes of their own: ``zero3-lab worker`` (huey's consumer; here with fake traces, through
tests/support/fake_worker.py) on the SQLite queue, killed outright or stopped, and ``serve``'s supervisor, which
starts its worker again when it dies."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.trace.jobs import LOST, TraceQueue
from app.trace.runner import STALE_S, STOPPED
from app.trace.worker import SERVE_ENV, Supervisor
from tests.support.trace_fakes import pids, runs, wait_for
from tests.support.trace_queue import Jobs

ROOT = Path(__file__).resolve().parents[2]
A, B = "dp=2", "dp=4"


def worker_argv(url: str, folder: Path, mode: str) -> list[str]:
    return [sys.executable, "-m", "tests.support.fake_worker", url, str(folder), mode]


@pytest.fixture
def web(jobs: Jobs, tmp_path: Path) -> TraceQueue:
    """The web side of a queue in ``tmp_path`` with no consumer in this process: a worker process runs its jobs."""
    return jobs(queue_file=tmp_path / "queue.sqlite3", workers=0)


@pytest.fixture
def worker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[bytes]]:
    mode = getattr(request, "param", "block")
    proc = subprocess.Popen(worker_argv(f"sqlite:///{tmp_path / 'queue.sqlite3'}", tmp_path, mode), cwd=ROOT)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def state(queue: TraceQueue, query: str) -> str | None:
    status = queue.status(query)
    return None if status is None else status.state


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:  # a zombie waits only to be reaped
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_a_worker_killed_outright_takes_its_trace_with_it_and_the_job_reads_as_failed(
    web: TraceQueue, worker: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    web.submit(A)
    wait_for(lambda: state(web, A) == "running" and pids(tmp_path))
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    trace = pids(tmp_path)[0]
    wait_for(lambda: not alive(trace))  # the trace watched its worker, and ended with it
    real = web.store.clock
    web.store.clock = lambda: real() + STALE_S + 1  # no progress lands once the worker is gone
    gone = web.status(A)
    assert gone is not None and (gone.state, gone.gone, gone.error) == ("failed", True, LOST)  # not "running" for ever


@pytest.mark.parametrize("worker", ["hang"], indirect=True)
def test_a_worker_stopped_by_sigterm_kills_its_trace_and_says_so(
    web: TraceQueue, worker: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    web.submit(A)
    web.submit(B)
    wait_for(lambda: state(web, A) == "running" and pids(tmp_path))
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0
    status = web.status(A)
    assert status is not None and (status.state, status.error) == ("failed", STOPPED)
    assert web.retry_in(status) == 0  # nothing in the scenario failed: it may be asked again at once
    wait_for(lambda: not alive(pids(tmp_path)[0]))
    assert state(web, B) == "queued"  # still on the queue for the next worker


def test_serves_supervisor_starts_its_worker_again_when_it_dies(web: TraceQueue, tmp_path: Path) -> None:
    supervisor = Supervisor(worker_argv(f"sqlite:///{tmp_path / 'queue.sqlite3'}", tmp_path, "ok"))
    supervisor.start()
    try:
        web.submit(A)
        wait_for(lambda: state(web, A) == "finished")
        first = supervisor._proc
        assert first is not None and first.poll() is None
        first.kill()  # an out-of-memory kill, say
        web.submit(B)
        wait_for(lambda: state(web, B) == "finished", timeout=30)  # run by the worker started again
        assert supervisor._proc is not first and runs(tmp_path) == [A, B]
    finally:
        supervisor.stop()
    assert supervisor._proc is not None and supervisor._proc.poll() is not None


def test_a_worker_ends_with_the_serve_that_started_it(tmp_path: Path) -> None:
    """``serve`` killed outright: its worker sees it gone and ends (its traces follow it, as above)."""
    url = f"sqlite:///{tmp_path / 'queue.sqlite3'}"
    env = f"{{**os.environ, {SERVE_ENV!r}: str(os.getpid())}}"
    code = (
        "import os, subprocess, sys, time; "
        f"p = subprocess.Popen({worker_argv(url, tmp_path, 'ok')!r}, env={env}); "
        "print(p.pid, flush=True); time.sleep(60)"
    )
    serve = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert serve.stdout is not None
    worker_pid = int(serve.stdout.readline())
    time.sleep(0.5)
    assert alive(worker_pid)
    serve.kill()
    serve.wait()
    serve.stdout.close()
    wait_for(lambda: not alive(worker_pid), timeout=20)
