"""A page's trace ends with its worker: killed outright (``kill -9``), the worker leaves no trace running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from app.trace.process import PARENT_ENV
from app.trace.watch import watch_parent
from tests.support.paths import ROOT

# A "worker" that starts a "trace" as the queue does (its own session, the worker's pid in the environment); the
# trace only watches its parent and sleeps.
WORKER = f"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import time; from app.trace.watch import watch_parent; watch_parent(poll_s=0.05); time.sleep(60)"],
    env={{**os.environ, "{PARENT_ENV}": str(os.getpid())}}, start_new_session=True)
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) counts as gone
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_trace_ends_when_its_worker_is_killed_outright() -> None:
    worker = subprocess.Popen([sys.executable, "-c", WORKER], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    with worker.stdout:
        child = int(worker.stdout.readline())
    try:
        assert _alive(child)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the trace outlived its worker"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_terminals_trace_is_not_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PARENT_ENV, raising=False)
    assert watch_parent(exit_now=lambda status: None) is None


def test_the_watch_ends_the_trace_once_the_parent_is_not_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PARENT_ENV, str(os.getppid() + 1_000_000))  # a parent this process does not have
    ended = threading.Event()
    statuses: list[int] = []

    def exit_now(status: int) -> None:
        statuses.append(status)
        ended.set()

    thread = watch_parent(exit_now=exit_now, poll_s=0.01)
    assert thread is not None and ended.wait(5)
    assert statuses == [3]
