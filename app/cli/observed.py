"""``zero3-lab reconcile`` (the probe's JSON lines against a scenario) and ``zero3-lab probe`` (its source).

Bad input is one line per problem on stderr, naming the file, the line and the field, and exit status
2: never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.cli.scenario_args import add_scenario_arguments, scenario_from_args
from app.observed.records import MAX_FILE_BYTES, MAX_STEP, ObservedError, Sample, collect, read_lines

COMMANDS = ("reconcile", "probe")


def add_observed_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "reconcile",
        help="reconcile the probe's JSON lines from a real run with the scenario's stage-3 schedule",
        description="Read the JSON lines the probe wrote on each rank (zero3-lab probe prints it; "
        "cat probe/*.jsonl > observed.jsonl), and set each instant and rank beside the lab's stage-3 "
        "schedule for the scenario: observed (reserved + CUDA context) = estimate + allocator reserve + "
        "CUDA context + unexplained, with min and max across ranks. See docs/observed.md.",
    )
    p.add_argument("observed", metavar="OBSERVED.jsonl", type=Path, nargs="+",
                   help=f"the probe's records, one or more files (up to {MAX_FILE_BYTES:,} bytes in all)")  # fmt: skip
    add_scenario_arguments(p)
    p.add_argument("--step", type=int, help="the step to reconcile (default: the last step every rank recorded)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    sub.add_parser(
        "probe",
        help="print the probe (one Python file, standard library and torch only) to copy into a training loop",
        description="Print app/observed/probe.py: save it as zero3_probe.py next to your training script "
        "(zero3-lab probe > zero3_probe.py); docs/observed.md shows where to call it.",
    )


def _error(message: str) -> int:
    sys.stderr.write(f"zero3-lab: error: reconcile: {message}\n")
    return 2


def _read(paths: list[Path]) -> list[Sample] | int:
    samples: list[Sample] = []
    left = MAX_FILE_BYTES
    for path in paths:
        try:
            with path.open("rb") as handle:
                data = handle.read(left + 1)
        except OSError as exc:
            return _error(f"cannot read {str(path)!r}: {exc.strerror or exc}")
        try:
            samples += read_lines(data, str(path), max_bytes=left)
        except ObservedError as exc:
            for problem in exc.problems:
                _error(str(problem))
            return 2
        left -= len(data)
    return samples


def run_observed_command(args: argparse.Namespace) -> int:
    if args.command == "probe":
        from app.observed.probe import source

        sys.stdout.write(source())
        return 0
    if args.step is not None and not 0 <= args.step <= MAX_STEP:
        return _error(f"--step: {args.step:,} is out of range (allowed: 0 … {MAX_STEP:,})")
    scenario = scenario_from_args(args)
    if scenario is None:
        return 2
    samples = _read(args.observed)
    if isinstance(samples, int):
        return samples
    from app.observed.reconcile import reconcile
    from app.observed.render import reconcile_json, render_table

    try:
        result = reconcile(scenario, collect(samples), args.step)
    except ObservedError as exc:
        for problem in exc.problems:
            _error(str(problem))
        return 2
    if args.format == "json":
        sys.stdout.write(json.dumps(reconcile_json(result), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_table(result))
    return 0
