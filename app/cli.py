"""The command line: ``zero3-lab estimate`` prints a receipt; ``zero3-lab serve`` runs the lab.

Printing a receipt imports the ledger and the receipts only, never the web stack.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NoReturn

from app.ledger.fields import FIELDS, allowed_text
from app.ledger.scenario import FIELD_NAMES, Scenario, ScenarioError, parse_scenario
from app.receipts.receipt import DEFAULT_BASE_URL, check_base_url, page_url, receipt

MAX_SCENARIO_FILE = 64 * 1024
_METAVARS = {"count": "N", "bytes": "BYTES", "int": "INT", "text": "TEXT", "choice": "CHOICE"}


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def add_scenario_arguments(p: argparse.ArgumentParser) -> None:
    """One flag per scenario field, ``--scenario`` and ``--model-config``: what every command that
    takes a scenario (``estimate``, ``trace``) reads with :func:`scenario_from_args`."""
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
    p.add_argument(
        "--deepspeed-config",
        metavar="DS_CONFIG.json",
        type=Path,
        help="a DeepSpeed config: its stage, precision, optimizer, batch and buckets set the scenario (flags and "
        '--scenario override it; its "auto" sizes need --model or --model-config)',
    )


def _estimate_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    p = sub.add_parser("estimate", help="print the receipt for a scenario (the seed's example by default)")
    add_scenario_arguments(p)
    p.add_argument(
        "--format",
        choices=("table", "json", "csv", "deepspeed", "fsdp2"),
        default="table",
        help="the receipt (table, json, csv), or the scenario as a ds_config.json (deepspeed) or an FSDP2 snippet "
        "(fsdp2); what a snippet cannot express goes to standard error",
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
    from app.trace.cli import add_trace_parser  # `zero3-lab trace` (the trace extra); imports no torch

    add_trace_parser(sub)
    from app.observed.cli import add_observed_parsers  # `zero3-lab reconcile` and `zero3-lab probe`

    add_observed_parsers(sub)
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
        loaded = json.loads(data.removeprefix(b"\xef\xbb\xbf"))  # a UTF-8 BOM (Notepad writes one) is no error
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


def scenario_from_args(args: argparse.Namespace) -> Scenario | None:
    """The scenario the flags name (a ``--scenario`` file, then ``--model-config``, then each field's
    flag, then ``--deepspeed-config`` for what none of them set); a bad one goes to stderr, one line per
    field naming the flag or the file, and gives None. A DeepSpeed config's lines about keys the lab
    does not model, or could not resolve, go to stderr as notes."""
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
        if getattr(args, "deepspeed_config", None) is not None:
            return _import_deepspeed(args.deepspeed_config, raw)
        return parse_scenario(raw, allow_unknown=False)
    except ScenarioError as exc:
        for err in exc.errors:
            where = (
                f"{err.field} in {args.scenario}"
                if err.field in from_file or err.field not in FIELD_NAMES
                else "--" + err.field.replace("_", "-")
            )
            sys.stderr.write(f"zero3-lab: error: {where}: {err.message} (allowed: {err.allowed})\n")
        return None


def _import_deepspeed(path: Path, raw: dict[str, object]) -> Scenario:
    """``raw`` with what the DeepSpeed config at ``path`` sets (exit 2 naming the key it refuses)."""
    from app.ledger.deepspeed import DeepSpeedConfigError, import_deepspeed

    config = _read_json_object(path, "--deepspeed-config")
    try:
        unknown = sorted(set(raw) - FIELD_NAMES)
        if unknown:  # as parse_scenario(allow_unknown=False) would say, before the config is read
            parse_scenario(raw, allow_unknown=False)
        result = import_deepspeed(config, raw)
    except DeepSpeedConfigError as exc:
        _fail(f"--deepspeed-config: {path}: {exc.key}: {exc.message}")
    for line in result.lines:
        if line.status in ("not modelled", "unresolved"):
            sys.stderr.write(f"zero3-lab: note: {path.name}: {line.key}: {line.status}: {line.effect}\n")
    return result.scenario


def run_estimate(args: argparse.Namespace) -> int:
    if args.bom is not None and args.format != "csv":
        _fail(f"--{'' if args.bom else 'no-'}bom: only with --format csv (JSON and the table never carry a BOM)")
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
        _fail(f"--output: cannot write {str(args.output)!r}: {exc.strerror or exc}")
    return 0


def _base_url(flag: str | None) -> str:
    if flag is None:
        return DEFAULT_BASE_URL
    try:
        return check_base_url(flag)
    except ValueError as exc:
        _fail(f"--base-url: {exc}")


def _render(args: argparse.Namespace, scenario: Scenario, base_url: str) -> Iterable[str]:
    """What ``estimate`` writes, in pieces: the link, or the receipt in the chosen format."""
    from app.ledger.estimate import estimate
    from app.receipts.links import link

    if args.link:
        # absolute when a base URL is asked for; the bare canonical link otherwise, as ever
        return [(link(scenario) if args.base_url is None else page_url(scenario, base_url)) + "\n"]
    if args.format in ("deepspeed", "fsdp2"):
        from app.receipts.snippets import deepspeed_snippet, fsdp2_snippet

        snippet = deepspeed_snippet(scenario) if args.format == "deepspeed" else fsdp2_snippet(scenario)
        for note in snippet.notes:
            sys.stderr.write(f"zero3-lab: note: {args.format}: {note}\n")
        return [snippet.text]
    result = estimate(scenario)
    if args.format == "json":
        return [json.dumps(receipt(result, base_url), indent=2, ensure_ascii=False) + "\n"]
    if args.format == "csv":
        from app.receipts.csv_rows import csv_lines

        return csv_lines(result, bom=args.output is not None if args.bom is None else args.bom)
    from app.receipts.table import render_table

    return [render_table(result)]


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
        if args.command == "trace":
            from app.trace.cli import run_trace_command

            return run_trace_command(args)
        if args.command in ("reconcile", "probe"):
            from app.observed.cli import run_observed_command

            return run_observed_command(args)
        return run_serve(args)
    except BrokenPipeError:  # e.g. piped into `head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
