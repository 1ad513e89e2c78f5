"""The command line: ``zero3-lab estimate`` on the same core as the page."""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from tests.support.cli_run import ROOT, run_cli


def estimate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["estimate", "--format", "json", *args]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def usage_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``estimate`` in-process expecting exit status 2; return stderr."""
    try:
        status = main(["estimate", *args])
    except SystemExit as exc:
        status = exc.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert "Traceback" not in captured.err
    return captured.err


# --------------------------------------------------------------------------- subprocess


def test_no_flags_prints_the_seeds_table() -> None:
    proc = run_cli("estimate")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    assert "7,000,000,000 params, D = 8, U = 400,000,000" in out
    for figure in ("112.00 GB", "38.50 GB", "26.25 GB", "14.00 GB", "700,000,000 B"):
        assert figure in out
    assert "killed by oracle-agreement" in out


def test_json_format_subprocess() -> None:
    proc = run_cli("estimate", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema_version"] == 2
    assert [s["persistent"]["total"] for s in data["stages"]] == [
        112_000_000_000,
        38_500_000_000,
        26_250_000_000,
        14_000_000_000,
    ]
    assert data["stages"][3]["peak"]["gather"] == 700_000_000


def test_csv_format_subprocess() -> None:
    proc = run_cli("estimate", "--format", "csv", "--dp", "16")
    assert proc.returncode == 0, proc.stderr
    table = list(csv.DictReader(io.StringIO(proc.stdout, newline="")))
    assert {"stage", "ledger", "category", "bytes"} <= set(table[0])
    cell = {(r["stage"], r["ledger"], r["category"]): r["bytes"] for r in table}
    # stage 3 parameters at D = 16: ⌈7e9 ÷ 16⌉ = 437,500,000 × 2 = 875,000,000
    assert cell[("3", "persistent", "parameters")] == "875000000"
    dp_row = next(r for r in table if r["ledger"] == "input" and r["category"] == "dp")
    assert dp_row["value"] == "16"


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--dp", "0"), ("--dp", "1 … 131,072")),
        (("--param-bytes", "3"), ("--param-bytes", "one of 1, 2, 4")),
        (("--params", "7.5"), ("--params", "not a whole number", "1 … 10,000,000,000,000")),
    ],
)
def test_bad_flag_subprocess(args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    proc = run_cli("estimate", *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr


def test_unknown_flag_subprocess() -> None:
    proc = run_cli("estimate", "--gpus", "8")
    assert proc.returncode == 2
    assert "--gpus" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_estimate_does_not_import_the_web_stack() -> None:
    code = (
        "import sys\n"
        "from app.cli import main\n"
        "status = main(['estimate', '--format', 'json'])\n"
        "web = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'fastapi', 'starlette', 'uvicorn', 'jinja2', 'httpx'} or m.startswith('app.web'))\n"
        "sys.stderr.write('WEB=' + ','.join(web) + '\\n')\n"
        "raise SystemExit(status)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema_version"] == 2
    assert "WEB=\n" in proc.stderr


# --------------------------------------------------------------------------- in-process


def test_json_stage_totals(capsys: pytest.CaptureFixture[str]) -> None:
    data = estimate_json(capsys)
    assert [s["persistent"]["total"] for s in data["stages"]] == [
        112 * 10**9,
        38_500_000_000,
        26_250_000_000,
        14 * 10**9,
    ]
    assert data["stages"][3]["peak"]["gather"] == 700_000_000


def test_flags_take_human_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    data = estimate_json(capsys, "--params", "13B", "--capacity-bytes", "80GiB", "--unit-params", "500M")
    assert data["scenario"]["params"] == 13_000_000_000
    assert data["scenario"]["capacity_bytes"] == 85_899_345_920
    assert data["scenario"]["unit_params"] == 500_000_000


def test_prefetch_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """P = 1: 2 × 350,000,000 × 2 = 1,400,000,000."""
    assert estimate_json(capsys, "--prefetch", "1")["stages"][3]["peak"]["gather"] == 1_400_000_000


def test_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"params": 1_000, "dp": 10, "name": "tiny"}), encoding="utf-8")
    data = estimate_json(capsys, "--scenario", str(path))
    assert (data["scenario"]["params"], data["scenario"]["dp"], data["scenario"]["name"]) == (1_000, 10, "tiny")
    # stage 3: ⌈1,000 ÷ 10⌉ = 100 elements × (2 + 2 + 4 + 2 × 4) = 1,600 B
    assert data["stages"][3]["persistent"]["total"] == 1_600


def test_flags_override_the_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"params": 1_000, "dp": 10}), encoding="utf-8")
    data = estimate_json(capsys, "--scenario", str(path), "--dp", "4")
    assert (data["scenario"]["params"], data["scenario"]["dp"]) == (1_000, 4)


def test_flag_fixes_a_bad_value_in_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"dp": 0}), encoding="utf-8")
    assert estimate_json(capsys, "--scenario", str(path), "--dp", "2")["scenario"]["dp"] == 2


def test_a_receipt_is_accepted_as_a_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = estimate_json(capsys, "--params", "3B", "--dp", "32", "--name", "from a receipt")
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(first), encoding="utf-8")
    again = estimate_json(capsys, "--scenario", str(path))
    assert again == first


def test_csv_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stage,ledger,category,bytes,")
    assert "\r\n0,persistent,total,112000000000," in out


def test_csv_on_standard_output_has_no_bom_unless_asked(capsys: pytest.CaptureFixture[str]) -> None:
    """A pipe does not want a BOM; --bom puts one there for a redirect that Excel will open."""
    assert main(["estimate", "--format", "csv"]) == 0
    assert not capsys.readouterr().out.startswith("\ufeff")
    assert main(["estimate", "--format", "csv", "--bom"]) == 0
    assert capsys.readouterr().out.startswith("\ufeffstage,ledger,category,bytes,")


def test_csv_output_file_starts_with_the_bom_like_the_download(tmp_path: Path) -> None:
    path = tmp_path / "receipt.csv"
    proc = run_cli("estimate", "--format", "csv", "--dp", "16", "--output", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbfstage,ledger,category,bytes,")
    assert b"\r\n" in data and b"\r\r\n" not in data
    piped = run_cli("estimate", "--format", "csv", "--dp", "16").stdout  # text mode: CRLF read as LF
    assert data.decode("utf-8-sig").replace("\r\n", "\n") == piped
    table = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert next(r for r in table if r["ledger"] == "input" and r["category"] == "dp")["value"] == "16"
    plain = tmp_path / "plain.csv"
    assert run_cli("estimate", "--format", "csv", "--no-bom", "--output", str(plain)).returncode == 0
    assert plain.read_bytes().startswith(b"stage,")


def test_json_and_table_files_never_get_a_bom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "receipt.json"
    assert main(["estimate", "--format", "json", "--output", str(path)]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(path.read_bytes())["schema_version"] == 2
    table = tmp_path / "receipt.txt"
    assert main(["estimate", "--output", str(table)]) == 0
    assert table.read_text(encoding="utf-8").startswith("zero3-lab — ")
    for fmt in ("json", "table"):
        assert "--bom: only with --format csv" in usage_error(capsys, "--format", fmt, "--bom")
    assert "--no-bom: only with --format csv" in usage_error(capsys, "--no-bom")


def test_an_unwritable_output_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "--format", "csv", "--output", str(tmp_path / "absent" / "r.csv"))
    assert err.startswith("zero3-lab: error: --output: cannot write")


def test_json_url_is_absolute_under_the_base_url(capsys: pytest.CaptureFixture[str]) -> None:
    data = estimate_json(capsys, "--dp", "16")
    assert data["link"] == "dp=16"
    assert data["url"] == "http://127.0.0.1:8000/?dp=16"
    data = estimate_json(capsys, "--dp", "16", "--base-url", "https://lab.example.org/zero3/")
    assert (data["link"], data["url"]) == ("dp=16", "https://lab.example.org/zero3/?dp=16")


@pytest.mark.parametrize("bad", ["lab.example.org", "https://lab.example.org/?x=1", "https://a b", "file:///etc"])
def test_a_bad_base_url_exits_2(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    assert usage_error(capsys, "--base-url", bad).startswith("zero3-lab: error: --base-url: ")


def test_link_with_a_base_url_is_absolute(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--link", "--dp", "16", "--base-url", "https://lab.example.org"]) == 0
    assert capsys.readouterr().out == "https://lab.example.org/?dp=16\n"


def test_a_scenario_file_with_a_bom_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "scenario.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"dp": 32}).encode())
    assert estimate_json(capsys, "--scenario", str(path))["scenario"]["dp"] == 32


def test_link(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--link", "--params", "13B", "--dp", "16"]) == 0
    assert capsys.readouterr().out == "/?dp=16&params=13000000000\n"


def test_link_for_the_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--link", "--dp", "8"]) == 0
    assert capsys.readouterr().out == "/\n"


def test_table_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--dp", "1"]) == 0
    out = capsys.readouterr().out
    assert "SURVIVED" in out
    assert "dp = 1: sharding is the identity" in out
    assert "112.00 GB" in out


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--dp", "0"), ("--dp: 0 is out of range", "allowed: 1 … 131,072")),
        (("--dp", "131073"), ("--dp", "131,073", "1 … 131,072")),
        (("--param-bytes", "3"), ("--param-bytes", "not a supported value", "one of 1, 2, 4")),
        (("--grad-bytes", "8"), ("--grad-bytes", "one of 2, 4")),
        (("--params", "7.5"), ("--params", "1 … 10,000,000,000,000")),
        (("--params", "0"), ("--params", "1 … 10,000,000,000,000")),
        (("--activation-bytes", "20B"), ("--activation-bytes", "ambiguous", "0 … 70,368,744,177,664")),
        (("--params", "80GB"), ("--params", "counts elements")),
        (("--unit-params", "8B"), ("--unit-params", "larger than params", "0 … params (7,000,000,000)")),
        (("--name", "x" * 81), ("--name", "up to 80 printable characters")),
        (("--contingency-pct", "101"), ("--contingency-pct", "0 … 100")),
        (("--prefetch", "9"), ("--prefetch", "0 … 8")),
    ],
)
def test_bad_input_exits_2_naming_flag_and_range(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    err = usage_error(capsys, *args)
    assert err.startswith("zero3-lab: error: ")
    for fragment in fragments:
        assert fragment in err


def test_every_bad_flag_reported(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "--dp", "0", "--param-bytes", "3")
    assert err.count("zero3-lab: error:") == 2
    assert "--dp" in err
    assert "--param-bytes" in err


def test_unknown_flag(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "--bogus", "1")
    assert "--bogus" in err


def test_bad_format(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "--format", "xml")
    assert "--format" in err


def test_missing_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "--scenario", str(tmp_path / "absent.json"))
    assert "--scenario" in err
    assert "cannot read" in err


def test_directory_as_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "--scenario" in usage_error(capsys, "--scenario", str(tmp_path))


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b"\xff\xfe\x00", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[" * 100_000, "larger than"),
    ],
)
def test_invalid_scenario_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, fragment: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    err = usage_error(capsys, "--scenario", str(path))
    assert "--scenario" in err
    assert fragment in err


def test_deeply_nested_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 50_000 + "]" * 50_000, encoding="utf-8")
    assert "--scenario" in usage_error(capsys, "--scenario", str(path))


def test_bad_value_in_scenario_file_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"dp": 0, "gpus": 8, "param_bytes": 2.5}), encoding="utf-8")
    err = usage_error(capsys, "--scenario", str(path))
    assert f"dp in {path}" in err
    assert f"gpus in {path}" in err
    assert f"param_bytes in {path}" in err
    assert "1 … 131,072" in err


def test_missing_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_model_flags_and_a_model_config_file(tmp_path: Path) -> None:
    """--model-config reads a config.json; the receipt then carries the model and its activations."""
    from app.ledger.models.known import KNOWN_BY_ID

    config = tmp_path / "config.json"
    config.write_text(json.dumps(dict(KNOWN_BY_ID["gpt2"].config)))
    done = run_cli("estimate", "--model-config", str(config), "--dp", "2", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["model"]["params"] == 124_439_808
    assert data["activations"]["source"] == "modelled"
    table = run_cli("estimate", "--model", "llama-2-7b", "--act-policy", "full")
    assert table.returncode == 0
    assert "Model Llama-2-7B" in table.stdout
    assert "Fit finder" in table.stdout


def test_a_bad_model_config_exits_2_naming_the_flag(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "bert"}')
    done = run_cli("estimate", "--model-config", str(config))
    assert done.returncode == 2
    assert done.stderr.startswith("zero3-lab: error: --model-config:")
    assert "Traceback" not in done.stderr
    tp = run_cli("estimate", "--model", "llama-2-7b", "--tp", "3")
    assert tp.returncode == 2
    assert "--tp:" in tp.stderr


def test_every_model_field_has_a_flag_with_its_allowed_range() -> None:
    """The flags are derived from the scenario model: a new field gets a flag, a new bound its help."""
    from app.cli import build_parser
    from app.ledger.scenario.fields import FIELD_BY_NAME, allowed_text
    from app.ledger.scenario.inputs import ScenarioIn

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    estimate = sub.choices["estimate"]
    by_dest = {a.dest: a for a in estimate._actions}
    for name in ScenarioIn.model_fields:
        action = by_dest[name]
        assert action.option_strings == ["--" + name.replace("_", "-")]
        assert action.help is not None
        assert f"Allowed: {allowed_text(FIELD_BY_NAME[name])}." in action.help


def test_null_in_a_scenario_file_is_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"dp": None, "params": 1_000, "gather_bytes": None, "param_bytes": 4}), encoding="utf-8")
    data = estimate_json(capsys, "--scenario", str(path))
    assert (data["scenario"]["dp"], data["scenario"]["gather_bytes"]) == (8, 4)


# --------------------------------------------------------------------------- DeepSpeed configs and snippets

DS = ROOT / "tests" / "data" / "deepspeed"


def test_deepspeed_config_sets_the_scenario_and_flags_win(capsys: pytest.CaptureFixture[str]) -> None:
    """LLaVA's ZeRO-3 config on Llama-2-13B: reduce_bucket_size "auto" = 5,120² elements × 2 B; a typed
    --bucket-bytes wins over it; the notes name what stayed unresolved."""
    assert (
        main(["estimate", "--deepspeed-config", str(DS / "llava-zero3.json"), "--model", "llama-2-13b", "--link"]) == 0
    )
    captured = capsys.readouterr()
    assert captured.out == "/?bucket_bytes=52428800&model=llama-2-13b\n"
    assert "train_micro_batch_size_per_gpu: unresolved" in captured.err
    args = ["--deepspeed-config", str(DS / "llava-zero3.json"), "--model", "llama-2-13b", "--bucket-bytes", "1GB"]
    assert estimate_json(capsys, *args)["scenario"]["bucket_bytes"] == 1_000_000_000


def test_deepspeed_config_refused_key_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "--deepspeed-config", str(DS / "hf-docs-zero3-nvme.json"))
    assert "--deepspeed-config" in err and "zero_optimization.aio" in err


def test_deepspeed_config_bad_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "ds.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    assert "must hold a JSON object" in usage_error(capsys, "--deepspeed-config", str(bad))
    assert "cannot read" in usage_error(capsys, "--deepspeed-config", str(tmp_path / "missing.json"))


def test_format_deepspeed_reads_back_to_the_same_link(tmp_path: Path) -> None:
    """``--format deepspeed`` writes a config that ``--deepspeed-config`` reads back to the scenario
    (its non-DeepSpeed inputs given again as flags)."""
    flags = ("--model", "llama-2-7b", "--dp", "16", "--stage", "2", "--micro-batch", "4", "--bucket-bytes", "400MB")
    written = run_cli("estimate", *flags, "--format", "deepspeed")
    assert written.returncode == 0, written.stderr
    config = json.loads(written.stdout)
    assert config["zero_optimization"] == {
        "stage": 2, "contiguous_gradients": True, "overlap_comm": True, "reduce_bucket_size": 100_000_000,
    }  # fmt: skip
    path = tmp_path / "ds_config.json"
    path.write_text(written.stdout, encoding="utf-8")
    back = run_cli("estimate", "--deepspeed-config", str(path), "--model", "llama-2-7b", "--dp", "16", "--link")
    original = run_cli("estimate", *flags, "--link")
    assert back.returncode == 0, back.stderr
    assert back.stdout == original.stdout == "/?bucket_bytes=400000000&dp=16&micro_batch=4&model=llama-2-7b&stage=2\n"


def test_format_fsdp2_is_python_with_notes_on_stderr() -> None:
    proc = run_cli("estimate", "--model", "llama-2-7b", "--format", "fsdp2")
    assert proc.returncode == 0, proc.stderr
    compile(proc.stdout, "fsdp2.py", "exec")
    assert "fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)" in proc.stdout
    assert "zero3-lab: note: fsdp2: master_bytes 4" in proc.stderr


@pytest.mark.parametrize(("text", "says"), [
    ('{"dp": 8, "dp": 16}', "dp: given more than once"),
    ('{"name": "a\\ud800"}', "name: holds a lone UTF-16 surrogate"),
])  # fmt: skip
def test_a_scenario_file_a_reader_would_misread_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    """A repeated key (json keeps the last silently) or a lone surrogate (no answer could print it)."""
    path = tmp_path / "scenario.json"
    path.write_text(text)
    assert says in usage_error(capsys, "--scenario", str(path))


def test_the_summary_csv_from_the_terminal_is_the_download(capsys: pytest.CaptureFixture[str]) -> None:
    """``--format summary-csv`` writes what /summary.csv downloads (without the BOM on standard output)."""
    from fastapi.testclient import TestClient

    from app.web.app import create_app

    assert main(["estimate", "--format", "summary-csv", "--model", "llama-2-7b", "--dp", "16"]) == 0
    printed = capsys.readouterr().out
    downloaded = TestClient(create_app()).get("/summary.csv", params={"model": "llama-2-7b", "dp": "16"}).text
    assert printed == downloaded.removeprefix("\ufeff")
    assert printed.splitlines()[0].startswith("stage,persistent_bytes,")


def test_a_cp_that_does_not_split_the_sequence_exits_2_naming_cp_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "--model", "llama-3.1-8b", "--seq-len", "8192", "--cp", "3")
    assert err.startswith("zero3-lab: error: --cp: ") and "2 × cp = 6 does not divide seq_len (8,192)" in err
