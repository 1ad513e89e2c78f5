"""The scenario flags every command that takes a scenario shares (``estimate``, ``trace``, ``reconcile``).

One flag per scenario field (derived from the field table), ``--scenario`` (a JSON object or a receipt),
``--model-config`` (a Hugging Face config.json) and ``--deepspeed-config``; :func:`scenario_from_args` reads
them into a :class:`Scenario` or writes one line per bad field to standard error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from app.ledger.json_text import loads_strict
from app.ledger.scenario import FIELD_NAMES, Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.fields import FIELDS, allowed_text

MAX_SCENARIO_FILE = 64 * 1024
_METAVARS = {"count": "N", "bytes": "BYTES", "int": "INT", "text": "TEXT", "choice": "CHOICE"}


class Parser(argparse.ArgumentParser):
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
    p.add_argument(
        "--torchtitan-command",
        metavar="COMMAND.sh",
        type=Path,
        help="a file holding a torchtitan 0.3.0 command line (python -m torchtitan.train --module llama3 … "
        "activation-checkpoint:…): its flags set the stack, batch, sequence, precision, mesh and checkpointing "
        "(flags and --scenario override it); flags the lab does not read are named on stderr",
    )


def fail(message: str) -> NoReturn:
    sys.stderr.write(f"zero3-lab: error: {message}\n")
    raise SystemExit(2)


def read_json_object(path: Path, flag: str) -> dict[str, object]:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SCENARIO_FILE + 1)
    except OSError as exc:
        fail(f"{flag}: cannot read {str(path)!r}: {exc.strerror or exc}")
    if len(data) > MAX_SCENARIO_FILE:
        fail(f"{flag}: {str(path)!r} is larger than {MAX_SCENARIO_FILE:,} bytes")
    try:
        loaded = loads_strict(data.removeprefix(b"\xef\xbb\xbf"))  # a UTF-8 BOM (Notepad writes one) is no error
    except (ValueError, RecursionError) as exc:
        fail(f"{flag}: {str(path)!r} is not valid JSON ({exc})")
    if not isinstance(loaded, dict):
        fail(f"{flag}: {str(path)!r} must hold a JSON object")
    return loaded


def _read_scenario_file(path: Path) -> dict[str, object]:
    loaded = read_json_object(path, "--scenario")
    # a receipt is also accepted: its "scenario" object reproduces it
    if "scenario" in loaded and isinstance(loaded["scenario"], dict):
        loaded = loaded["scenario"]
    return dict(loaded)


def _read_model_config(path: Path) -> str:
    """A config.json's compact form (``cfg:…``), or exit 2 naming the flag and the problem."""
    from app.ledger.models.architecture import ModelConfigError
    from app.ledger.models.reference import compact

    data = read_json_object(path, "--model-config")
    try:
        return compact(data)
    except ModelConfigError as exc:
        fail(f"--model-config: {exc}")


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
        if getattr(args, "torchtitan_command", None) is not None:
            raw = {**_import_torchtitan(args.torchtitan_command), **raw}
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


def _import_torchtitan(path: Path) -> dict[str, object]:
    """What the torchtitan command line in ``path`` sets (exit 2 naming the flag it refuses)."""
    from app.interop.torchtitan_reader import MAX_COMMAND_CHARS, TorchtitanCommandError, read_torchtitan_command

    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_COMMAND_CHARS + 1)
        fields, lines = read_torchtitan_command(data.decode("utf-8"))
    except OSError as exc:
        fail(f"--torchtitan-command: {path}: {exc.strerror or exc}")
    except UnicodeDecodeError:
        fail(f"--torchtitan-command: {path}: not UTF-8 text")
    except TorchtitanCommandError as exc:
        fail(f"--torchtitan-command: {path}: {exc.flag}: {exc.message}")
    for line in lines:
        if line.status == "ignored":
            sys.stderr.write(f"zero3-lab: note: {path.name}: {line.flag} {line.written}: ignored: {line.effect}\n")
    return fields


def _import_deepspeed(path: Path, raw: dict[str, object]) -> Scenario:
    """``raw`` with what the DeepSpeed config at ``path`` sets (exit 2 naming the key it refuses)."""
    from app.interop.deepspeed.reader import import_deepspeed
    from app.interop.deepspeed.report import DeepSpeedConfigError

    config = read_json_object(path, "--deepspeed-config")
    try:
        unknown = sorted(set(raw) - FIELD_NAMES)
        if unknown:  # as parse_scenario(allow_unknown=False) would say, before the config is read
            parse_scenario(raw, allow_unknown=False)
        result = import_deepspeed(config, raw)
    except DeepSpeedConfigError as exc:
        fail(f"--deepspeed-config: {path}: {exc.key}: {exc.message}")
    for line in result.lines:
        if line.status in ("not modelled", "unresolved"):
            sys.stderr.write(f"zero3-lab: note: {path.name}: {line.key}: {line.status}: {line.effect}\n")
    return result.scenario
