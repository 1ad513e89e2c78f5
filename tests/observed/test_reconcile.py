"""Observed runs: the probe, the reading of its JSON lines, and the reconciliation's arithmetic.

The fixtures in tests/data/observed/ were written by hand as a GPU would report them (allocations in
512-byte blocks, reserves in 2 MiB segments): Llama-2-7B with FSDP2's layout and full recomputation,
2 ranks over 3 steps and 8 ranks over 2 steps (rank 5 with 1.5 GiB more allocator reserve), and a
file with one bad line of each kind. The expected figures are read from the fixtures and from the
lab's schedule here, independently of the code under test.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.ledger.ledger import compute_ledger
from app.ledger.peak.schedule import Instant
from app.ledger.scenario import Scenario, parse_scenario
from app.observed.reconcile import (
    ALLOCATOR_RESERVE,
    CUDA_CONTEXT,
    UNEXPLAINED,
    Reconciliation,
    reconcile,
    stretch_phases,
)
from app.observed.records import (
    MAX_DEVICE_BYTES,
    MAX_LINE_BYTES,
    MAX_LINES,
    MAX_RANKS,
    ObservedError,
    read_observed,
)
from tests.support import paths

DATA = paths.DATA / "observed"
APP = paths.APP
FSDP2 = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2, "act_policy": "full"}


def scenario(dp: int, **extra: object) -> Scenario:
    return parse_scenario({"model": "llama-2-7b", "dp": dp, **FSDP2, **extra})


def records(name: str) -> list[dict[str, Any]]:
    """The fixture's lines as plain JSON (not through the code under test)."""
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def instants(s: Scenario) -> list[Instant]:
    walk = compute_ledger(s).stages[3].peak.schedule
    assert walk is not None
    return list(walk.instants)


def lab_instant(s: Scenario, key: str) -> Instant:
    return next(i for i in instants(s) if i.key == key)


def steady(s: Scenario) -> int:
    step = lab_instant(s, "optimizer-step")
    return step.total - step.bytes_of("temporaries")


def worst(s: Scenario, *phases: str) -> int:
    return max(i.total for i in instants(s) if i.phase in phases)


def run(name: str, dp: int, step: int | None = None, **extra: object) -> Reconciliation:
    return reconcile(scenario(dp, **extra), read_observed((DATA / name).read_bytes()), step)


def find(rec: Reconciliation, key: str) -> Any:
    return next(c for c in rec.comparisons if c.key == key)


def problems(data: bytes) -> list[str]:
    with pytest.raises(ObservedError) as info:
        read_observed(data)
    return [str(p) for p in info.value.problems]


GOOD = {"v": 1, "rank": 0, "world": 2, "step": 1, "instant": "end-of-forward", "allocated": 1024,
        "max_allocated": 2048, "reserved": 4096, "max_reserved": 4096}  # fmt: skip
START = {"v": 1, "rank": 0, "world": 2, "step": 0, "instant": "start", "allocated": 512, "max_allocated": 512,
         "reserved": 2048, "device_total": 10_000, "device_used": 3_000}  # fmt: skip


def jsonl(*objects: dict[str, Any]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


# --------------------------------------------------------------------------- reading the records


def test_the_fixtures_read_rank_by_rank_in_run_order() -> None:
    observed = read_observed((DATA / "llama2-7b-dp8.jsonl").read_bytes())
    assert list(observed.ranks) == list(range(8))
    assert observed.world == 8
    for samples in observed.ranks.values():
        assert [s.record.instant for s in samples] == ["start"] + [
            "end-of-forward",
            "end-of-backward",
            "after-step",
        ] * 2
        assert [s.record.step for s in samples[1:]] == [0, 0, 0, 1, 1, 1]


def test_a_malformed_file_names_each_line_and_field() -> None:
    found = problems((DATA / "malformed.jsonl").read_bytes())
    assert found == [
        "line 3: allocated: Input should be a valid integer",  # 2.6952716288e10: a float, even a whole one
        "line 4: not valid JSON: Expecting property name enclosed in double quotes at column 111",
        "line 5: allocated: Field required",
        "line 6: instant: Input should be 'start', 'end-of-forward', 'end-of-backward' or 'after-step'",
        "line 6: gpu: Extra inputs are not permitted",
        "line 7: max_allocated: 53,910,425,088 is below allocated 53,910,425,600",
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"allocated": True}, "line 1: allocated: Input should be a valid integer"),
        ({"allocated": -1}, "line 1: allocated: Input should be greater than or equal to 0"),
        ({"max_allocated": MAX_DEVICE_BYTES + 1}, "line 1: max_allocated: Input should be less than or equal to"),
        ({"allocated": "1024"}, "line 1: allocated: Input should be a valid integer"),
        ({"v": 2}, "line 1: v: Input should be less than or equal to 1"),
        ({"rank": 2}, "line 1: rank: 2 is not below world 2"),
        ({"step": -1}, "line 1: step: Input should be greater than or equal to 0"),
        ({"reserved": 512}, "line 1: reserved: 512 is below allocated 1,024"),
        ({"max_reserved": 2048}, "line 1: max_reserved: 2,048 is below reserved 4,096"),
        ({"device_used": 5}, "line 1: device_used: only the start record carries it"),
    ],
)
def test_each_bound_is_named(change: dict[str, Any], expected: str) -> None:
    found = problems(jsonl({**GOOD, **change}))
    assert any(p.startswith(expected) for p in found), found


def test_the_start_record_needs_the_devices_memory() -> None:
    bare = {k: v for k, v in START.items() if k not in ("device_total", "device_used")}
    assert problems(jsonl(bare)) == [
        "line 1: device_total: the start record needs it (torch.cuda.mem_get_info)",
        "line 1: device_used: the start record needs it (torch.cuda.mem_get_info)",
    ]
    assert problems(jsonl({**START, "device_used": 10_001})) == [
        "line 1: device_used: 10,001 is above device_total 10,000"
    ]
    # below what the allocator reserved, the CUDA context (device_used − reserved) would be negative
    assert problems(jsonl({**START, "device_used": 2_047})) == [
        "line 1: device_used: 2,047 is below reserved 2,048: the device holds at least what the allocator reserved"
    ]


def test_lines_that_are_not_records() -> None:
    assert problems(b"[1, 2]\n") == ["line 1: must be a JSON object, one record per line"]
    assert problems(b'{"v": 1' + b" " * MAX_LINE_BYTES + b"}\n")[0].startswith("line 1: longer than 1,024 bytes")
    assert problems(b"\xff\xfe\n")[0].startswith("line 1: not valid JSON")
    assert problems(b"[" * 100_000 + b"\n")[0].startswith("line 1: longer than")
    assert problems(b"") == ["no records: paste or upload the probe's JSON lines"]


def test_too_large_inputs_are_refused_before_reading_them() -> None:
    line = jsonl(GOOD)
    big = line * (4 * 1024 * 1024 // len(line) + 1)
    assert problems(big) == ["the input is larger than 4,194,304 bytes"]
    with pytest.raises(ObservedError, match="larger than 100 bytes"):
        read_observed(line * 2, max_bytes=100)


def test_too_many_lines_and_ranks() -> None:
    assert problems(b"\n" * MAX_LINES + b"{}") == [f"line {MAX_LINES + 1:,}: more than {MAX_LINES:,} lines"]
    many = jsonl(*({**START, "rank": r, "world": MAX_RANKS + 1} for r in range(MAX_RANKS + 1)))
    assert problems(many) == [f"line {MAX_RANKS + 1:,}: rank: more than {MAX_RANKS:,} ranks"]


def test_duplicates_and_disagreeing_world_sizes() -> None:
    assert problems(jsonl(GOOD, GOOD)) == ["line 2: instant: rank 0 step 1 end-of-forward already on line 1"]
    assert problems(jsonl(START, START)) == ["line 2: instant: rank 0 start already on line 1"]
    assert problems(jsonl(GOOD, {**GOOD, "rank": 1, "world": 3})) == ["line 2: world: 3, but line 1 says 2"]


def test_a_bom_blank_lines_and_crlf_are_no_error() -> None:
    data = b"\xef\xbb\xbf" + jsonl(START).replace(b"\n", b"\r\n") + b"\r\n\r\n" + jsonl(GOOD)
    observed = read_observed(data)
    assert [s.where.line for s in observed.ranks[0]] == [1, 4]


# --------------------------------------------------------------------------- the arithmetic


@pytest.mark.parametrize(("name", "dp"), [("llama2-7b-dp2.jsonl", 2), ("llama2-7b-dp8.jsonl", 8)])
def test_every_byte_of_the_difference_is_named(name: str, dp: int) -> None:
    """observed = reserved + context = estimate + allocator reserve + CUDA context + unexplained, exactly."""
    rec = run(name, dp)
    assert len(rec.comparisons) == 7  # three marks at and peak, then the step's peak
    for c in rec.comparisons:
        assert [r.rank for r in c.rows] == list(range(dp))
        for r in c.rows:
            entries = {e.name: e.bytes for e in r.entries}
            assert set(entries) == {ALLOCATOR_RESERVE, CUDA_CONTEXT, UNEXPLAINED}
            assert r.observed == r.reserved + r.context
            assert r.estimate + sum(entries.values()) == r.observed
            assert all(type(v) is int for v in (*entries.values(), r.estimate, r.observed))


def test_the_at_rows_read_the_labs_instants_and_the_records() -> None:
    s = scenario(8)
    rec = run("llama2-7b-dp8.jsonl", 8)
    assert rec.step == 1  # the last step every rank recorded
    lines = records("llama2-7b-dp8.jsonl")
    starts = {o["rank"]: o for o in lines if o["instant"] == "start"}
    for mark, estimate in (("end-of-forward", lab_instant(s, "end-of-forward").total),
                           ("end-of-backward", steady(s)), ("after-step", steady(s))):  # fmt: skip
        observed = {o["rank"]: o for o in lines if o["instant"] == mark and o["step"] == 1}
        for r in find(rec, mark).rows:
            o, start = observed[r.rank], starts[r.rank]
            context = start["device_used"] - start["reserved"]
            assert (r.estimate, r.allocated, r.reserved, r.context) == (
                estimate, o["allocated"], o["reserved"], context)  # fmt: skip
            assert r.entry(ALLOCATOR_RESERVE) == o["reserved"] - o["allocated"]
            assert r.entry(CUDA_CONTEXT) == context
            assert r.entry(UNEXPLAINED) == o["allocated"] - estimate


def test_the_peak_rows_are_the_worst_of_their_stretch() -> None:
    s = scenario(8)
    rec = run("llama2-7b-dp8.jsonl", 8)
    # after-step → end-of-forward: the steady state held at the mark is above every forward instant
    assert steady(s) > worst(s, "forward")
    assert {r.estimate for r in find(rec, "end-of-forward:peak").rows} == {steady(s)}
    assert {r.estimate for r in find(rec, "end-of-backward:peak").rows} == {worst(s, "loss", "backward")}
    assert {r.estimate for r in find(rec, "after-step:peak").rows} == {lab_instant(s, "optimizer-step").total}
    lines = records("llama2-7b-dp8.jsonl")
    for r in find(rec, "end-of-backward:peak").rows:
        o = next(o for o in lines if (o["rank"], o["step"], o["instant"]) == (r.rank, 1, "end-of-backward"))
        assert (r.allocated, r.reserved) == (o["max_allocated"], o["max_reserved"])


def test_the_steps_peak_is_the_stage3_peak_before_contingency() -> None:
    s = scenario(8, contingency_pct=10)
    peak = compute_ledger(s).stages[3].peak
    rec = reconcile(s, read_observed((DATA / "llama2-7b-dp8.jsonl").read_bytes()))
    lines = records("llama2-7b-dp8.jsonl")
    assert (rec.peak_subtotal, rec.contingency, rec.peak_total) == (peak.subtotal, peak.contingency, peak.total)
    assert peak.instant is not None and rec.peak_instant == peak.instant.key
    for r in rec.step_peak.rows:
        mine = [o for o in lines if o["rank"] == r.rank and o["step"] == 1 and o["instant"] != "start"]
        assert r.estimate == peak.subtotal
        assert r.allocated == max(o["max_allocated"] for o in mine)
        assert r.reserved == max(o["max_reserved"] for o in mine)
    assert rec.covered == all(r.observed <= peak.total for r in rec.step_peak.rows)
    assert rec.fits_capacity


def test_min_and_max_across_ranks_name_the_rank_with_more_reserve() -> None:
    rec = run("llama2-7b-dp8.jsonl", 8)
    for c in rec.comparisons:
        reserve = c.range_of(ALLOCATOR_RESERVE)
        assert reserve.max_rank == 5
        others = [r.entry(ALLOCATOR_RESERVE) for r in c.rows if r.rank != 5]
        assert reserve.max - max(others) >= 1535 * 2**20  # the fixture gives rank 5 1,536 MiB more reserved
        assert reserve.min == min(r.entry(ALLOCATOR_RESERVE) for r in c.rows)
        context = c.range_of(CUDA_CONTEXT)
        assert (context.min_rank, context.max_rank) == (0, 7)  # the fixture's context grows 2 MiB a rank
        assert context.max - context.min == 7 * 2 * 2**20
        assert c.range_of("observed").max == max(r.observed for r in c.rows)


def test_choosing_a_step() -> None:
    assert run("llama2-7b-dp2.jsonl", 2).step == 2
    first = run("llama2-7b-dp2.jsonl", 2, step=0)
    assert first.step == 0
    assert any("step 0 runs before the optimizer creates its states" in note for note in first.notes)
    with pytest.raises(ObservedError, match="step: 3 is not recorded by ranks 0, 1"):
        run("llama2-7b-dp2.jsonl", 2, step=3)


def test_a_rank_without_a_start_record_has_no_context_measured() -> None:
    data = jsonl(START, GOOD, {**GOOD, "rank": 1})
    rec = reconcile(scenario(2), read_observed(data))
    rows = {r.rank: r for r in find(rec, "end-of-forward").rows}
    assert (rows[0].context, rows[0].context_measured) == (3_000 - 2048, True)
    assert (rows[1].context, rows[1].context_measured) == (0, False)
    assert rows[1].estimate + sum(e.bytes for e in rows[1].entries) == rows[1].observed == GOOD["reserved"]
    assert any("no start record for rank 1" in note for note in rec.notes)
    assert "no after-step in step 1 on ranks 0, 1: the stretch before it is in the next mark's peak there" in rec.notes


def test_a_step_not_recorded_by_every_rank_and_a_start_alone() -> None:
    with pytest.raises(ObservedError, match="step: rank 1 recorded no step"):
        reconcile(scenario(2), read_observed(jsonl(GOOD, {**START, "rank": 1})))
    with pytest.raises(ObservedError, match="step: no step is recorded by every rank"):
        reconcile(scenario(2), read_observed(jsonl(GOOD, {**GOOD, "rank": 1, "step": 2})))


def test_a_scenario_without_a_schedule_is_refused_with_the_reason() -> None:
    with pytest.raises(ObservedError, match="scenario: has no schedule to reconcile with: no model"):
        reconcile(parse_scenario({}), read_observed(jsonl(GOOD)))


def test_notes_name_a_different_world_and_a_declared_overhead() -> None:
    rec = run("llama2-7b-dp2.jsonl", 4, overhead_bytes=10**9)
    assert any("world size is 2 and the scenario's dp 4" in note for note in rec.notes)
    assert any("overhead_bytes 1,000,000,000" in note for note in rec.notes)


def test_stretches_follow_the_step_order() -> None:
    assert stretch_phases(None, "end-of-forward") == ("forward",)
    assert stretch_phases("start", "end-of-backward") == ("forward", "loss", "backward")
    assert stretch_phases("end-of-forward", "after-step") == ("loss", "backward", "optimizer")
    assert stretch_phases("after-step", "after-step") == ("forward", "loss", "backward", "optimizer")
    assert stretch_phases("end-of-backward", "end-of-forward") == ("optimizer", "forward")


def test_the_lab_phases_are_the_ones_the_stretches_name() -> None:
    assert {i.phase for i in instants(scenario(8))} == {"forward", "loss", "backward", "optimizer"}


# --------------------------------------------------------------------------- the modules stay small and exact

OBSERVED_CORE = [APP / "observed" / "records.py", APP / "observed" / "reconcile.py", APP / "observed" / "probe.py"]
WEB = ("fastapi", "starlette", "jinja2", "uvicorn", "app.web", "app.cli")


def imports(path: Path) -> list[tuple[str, int]]:
    """(module, depth) of every import: depth 0 at module level, 1 inside a function."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, depth: int) -> None:
        for child in ast.iter_child_nodes(node):
            inner = depth + isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((alias.name, inner) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                assert child.level == 0 and child.module is not None
                found.append((child.module, inner))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), 0)
    return found


def test_the_probe_imports_only_the_standard_library_and_torch_lazily() -> None:
    found = imports(APP / "observed" / "probe.py")
    assert ("torch", 1) in found
    for name, depth in found:
        top = name.split(".")[0]
        if top == "torch":
            assert depth > 0, "torch at module level: importing the probe would need torch"
        else:
            assert top in sys.stdlib_module_names or top == "__future__", name


@pytest.mark.parametrize("path", OBSERVED_CORE, ids=lambda p: p.name)
def test_the_core_imports_no_web_stack(path: Path) -> None:
    bad = [n for n, _ in imports(path) if any(n == w or n.startswith(w + ".") for w in WEB)]
    assert bad == []


@pytest.mark.parametrize("path", sorted((APP / "observed").glob("*.py")), ids=lambda p: p.name)
def test_no_float_or_true_division_in_byte_arithmetic(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, float)] == []
    assert [n.lineno for n in ast.walk(tree) if isinstance(n, ast.BinOp | ast.AugAssign)
            and isinstance(n.op, ast.Div)] == []  # fmt: skip


# --------------------------------------------------------------------------- the probe, without a GPU


def test_the_probe_writes_records_the_reader_accepts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.observed import probe

    calls: list[bool] = []

    def fake(device: int, *, with_totals: bool) -> dict[str, int]:
        calls.append(with_totals)
        figures = {"allocated": 1024 * len(calls), "max_allocated": 4096 * len(calls),
                   "reserved": 8192 * len(calls), "max_reserved": 8192 * len(calls)}  # fmt: skip
        return {**figures, "device_total": 10**9, "device_used": 10**6} if with_totals else figures

    monkeypatch.setattr(probe, "read_device", fake)
    p = probe.Probe(tmp_path / "probe", rank=1, world=2, device=0)  # no torch needed with all three given
    p.start()
    for mark in ("end-of-forward", "end-of-backward", "after-step", "end-of-forward", "after-step", "after-step"):
        p.mark(mark)
    with pytest.raises(ValueError, match="unknown instant 'loss'"):
        p.mark("loss")
    assert calls == [True] + [False] * 6
    observed = read_observed((tmp_path / "probe" / "rank-1.jsonl").read_bytes())
    steps = [(s.record.step, s.record.instant) for s in observed.ranks[1]]
    assert steps == [(0, "start"), (0, "end-of-forward"), (0, "end-of-backward"), (0, "after-step"),
                     (1, "end-of-forward"), (1, "after-step"), (2, "after-step")]  # fmt: skip
    assert observed.world == 2
    # a second run in the same folder replaces the first one's records (appending made duplicates)
    again = probe.Probe(tmp_path / "probe", rank=1, world=2, device=0)
    again.start()
    again.mark("end-of-forward")
    rerun = read_observed((tmp_path / "probe" / "rank-1.jsonl").read_bytes())
    assert [(s.record.step, s.record.instant) for s in rerun.ranks[1]] == [(0, "start"), (0, "end-of-forward")]


@pytest.mark.trace
def test_the_probe_finds_its_rank_from_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.trace import torch_installed

    if not torch_installed():
        pytest.skip("torch is not installed")
    from app.trace import import_torch

    import_torch()
    from app.observed import probe

    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert probe._rank_and_world() == (3, 4)  # no process group here: torchrun's variables


def test_the_probe_is_one_file_that_runs_on_its_own(tmp_path: Path) -> None:
    """``zero3-lab probe`` prints this very file; saved elsewhere it imports with no zero3-lab around."""
    from app.observed.probe import source

    text = source()
    assert text == (APP / "observed" / "probe.py").read_text(encoding="utf-8")
    (tmp_path / "zero3_probe.py").write_text(text, encoding="utf-8")
    code = "import sys; import zero3_probe as p; assert 'torch' not in sys.modules; print(p.MARKS)"

    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "end-of-forward" in proc.stdout
