"""One trace as a child process: ``zero3-lab trace --format json`` run with a time limit, its progress
lines heard as they come, its report read from standard output.

A child process, not a thread: torch stays out of the server (a trace imports it and builds a model
on fake tensors for seconds to minutes), the server keeps answering, and a trace that overruns its
limit is killed outright, with everything it started (it runs in a session of its own).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# app/cli/trace.py's ProgressLine: off a terminal, one line per finished step ("… building layers 32/32").
PROGRESS = re.compile(r"^zero3-lab trace: (?P<what>.+) (?P<done>\d+)/(?P<of>\d+)$")
ERROR_PREFIX = "zero3-lab: error: "
# The steps ProgressLine reports, in order (app/trace/tracer.py): building and sharding the layers,
# then forward, backward and optimizer step of each of the two iterations.
STEPS = 8
MAX_REPORT_BYTES = 32 * 1024 * 1024  # the largest report read (in characters, all ASCII); an 80-layer model's is < 1 MB
WAIT_SLICE_S = 0.2  # how often a running trace looks at its stop event
STDERR_LINES = 40  # the last lines of stderr kept, for an error message
READER_JOIN_S = 5.0  # how long the output readers may take to finish once the trace and its group are gone


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the child ended: its exit status (None when killed at the time limit), its standard output,
    the last lines of its standard error."""

    returncode: int | None
    stdout: str
    stderr: tuple[str, ...]
    timed_out: bool
    too_long: bool = False  # the report was over MAX_REPORT_BYTES


log = logging.getLogger(__name__)


def progress_step(line: str) -> str | None:
    """The step a progress line says is finished (``iteration 1/2: forward``), else None."""
    match = PROGRESS.match(line)
    if match is None or match["done"] != match["of"]:
        return None
    return match["what"]


def error_message(outcome: Outcome, timeout_s: float) -> str:
    """Why a trace failed, in the trace's own words where it gave some."""
    if outcome.timed_out:
        return f"the trace took longer than {timeout_s:g} s, the lab's limit for one trace, and was stopped"
    if outcome.too_long:
        return f"the trace's report was larger than {MAX_REPORT_BYTES:,} bytes"
    said = [
        line.removeprefix(ERROR_PREFIX).removeprefix("trace: ")
        for line in outcome.stderr
        if line.startswith(ERROR_PREFIX)
    ]
    if said:
        return "; ".join(said)
    # Anything else on stderr is a crash (a traceback, server paths): it goes to the server's log, and the
    # page says only that the trace failed.
    other = [line for line in outcome.stderr if line.strip() and PROGRESS.match(line) is None]
    if not other:
        return f"the trace exited with status {outcome.returncode}"
    log.warning("a trace exited with status %s; its last stderr lines:\n%s", outcome.returncode, "\n".join(other))
    return f"the trace exited with status {outcome.returncode} (its output is in the server's log)"


PARENT_ENV = "ZERO3_LAB_TRACE_PARENT"


def _kill(proc: subprocess.Popen[str]) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)  # the child and anything it started
        else:  # pragma: no cover - not POSIX
            proc.kill()
    except ProcessLookupError:
        pass


def _wait(
    proc: subprocess.Popen[str],
    timeout_s: float,
    on_tick: Callable[[], None],
    tick_s: float,
    stop: threading.Event | None,
) -> bool:
    """Wait for ``proc``, ticking; kill it at the time limit or once ``stop`` is set. True: killed."""
    start = time.monotonic()
    deadline, next_tick = start + timeout_s, start + tick_s
    while True:
        now = time.monotonic()
        if now >= deadline or (stop is not None and stop.is_set()):
            _kill(proc)
            proc.wait()
            return True
        if now >= next_tick:
            on_tick()
            next_tick = now + tick_s
        try:
            proc.wait(timeout=max(0.0, min(WAIT_SLICE_S, next_tick - now, deadline - now)))
            return False
        except subprocess.TimeoutExpired:
            pass


class _Readers:
    """Two threads that empty a child's pipes as it writes: its whole standard output (up to
    :data:`MAX_REPORT_BYTES`, then drained and dropped) and its standard error line by line."""

    def __init__(self, proc: subprocess.Popen[str], on_line: Callable[[str], None]) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.stdout, self.stderr = proc.stdout, proc.stderr
        self.on_line = on_line
        self.out: list[str] = []
        self.too_long = threading.Event()
        self.err: deque[str] = deque(maxlen=STDERR_LINES)
        self.threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self.threads:
            reader.start()

    def _read_stdout(self) -> None:
        text = self.stdout.read(MAX_REPORT_BYTES + 1)
        if len(text) > MAX_REPORT_BYTES:
            self.too_long.set()
            while self.stdout.read(1 << 16):  # drain, so that the child is not blocked writing
                pass
        else:
            self.out.append(text)

    def _read_stderr(self) -> None:
        for raw in self.stderr:
            line = raw.rstrip("\r\n")
            self.err.append(line)
            self.on_line(line)

    def close(self) -> None:
        for reader in self.threads:
            reader.join(timeout=READER_JOIN_S)
        self.stdout.close()
        self.stderr.close()


def _start(argv: Sequence[str], cwd: Path | None) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - argv is built from a validated scenario, no shell
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        cwd=cwd,
        # each progress line as it is written; the worker's pid, which the trace watches (app.trace.watch)
        env={**os.environ, "PYTHONUNBUFFERED": "1", PARENT_ENV: str(os.getpid())},
        start_new_session=True,
    )


def run_process(
    argv: Sequence[str],
    *,
    timeout_s: float,
    on_line: Callable[[str], None],
    on_tick: Callable[[], None],
    tick_s: float,
    cwd: Path | None = None,
    stop: threading.Event | None = None,
) -> Outcome:
    """Run ``argv``; ``on_line`` hears each line of its stderr as it comes, ``on_tick`` is called every
    ``tick_s`` while it runs (the job's heartbeat). Killed after ``timeout_s``, or once ``stop`` is set
    (the queue closing), which counts as a timeout."""
    proc = _start(argv, cwd)
    readers = _Readers(proc, on_line)
    try:
        timed_out = _wait(proc, timeout_s, on_tick, tick_s, stop)
    except BaseException:  # whatever stops the wait, no trace is left running unwatched
        _kill(proc)
        proc.wait()
        raise
    # Nothing a trace starts may outlive it: a process it left behind that still holds the pipes would
    # keep the readers (and so the queue) waiting past any time limit.
    _kill(proc)
    readers.close()
    too_long = readers.too_long.is_set()
    return Outcome(
        returncode=None if timed_out else proc.returncode,
        stdout="" if too_long else "".join(readers.out),
        stderr=tuple(readers.err),
        timed_out=timed_out,
        too_long=too_long,
    )
