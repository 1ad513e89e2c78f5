"""``python -m tests.support.fake_worker <queue url> <folder> <mode>``: ``zero3-lab worker`` as it runs
(:func:`app.trace.worker.run_worker`: huey's consumer, watching ``ZERO3_LAB_WORKER_PARENT``), its traces the fake of
:mod:`tests.support.trace_fakes` in ``mode`` (``ok``, ``block``, ``hang`` …) under the lab version ``v``."""

from __future__ import annotations

import sys
from pathlib import Path

from app.trace.queue import make_huey
from app.trace.runner import TraceRunner
from app.trace.worker import run_worker
from tests.support.trace_fakes import fake_command


def main(argv: list[str]) -> int:
    url, folder, mode = argv
    runner = TraceRunner(make_huey(url), "v", fake_command(Path(folder), default=mode), heartbeat_s=0.05, cwd=None)
    return run_worker(runner, 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
