"""The command line: ``zero3-lab estimate`` prints a receipt; ``zero3-lab serve`` runs the lab.

Printing a receipt imports the ledger and the receipts only, never the web stack.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from app.ledger.fields import FIELDS, allowed_text
from app.ledger.scenario import FIELD_NAMES, ScenarioError, parse_scenario

MAX_SCENARIO_FILE = 64 * 1024
_METAVARS = {"count": "N", "bytes": "BYTES", "int": "INT", "text": "TEXT", "choice": "CHOICE"}


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _estimate_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    p = sub.add_parser("estimate", help="print the receipt for a scenario (the seed's example by default)")
    for field in FIELDS:
        metavar = "{" + ",".join(field.options) + "}" if field.options else _METAVARS[field.kind]
        p.add_argument(
            field.flag, dest=field.name, metavar=metavar, help=f"{field.help} Allowed: {allowed_text(field)}."
        )
    p.add_argument(
        "--scenario", metavar="FILE.json", type=Path, help="read inputs from a JSON object; flags override it"
    )
    p.add_argument(
        "--model-config", metavar="CONFIG.json", type=Path, help="a Hugging Face config.json; sets --model to it"
    )
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--link", action="store_true", help="print the scenario's canonical link instead")


def _serve_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    p = sub.add_parser("serve", help="run the browser lab")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes, each with its own app (default 1, enough for one user; more for bigger rooms)",
    )
    p.add_argument("--reload", action="store_true")
    p.add_argument("--no-access-log", action="store_true", help="do not log each request (benchmarks)")


def build_parser() -> _Parser:
    parser = _Parser(prog="zero3-lab", description="Budget every byte of a ZeRO-3 / FSDP training run.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _estimate_parser(sub)
    _serve_parser(sub)
    return parser


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"zero3-lab: error: {message}\n")
    raise SystemExit(2)


def _read_json_object(path: Path, flag: str) -> dict[str, object]:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SCENARIO_FILE + 1)
    except OSError as exc:
        _fail(f"{flag}: cannot read {str(path)!r}: {exc.strerror or exc}")
    if len(data) > MAX_SCENARIO_FILE:
        _fail(f"{flag}: {str(path)!r} is larger than {MAX_SCENARIO_FILE:,} bytes")
    try:
        loaded = json.loads(data)
    except (ValueError, RecursionError) as exc:
        _fail(f"{flag}: {str(path)!r} is not valid JSON ({exc})")
    if not isinstance(loaded, dict):
        _fail(f"{flag}: {str(path)!r} must hold a JSON object")
    return loaded


def _read_scenario_file(path: Path) -> dict[str, object]:
    loaded = _read_json_object(path, "--scenario")
    # a receipt is also accepted: its "scenario" object reproduces it
    if "scenario" in loaded and isinstance(loaded["scenario"], dict):
        loaded = loaded["scenario"]
    return dict(loaded)


def _read_model_config(path: Path) -> str:
    """A config.json's compact form (``cfg:…``), or exit 2 naming the flag and the problem."""
    from app.ledger.models.architecture import ModelConfigError
    from app.ledger.models.reference import compact

    data = _read_json_object(path, "--model-config")
    try:
        return compact(data)
    except ModelConfigError as exc:
        _fail(f"--model-config: {exc}")


def run_estimate(args: argparse.Namespace) -> int:
    # Imported here so ``serve`` and ``--help`` stay cheap and ``estimate`` never loads the web stack.
    from app.ledger.estimate import estimate
    from app.receipts.links import link

    raw: dict[str, object] = {}
    from_file: set[str] = set()
    if args.scenario is not None:
        raw.update(_read_scenario_file(args.scenario))
        from_file = set(raw)
    if args.model_config is not None:
        raw["model"] = _read_model_config(args.model_config)
        from_file.discard("model")
    for field in FIELDS:
        value = getattr(args, field.name)
        if value is not None:
            raw[field.name] = value
            from_file.discard(field.name)
    try:
        scenario = parse_scenario(raw, allow_unknown=False)
    except ScenarioError as exc:
        for err in exc.errors:
            where = (
                f"{err.field} in {args.scenario}"
                if err.field in from_file or err.field not in FIELD_NAMES
                else "--" + err.field.replace("_", "-")
            )
            sys.stderr.write(f"zero3-lab: error: {where}: {err.message} (allowed: {err.allowed})\n")
        return 2
    if args.link:
        sys.stdout.write(link(scenario) + "\n")
        return 0
    result = estimate(scenario)
    if args.format == "json":
        from app.receipts.receipt import receipt

        sys.stdout.write(json.dumps(receipt(result), indent=2, ensure_ascii=False) + "\n")
    elif args.format == "csv":
        from app.receipts.csv_rows import csv_lines

        sys.stdout.writelines(csv_lines(result))
    else:
        from app.receipts.table import render_table

        sys.stdout.write(render_table(result))
    return 0


def run_serve(args: argparse.Namespace) -> int:
    from app.web.server import serve

    return serve(
        host=args.host, port=args.port, workers=args.workers, reload=args.reload, access_log=not args.no_access_log
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "estimate":
            return run_estimate(args)
        return run_serve(args)
    except BrokenPipeError:  # e.g. piped into `head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
