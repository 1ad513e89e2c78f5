"""A page's trace ends with the worker that started it.

The queue starts each trace in a session of its own (so that a time limit can kill everything it started), which
also means a worker killed outright (``kill -9``, an out-of-memory kill) would leave its trace running with nobody
to read it. The queue passes its pid in ``ZERO3_LAB_TRACE_PARENT``; the trace command watches its parent and ends
itself once that worker is gone (it is then reparented). Standard library only; a terminal's trace has no such
variable and is not watched.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from app.trace.process import PARENT_ENV

POLL_S = 1.0


def watch_parent(exit_now: Callable[[int], None] = os._exit, poll_s: float = POLL_S) -> threading.Thread | None:
    """When this process is a page's trace, a daemon thread that ends it (status 3) once its worker is gone."""
    raw = os.environ.get(PARENT_ENV, "")
    if not raw.isdigit():
        return None
    parent = int(raw)

    def run() -> None:
        stop = threading.Event()
        while not stop.wait(poll_s):
            if os.getppid() != parent:
                exit_now(3)
                return

    thread = threading.Thread(target=run, name="zero3-lab trace: watch the worker", daemon=True)
    thread.start()
    return thread
