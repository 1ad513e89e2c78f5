"""``zero3-lab layouts``: the layouts of the scenario's model on a GPU count that fit, ranked by their traffic per
step, as the page's table, JSON or CSV. Bad input exits 2 naming the flag and its allowed range."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.cli.scenario_args import add_scenario_arguments, fail, scenario_from_args
from app.ledger.layouts.query import ALLOWED, FIELDS, LayoutSearchIn
from app.receipts.url import DEFAULT_BASE_URL, check_base_url


def add_layouts_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "layouts",
        help="list the layouts (D, tp, pp, stage, recomputation, micro batch × accumulation) of the scenario's model "
        "on a GPU count that fit, ranked by communication per step",
    )
    add_scenario_arguments(p)
    for name in FIELDS:
        info = LayoutSearchIn.model_fields[name]
        p.add_argument("--" + name.replace("_", "-"), dest="search_" + name, metavar=name.upper(),
                       help=f"{info.description} Allowed: {ALLOWED[name]}; default {info.default}.")  # fmt: skip
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--base-url", metavar="URL", help=f"where each row's url points (default {DEFAULT_BASE_URL})")


def run_layouts(args: argparse.Namespace) -> int:
    from app.ledger.layouts import read_search, search_layouts
    from app.ledger.scenario import ScenarioError

    base_url = DEFAULT_BASE_URL
    if args.base_url is not None:
        try:
            base_url = check_base_url(args.base_url)
        except ValueError as exc:
            fail(f"--base-url: {exc}")
    raw = {name: getattr(args, "search_" + name) for name in FIELDS if getattr(args, "search_" + name) is not None}
    try:
        query = read_search(raw)
    except ScenarioError as exc:
        for e in exc.errors:
            sys.stderr.write(f"zero3-lab: error: --{e.field.replace('_', '-')}: {e.message} (allowed: {e.allowed})\n")
        return 2
    scenario = scenario_from_args(args)
    if scenario is None:
        return 2
    try:
        result = search_layouts(scenario, query)
    except ScenarioError as exc:
        for e in exc.errors:
            sys.stderr.write(f"zero3-lab: error: --{e.field.replace('_', '-')}: {e.message} (allowed: {e.allowed})\n")
        return 2
    from app.receipts import layouts as out

    if args.format == "json":
        text = json.dumps(out.layouts_out(scenario, result, base_url).model_dump(), indent=2, ensure_ascii=False)
        sys.stdout.write(text + "\n")
    elif args.format == "csv":
        sys.stdout.write(out.csv_text(scenario, result, base_url))
    else:
        sys.stdout.write(out.render_table(scenario, result))
    return 0
