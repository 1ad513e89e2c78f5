"""``zero3-lab trace``: the scenario flags of ``estimate``, a trace instead of a receipt.

Importing this module never imports torch (``estimate`` builds its parser with this subcommand in
it); the trace imports torch when it runs, and without the extra it says how to install it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from app.cli.scenario_args import add_scenario_arguments, scenario_from_args
from app.trace import INSTALL_HINT, import_torch, torch_installed
from app.trace.setup import TraceSetupError, trace_setup
from app.trace.watch import watch_parent


def add_trace_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "trace",
        help="trace one FSDP2 step of the scenario's model with PyTorch's FSDPMemTracker on fake tensors "
        "(needs the trace extra)",
        description="Build the scenario's model on fake tensors, shard it with fully_shard over a fake process "
        "group of --dp ranks, run two iterations of forward, loss, backward and optimizer step under "
        "FSDPMemTracker, and report rank 0's second iteration: the peak by category, where it happened, a "
        "timeline of named instants, and the steady state after the step, beside the lab's stage-3 model. "
        "FSDP2's layout: " + "--param-bytes 4 --master-bytes 0 --grad-bytes 4 --gather-bytes 2 --act-bytes 2.",
    )
    add_scenario_arguments(p)
    p.add_argument(
        "--foreach",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="the optimizer's multi-tensor (foreach) step whatever --optimizer-impl says (kept for old commands)",
    )
    p.add_argument("--format", choices=("table", "json"), default="table")


class ProgressLine:
    """What the trace is doing, on stderr: one line rewritten in a terminal, finished steps otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.width = 0

    def __call__(self, what: str, done: int, of: int) -> None:
        text = f"zero3-lab trace: {what} {done}/{of}"
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
            self.stream.flush()
        elif done == of:
            self.stream.write(text + "\n")

    def close(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()


def run_trace_command(args: argparse.Namespace) -> int:
    if not torch_installed():
        sys.stderr.write(f"zero3-lab: error: trace: {INSTALL_HINT}\n")
        return 2
    scenario = scenario_from_args(args)
    if scenario is None:
        return 2
    try:
        setup = trace_setup(scenario, foreach=args.foreach)
    except TraceSetupError as exc:
        for problem in exc.problems:
            sys.stderr.write(f"zero3-lab: error: trace: {problem}\n")
        return 2
    watch_parent()  # a page's trace ends with its worker (app.trace.watch)
    import_torch()
    from app.trace.models import ModelBuildError
    from app.trace.report import render_table, trace_json
    from app.trace.tracer import run_trace

    progress = ProgressLine(sys.stderr)
    try:
        result = run_trace(setup, progress)
    except ModelBuildError as exc:
        progress.close()
        sys.stderr.write(f"zero3-lab: error: trace: {exc}\n")
        return 2
    progress.close()
    if args.format == "json":
        sys.stdout.write(json.dumps(trace_json(result), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_table(result))
    return 0
