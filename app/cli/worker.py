"""``zero3-lab worker``: trace workers for the page's trace jobs, on the queue ``ZERO3_LAB_QUEUE`` names.

``zero3-lab serve`` starts one of its own (``--trace-workers``, default 1), on the embedded SQLite queue unless
``ZERO3_LAB_QUEUE`` says otherwise. To scale out, put the queue on Redis and run this command on any machine that
reaches it (docs/deploy.md). Stop it with Ctrl-C (after its traces) or SIGTERM (at once).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

MAX_WORKERS = 16


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to {MAX_WORKERS}")
    return value


def add_worker_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "worker",
        help="run trace workers for the page's trace jobs (huey's consumer on the queue ZERO3_LAB_QUEUE names)",
        description="Take the page's trace jobs from the trace queue and run each with `zero3-lab trace` (the "
        "trace extra), one per thread. The queue is ZERO3_LAB_QUEUE (redis://host:port/db, sqlite:///path), by "
        "default the SQLite file beside the trace cache (ZERO3_LAB_TRACE_CACHE).",
    )
    p.add_argument("--workers", type=_workers, default=1, help=f"traces run at once (1 … {MAX_WORKERS}, default 1)")


def run_worker_command(args: argparse.Namespace) -> int:
    from app.trace import INSTALL_HINT, torch_installed
    from app.trace.queue import check_reachable, describe, make_huey, queue_url
    from app.trace.runner import TraceRunner, cache_version
    from app.trace.store import trace_cache_from_env
    from app.trace.worker import run_worker

    try:
        url = queue_url(trace_cache_from_env().parent)
        check_reachable(url)  # a worker writes only to its queue (the web server keeps the trace cache)
    except ValueError as exc:
        print(f"zero3-lab worker: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log = logging.getLogger("zero3_lab")
    log.info("trace worker: %d thread(s) on %s, lab %s", args.workers, describe(url), cache_version())
    if not torch_installed():
        log.warning("every trace here will fail: %s", INSTALL_HINT)
    return run_worker(TraceRunner(make_huey(url), cache_version()), args.workers)
