"""``zero3-lab layouts``: the layout search's table, JSON and CSV on the same core as the page; bad input exits 2
naming the flag."""

from __future__ import annotations

import csv
import io
import json
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from app.cli import main
from app.ledger.estimate import estimate
from app.ledger.scenario import parse_scenario
from tests.support.cli_run import run_cli

SEVENTY_B = ("--model", "llama-3.1-70b", "--gpus", "512")


def layouts_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["layouts", "--format", "json", *args]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def usage_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    try:
        status = main(["layouts", *args])
    except SystemExit as exc:
        status = exc.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    assert status == 2 and captured.out == "" and "Traceback" not in captured.err
    return captured.err


def test_the_table_for_a_70b_model_on_512_gpus() -> None:
    proc = run_cli("layouts", *SEVENTY_B)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Layouts of llama-3.1-70b on 512 × NVIDIA H100 SXM5 80GB, global batch 1,024 sequences" in out
    assert "a lower bound" in out and "450.00 GB/s within a node, 50.00 GB/s across nodes" in out
    rows = [line for line in out.splitlines() if line.lstrip()[:1].isdigit() and "/?" in line]
    assert len(rows) == 20
    assert all("model=llama-3.1-70b" in line and " GB / " in line and " GiB " in line for line in rows)


def test_json_rows_link_to_scenarios_that_fit(capsys: pytest.CaptureFixture[str]) -> None:
    data = layouts_json(capsys, *SEVENTY_B, "--rows", "5", "--base-url", "https://lab.example.org")
    assert data["gpus"] == 512 and data["device"]["id"] == "h100-80gb" and len(data["rows"]) == 5
    for row in data["rows"]:
        assert row["url"] == "https://lab.example.org/?" + row["link"]
        s = parse_scenario(dict(parse_qsl(urlsplit(row["url"]).query)))
        assert (s.dp * s.tp * s.pp, s.micro_batch * s.grad_accum * s.dp) == (512, 1_024)
        stage = estimate(s, with_kill_lists=False).ledger.stages[s.stage]
        assert stage.peak.fits and stage.peak.total <= row["peak_bytes"]
        assert all(type(row[k]) is int for k in ("peak_bytes", "communication_bytes", "lower_bound_ns"))
    assert [r["communication_bytes"] for r in data["rows"]] == sorted(r["communication_bytes"] for r in data["rows"])


def test_csv_has_a_row_per_layout_with_exact_integers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["layouts", *SEVENTY_B, "--rows", "3", "--format", "csv", "--rank", "time"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 3
    times = [int(r["lower_bound_ns"]) for r in rows]
    assert times == sorted(times)


def test_scenario_flags_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    data = layouts_json(capsys, "--model", "llama-3.1-8b", "--gpus", "16", "--seq-len", "8192", "--rows", "3")
    assert data["rows"] and all("seq_len=8192" in r["link"] for r in data["rows"])


@pytest.mark.parametrize(
    ("args", "flag"),
    [(("--model", "llama-3.1-70b", "--gpus", "70000"), "--gpus"),
     (("--model", "llama-3.1-70b", "--rows", "0"), "--rows"),
     (("--model", "llama-3.1-70b", "--device", "tpu"), "--device"),
     (("--gpus", "8"), "--model"),
     (("--model", "llama-3.1-70b", "--params", "7B"), "--params"),
     (("--model", "llama-3.1-70b", "--dp", "x"), "--dp")],
)  # fmt: skip
def test_bad_input_exits_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], flag: str
) -> None:
    err = usage_error(capsys, *args)
    assert err.startswith(f"zero3-lab: error: {flag}: ") and "allowed: " in err


def test_more_gpus_than_the_bound_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "--model", "llama-3.1-70b", "--gpus", "70000")
    assert "70,000 is more GPUs than the search's bound" in err and "(allowed: 1 … 65,536)" in err
