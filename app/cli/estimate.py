"""``zero3-lab estimate``: the receipt for a scenario as a table, JSON or CSV, its link, or a framework snippet.

Printing a receipt imports the ledger and the receipts only, never the web stack.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.cli.scenario_args import add_scenario_arguments, fail, scenario_from_args
from app.interop.writers import WRITERS
from app.ledger.scenario import Scenario
from app.receipts.url import DEFAULT_BASE_URL, check_base_url, page_url


def add_estimate_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("estimate", help="print the receipt for a scenario (the seed's example by default)")
    add_scenario_arguments(p)
    p.add_argument(
        "--format",
        choices=("table", "json", "csv", "summary-csv", *WRITERS),
        default="table",
        help="the receipt (table, json, csv; summary-csv: one row per stage, as /summary.csv), or the scenario in "
        "a framework's words: a ds_config.json (deepspeed), "
        "an FSDP2 snippet (fsdp2), torchtitan 0.3.0's command line (torchtitan), the HF Trainer's TrainingArguments "
        "(hf-trainer); what a snippet cannot express goes to standard error",
    )
    p.add_argument("--link", action="store_true", help="print the scenario's canonical link instead")
    p.add_argument(
        "--output",
        metavar="FILE",
        type=Path,
        help="write to FILE instead of standard output (a CSV file then starts with a UTF-8 BOM, as the download does)",
    )
    p.add_argument(
        "--bom",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --format csv: start with a UTF-8 byte order mark so that Excel reads × ÷ ⌈ ⌉ right "
        "(default: with --output, not on standard output)",
    )
    p.add_argument(
        "--base-url",
        metavar="URL",
        help=f"where the lab is served, for the receipt's absolute url (default {DEFAULT_BASE_URL}); "
        "--link then prints the absolute link",
    )


def run_estimate(args: argparse.Namespace) -> int:
    if args.bom is not None and args.format not in ("csv", "summary-csv"):
        flag = f"--{'' if args.bom else 'no-'}bom"
        fail(f"{flag}: only with --format csv or summary-csv (JSON and the table never carry a BOM)")
    base_url = _base_url(args.base_url)
    scenario = scenario_from_args(args)
    if scenario is None:
        return 2
    text = _render(args, scenario, base_url)
    if args.output is None:
        sys.stdout.writelines(text)
        return 0
    try:
        # newline="": the CSV's CRLF and the other formats' LF are written exactly as produced
        with args.output.open("w", encoding="utf-8", newline="") as handle:
            handle.writelines(text)
    except OSError as exc:
        fail(f"--output: cannot write {str(args.output)!r}: {exc.strerror or exc}")
    return 0


def _base_url(flag: str | None) -> str:
    if flag is None:
        return DEFAULT_BASE_URL
    try:
        return check_base_url(flag)
    except ValueError as exc:
        fail(f"--base-url: {exc}")


def _render(args: argparse.Namespace, scenario: Scenario, base_url: str) -> Iterable[str]:
    """What ``estimate`` writes, in pieces: the link, or the receipt in the chosen format."""
    from app.ledger.estimate import estimate
    from app.ledger.scenario.links import link

    if args.link:
        # absolute when a base URL is asked for; the bare canonical link otherwise, as ever
        return [(link(scenario) if args.base_url is None else page_url(scenario, base_url)) + "\n"]
    if args.format in WRITERS:
        snippet = WRITERS[args.format].write(scenario)
        for note in snippet.notes:
            sys.stderr.write(f"zero3-lab: note: {args.format}: {note}\n")
        return [snippet.text]
    result = estimate(scenario)
    if args.format == "json":
        from app.receipts.receipt import receipt  # its pydantic models: only for JSON (~60 ms of start-up)

        return [json.dumps(receipt(result, base_url), indent=2, ensure_ascii=False) + "\n"]
    bom = args.output is not None if args.bom is None else args.bom
    if args.format == "csv":
        from app.receipts.csv_rows import csv_lines

        return csv_lines(result, bom=bom)
    if args.format == "summary-csv":
        from app.receipts.summary_csv import summary_lines

        return summary_lines(result, bom=bom)
    from app.receipts.table import render_table

    return [render_table(result)]
