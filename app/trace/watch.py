"""A process that must not outlive its parent ends once its parent is gone.

A page's trace runs in a session of its own (so that a time limit can kill everything it started), which also
means a worker killed outright (``kill -9``, an out-of-memory kill) would leave its trace running with nobody to
read it; a worker that ``serve`` started would go on taking jobs after ``serve`` died. The parent passes its pid in
an environment variable (``ZERO3_LAB_TRACE_PARENT`` for a trace, ``ZERO3_LAB_WORKER_PARENT`` for a worker); the
child watches it and ends itself once that parent is gone (it is then reparented). Standard library only; a
terminal's trace or worker has no such variable and is not watched.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from app.trace.process import PARENT_ENV

POLL_S = 1.0


def watch_parent(
    env: str = PARENT_ENV, exit_now: Callable[[int], None] = os._exit, poll_s: float = POLL_S
) -> threading.Thread | None:
    """When ``env`` names this process's parent, a daemon thread that ends it (status 3) once that parent is gone."""
    raw = os.environ.get(env, "")
    if not raw.isdigit():
        return None
    parent = int(raw)

    def run() -> None:
        stop = threading.Event()
        while not stop.wait(poll_s):
            if os.getppid() != parent:
                exit_now(3)
                return

    thread = threading.Thread(target=run, name=f"zero3-lab: watch {env}", daemon=True)
    thread.start()
    return thread
