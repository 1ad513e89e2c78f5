"""The command line: ``zero3-lab estimate`` prints a receipt; ``serve`` runs the lab; ``layouts``, ``trace``,
``reconcile`` and ``probe`` come from their own modules.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from app.cli.estimate import add_estimate_parser, run_estimate
from app.cli.layouts import add_layouts_parser, run_layouts
from app.cli.observed import add_observed_parsers, run_observed_command
from app.cli.scenario_args import Parser
from app.cli.trace import add_trace_parser, run_trace_command  # imports no torch until a trace runs
from app.cli.worker import MAX_WORKERS, add_worker_parser, run_worker_command


def _bounded(low: int, high: int, env: str) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``; its message names the flag's variable too, since
    the value may have come from there."""

    def parse(text: str) -> int:
        value = int(text) if text.strip().isdigit() else low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from {low} to {high} (the flag or {env})")
        return value

    return parse


def _serve_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    # Each default may come from the environment (a container sets them once; its health check reads the same port).
    p = sub.add_parser("serve", help="run the browser lab")
    p.add_argument("--host", default=os.environ.get("ZERO3_LAB_HOST", "").strip() or "127.0.0.1",
                   help="the address to listen on (default $ZERO3_LAB_HOST, else 127.0.0.1)")  # fmt: skip
    p.add_argument("--port", type=_bounded(1, 65_535, "ZERO3_LAB_PORT"),
                   default=os.environ.get("ZERO3_LAB_PORT", "").strip() or "8000",
                   help="the port (default $ZERO3_LAB_PORT, else 8000)")  # fmt: skip
    p.add_argument(
        "--workers",
        type=_bounded(1, 64, "ZERO3_LAB_WORKERS"),
        default=os.environ.get("ZERO3_LAB_WORKERS", "").strip() or "1",
        help="worker processes, each with its own app (default $ZERO3_LAB_WORKERS, else 1: enough for one user; more "
        "for bigger rooms)",
    )
    p.add_argument(
        "--trace-workers",
        type=_bounded(0, MAX_WORKERS, "ZERO3_LAB_TRACE_WORKERS"),
        default=os.environ.get("ZERO3_LAB_TRACE_WORKERS", "").strip() or "1",
        metavar=f"0…{MAX_WORKERS}",
        help="trace workers this server starts and supervises (default $ZERO3_LAB_TRACE_WORKERS, else 1; 0 where "
        "`zero3-lab worker` runs elsewhere)",
    )
    p.add_argument("--reload", action="store_true")
    p.add_argument("--no-access-log", action="store_true", help="do not log each request (benchmarks)")


def build_parser() -> Parser:
    parser = Parser(prog="zero3-lab", description="Budget every byte of a ZeRO-3 / FSDP training run.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    add_estimate_parser(sub)
    add_layouts_parser(sub)
    _serve_parser(sub)
    add_trace_parser(sub)
    add_observed_parsers(sub)
    add_worker_parser(sub)
    return parser


def run_serve(args: argparse.Namespace) -> int:
    from app.trace import torch_installed
    from app.trace.queue import check_reachable, queue_url
    from app.trace.store import check_writable, trace_cache_from_env
    from app.trace.worker import supervised_workers
    from app.web.http.server import deadlines, serve

    try:
        deadlines()
        cache = trace_cache_from_env()
        url = queue_url(cache.parent)  # a bad ZERO3_LAB_QUEUE stops serve here, before any worker starts
        if torch_installed():  # traces can run: their cache and queue must be usable (a read-only data volume …)
            check_writable(cache.parent, "ZERO3_LAB_TRACE_CACHE")
            check_reachable(url)
    except ValueError as exc:
        print(f"zero3-lab serve: {exc}", file=sys.stderr)
        return 2
    # without torch the page offers no trace (it says how to install the extra), so a worker would only wait
    with supervised_workers(args.trace_workers if torch_installed() else 0):
        return serve(
            host=args.host, port=args.port, workers=args.workers, reload=args.reload, access_log=not args.no_access_log
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "estimate":
            return run_estimate(args)
        if args.command == "layouts":
            return run_layouts(args)
        if args.command == "trace":
            return run_trace_command(args)
        if args.command == "worker":
            return run_worker_command(args)
        if args.command in ("reconcile", "probe"):
            return run_observed_command(args)
        return run_serve(args)
    except BrokenPipeError:  # e.g. piped into `head`
        return 0
