"""The trace cache (its rows, its key, what it keeps), the trace's child process (progress lines, error messages,
nothing left behind) and the trace's command line."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from app import __version__
from app.cli.main import build_parser
from app.cli.scenario_args import scenario_from_args
from app.ledger.scenario import parse_scenario
from app.ledger.scenario.links import canonical_query
from app.trace.process import Outcome, error_message, progress_step, run_process
from app.trace.runner import cache_version, scenario_flags, scenario_of, trace_argv
from app.trace.store import TraceStore, summarise
from tests.support.trace_fakes import REPORT, wait_for

A, B = "dp=2", "dp=4"


@pytest.fixture
def store(tmp_path: Path) -> TraceStore:
    return TraceStore(tmp_path / "cache" / "traces.sqlite3", "test-version")


def test_a_claim_is_one_transaction_against_the_row_the_caller_read(store: TraceStore) -> None:
    """Two web workers asking for the same query: the second claim finds the row the first wrote and joins it."""
    assert store.claim(A, "task-1", "10.0.0.1", replacing=None) is None
    taken = store.claim(A, "task-2", "10.0.0.2", replacing=None)  # read "no row", but there is one now
    assert taken is not None and (taken.task, taken.client) == ("task-1", "10.0.0.1")
    row = store.get(A)
    assert row is not None
    assert store.claim(A, "task-3", "10.0.0.2", replacing=row.updated) is None  # replacing what it read: taken
    assert store.queued_for("10.0.0.2") == [A] and store.queued_for("10.0.0.1") == []


def test_an_end_lands_only_on_its_own_tasks_row(store: TraceStore) -> None:
    store.claim(A, "old", "", replacing=None)
    row = store.get(A)
    assert row is not None
    store.claim(A, "new", "", replacing=row.updated)
    store.fail(A, "old", "the old task's late end")  # another task holds the row now: left alone
    assert store.get(A) is not None and store.get(A).state == "queued"  # type: ignore[union-attr]
    store.finish(A, "new", json.dumps(REPORT), summarise(REPORT))
    assert store.get(A).state == "finished"  # type: ignore[union-attr]


def test_a_file_of_the_previous_layout_is_made_again(store: TraceStore) -> None:
    store.path.parent.mkdir(parents=True)
    with closing(sqlite3.connect(store.path)) as db:
        db.execute("CREATE TABLE traces (version TEXT, query TEXT, owner TEXT, PRIMARY KEY (version, query))")
        db.execute("INSERT INTO traces VALUES ('test-version', 'dp=2', 'w')")
        db.commit()
    store.claim(B, "t", "", replacing=None)
    assert store.get(B) is not None and store.get(A) is None


def test_reading_creates_nothing(store: TraceStore) -> None:
    assert store.get(A) is None
    assert store.report(A) is None
    assert not store.path.exists() and not store.path.parent.exists()


def test_the_cache_key_is_the_query_and_the_version(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    old, new = TraceStore(path, "0.1.0+aaaa"), TraceStore(path, "0.1.0+bbbb")
    assert old.claim(A, "w", "", replacing=None) is None
    old.finish(A, "w", json.dumps(REPORT), summarise(REPORT))
    assert old.get(A) is not None and old.get(A).state == "finished"  # type: ignore[union-attr]
    assert new.get(A) is None and old.get(B) is None
    assert cache_version().startswith(__version__ + "+")
    with closing(sqlite3.connect(path)) as db:  # one lookup per read: by the primary key
        plan = db.execute("EXPLAIN QUERY PLAN SELECT state FROM traces WHERE version = ? AND query = ?", ("v", A))
        assert "PRIMARY KEY" in " ".join(str(row) for row in plan.fetchall())


def test_progress_lines_and_error_messages() -> None:
    assert progress_step("zero3-lab trace: iteration 1/2: backward 33/33") == "iteration 1/2: backward"
    assert progress_step("zero3-lab trace: building layers 3/32") is None
    assert progress_step("some warning") is None
    killed = Outcome(None, "", (), timed_out=True)
    assert (
        error_message(killed, 300) == "the trace took longer than 300 s, the lab's limit for one trace, and was stopped"
    )
    quiet = Outcome(9, "", ("zero3-lab trace: building layers 2/2",), timed_out=False)
    assert error_message(quiet, 300) == "the trace exited with status 9"


@pytest.mark.parametrize(
    "raw",
    [
        {"model": "llama-2-7b", "dp": 8, "param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2},
        {"model": "mixtral-8x7b-v0.1", "dp": 64, "act_policy": "full", "reshard_after_forward": 0, "reduce_bytes": 2},
        {"name": "-starts like a flag & has spaces", "seq_len": 8192, "capacity_bytes": "80GiB"},
        {},
    ],
)
def test_the_trace_command_is_the_scenario(raw: dict[str, object]) -> None:
    """The flags the job passes read back, through the CLI's own parser, as the same scenario."""
    s = parse_scenario(raw)
    query = canonical_query(s)
    assert scenario_of(query) == s
    argv = trace_argv(query)
    assert argv[1:6] == ["-m", "app.cli", "trace", "--format", "json"]
    assert argv[6:] == scenario_flags(s)
    args = build_parser().parse_args(argv[3:])
    assert scenario_from_args(args) == s


def test_nothing_a_trace_leaves_behind_holds_up_its_job(tmp_path: Path) -> None:
    """A child that exits while something it started still holds its output pipes: the job finishes with
    the child (its process group is killed), instead of waiting on the pipes past any time limit (a
    review found it took the grandchild's whole life: 6 s against a 1 s limit)."""
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 600 & echo $! > {pid_file}; echo '{{}}'"
    outcomes: list[Outcome] = []
    runner = threading.Thread(
        target=lambda: outcomes.append(
            run_process(["sh", "-c", script], timeout_s=300, on_line=lambda _: None, on_tick=lambda: None, tick_s=1)
        ),
        daemon=True,
    )
    runner.start()
    runner.join(timeout=60)  # a hang guard, not a speed check: without the fix this waits 600 s
    assert not runner.is_alive()
    assert outcomes[0].stdout.strip() == "{}" and outcomes[0].returncode == 0 and not outcomes[0].timed_out
    grandchild = int(pid_file.read_text(encoding="utf-8"))
    wait_for(lambda: not _alive(grandchild))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:  # a zombie waits only to be reaped
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_the_cache_keeps_the_newest_traces_within_a_count_and_a_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finished traces are pruned oldest first: beyond KEEP_ROWS of them, and beyond KEEP_BYTES of their
    reports (so the file's size does not follow the number of scenarios traced)."""
    import app.trace.store as store_module

    now = [0.0]
    store = TraceStore(tmp_path / "t.sqlite3", "v", clock=lambda: now[0])
    report = json.dumps(REPORT)
    size = len(report) + len(json.dumps(summarise(REPORT)))
    monkeypatch.setattr(store_module, "KEEP_ROWS", 4)
    monkeypatch.setattr(store_module, "KEEP_BYTES", 10 * size)
    queries = [f"dp={2**i}" for i in range(6)]
    for q in queries:
        now[0] += 1
        assert store.claim(q, "w", "", replacing=None) is None
        store.finish(q, "w", report, summarise(REPORT))
    assert [q for q in queries if store.get(q) is not None] == queries[2:]  # the newest 4
    monkeypatch.setattr(store_module, "KEEP_BYTES", 2 * size + 1)
    now[0] += 1
    assert store.claim("dp=128", "w", "", replacing=None) is None
    store.fail("dp=128", "w", "a failure keeps no report")
    assert [q for q in [*queries, "dp=128"] if store.get(q) is not None] == ["dp=16", "dp=32", "dp=128"]
