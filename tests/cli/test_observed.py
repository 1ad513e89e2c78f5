"""``zero3-lab reconcile`` and ``zero3-lab probe`` run as a user runs them: a process, its output as text."""

from __future__ import annotations

import json
from pathlib import Path

from app.ledger.ledger import compute_ledger
from app.ledger.scenario import parse_scenario
from tests.support import paths
from tests.support.cli_run import run_cli

DATA = paths.DATA / "observed"
DP8 = str(DATA / "llama2-7b-dp8.jsonl")
DP2 = str(DATA / "llama2-7b-dp2.jsonl")
FLAGS = ("--model", "llama-2-7b", "--param-bytes", "4", "--master-bytes", "0", "--grad-bytes", "4",
         "--gather-bytes", "2", "--act-policy", "full")  # fmt: skip


def test_the_table_names_every_instant_and_entry() -> None:
    proc = run_cli("reconcile", DP8, *FLAGS, "--dp", "8")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("zero3-lab reconcile: Llama-2-7B at D = 8, stage 3, step 1 of 8 ranks (world 8)")
    for heading in ("At end-of-forward — lab: end-of-forward", "Peak before end-of-backward — lab: worst of",
                    "At after-step — lab: steady state", "Peak of step 1 — lab: the stage-3 peak"):  # fmt: skip
        assert heading in out
    assert "allocator reserve above allocated (reserved − allocated): min " in out
    assert "(rank 5)" in out  # the rank with more reserve is named
    assert "CUDA context, measured at start (device used − reserved)" in out
    assert "unexplained (allocated − estimate)" in out
    s = parse_scenario({"model": "llama-2-7b", "dp": 8, "param_bytes": 4, "master_bytes": 0, "grad_bytes": 4,
                        "gather_bytes": 2, "act_policy": "full"})  # fmt: skip
    peak = compute_ledger(s).stages[3].peak
    assert f"The lab's stage-3 peak: {peak.total:,} B" in out
    assert proc.stderr == ""


def test_json_carries_exact_integers_that_add_up() -> None:
    proc = run_cli("reconcile", DP2, *FLAGS, "--dp", "2", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == "zero3-lab.reconcile/1"
    assert (data["step"], data["ranks"], data["world"]) == (2, [0, 1], 2)
    assert data["scenario"].startswith("act_policy=full&dp=2")
    assert [c["key"] for c in data["comparisons"]] == [
        "end-of-forward", "end-of-forward:peak", "end-of-backward", "end-of-backward:peak", "after-step",
        "after-step:peak", "step:peak"]  # fmt: skip
    for c in data["comparisons"]:
        for row in c["rows"]:
            assert row["estimate"] + sum(row["entries"].values()) == row["observed"] == row["reserved"] + row["context"]
            assert row["line"].startswith(f"{DP2} line ")  # a file's rows name the file and the line
        for name, spread in c["ranges"].items():
            values = [r["entries"][name] if name in r["entries"] else r[name] for r in c["rows"]]
            assert (spread["min"], spread["max"]) == (min(values), max(values))


def test_several_files_read_as_one(tmp_path: Path) -> None:
    lines = Path(DP8).read_text(encoding="utf-8").splitlines(keepends=True)
    half = len(lines) // 2
    (tmp_path / "a.jsonl").write_text("".join(lines[:half]), encoding="utf-8")
    (tmp_path / "b.jsonl").write_text("".join(lines[half:]), encoding="utf-8")
    whole = run_cli("reconcile", DP8, *FLAGS, "--dp", "8", "--format", "json")
    split = run_cli("reconcile", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), *FLAGS, "--dp", "8",
                    "--format", "json")  # fmt: skip
    assert split.returncode == whole.returncode == 0, split.stderr
    strip = [{k: v for k, v in r.items() if k != "line"} for c in json.loads(whole.stdout)["comparisons"]
             for r in c["rows"]]  # fmt: skip
    assert strip == [{k: v for k, v in r.items() if k != "line"} for c in json.loads(split.stdout)["comparisons"]
                     for r in c["rows"]]  # fmt: skip


def test_a_malformed_file_exits_2_naming_each_line_without_a_traceback() -> None:
    path = str(DATA / "malformed.jsonl")
    proc = run_cli("reconcile", path, *FLAGS, "--dp", "2")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert [line.split(": ")[3] for line in lines] == [f"{path} line {n}" for n in (3, 4, 5, 6, 6, 7)]
    assert all(line.startswith("zero3-lab: error: reconcile: ") for line in lines)
    assert f"{path} line 3: allocated: Input should be a valid integer" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(Path(DP8).read_bytes() * (4 * 1024 * 1024 // Path(DP8).stat().st_size + 1))
    cases = [
        ((str(big), "--dp", "8"), f"{big} is larger than 4,194,304 bytes"),
        ((str(tmp_path / "missing.jsonl"), "--dp", "8"), "cannot read"),
        ((DP8, "--dp", "0"), "--dp: 0 is out of range"),
        ((DP8, "--dp", "8", "--step", "7"), "step: 7 is not recorded by ranks 0, 1, 2, 3, 4, 5, 6, 7"),
        ((DP8, "--dp", "8", "--step", "-1"), "--step: -1 is out of range"),
    ]
    for args, needle in cases:
        proc = run_cli("reconcile", *args, *FLAGS)
        assert proc.returncode == 2, args
        assert needle in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    bare = run_cli("reconcile", DP8, "--dp", "8", "--params", "7B")
    assert bare.returncode == 2
    assert "scenario: has no schedule to reconcile with: no model" in bare.stderr


def test_probe_prints_the_probe() -> None:
    proc = run_cli("probe")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (paths.APP / "observed" / "probe.py").read_text(encoding="utf-8")
