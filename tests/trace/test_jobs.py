"""The page's trace jobs without the web: the queue (order, places, joined duplicates, its bound, the
time limit, failures), the SQLite store (stale rows, the cache key) and the trace's command line. The
traces are a fake child process (tests/support/trace_fakes.py), so each test takes a fraction of a second."""

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
from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.ledger.scenario.links import canonical_query
from app.trace.jobs import (
    BUDGET_TENSORS,
    ClientBusy,
    QueueFull,
    RetryLater,
    TooLarge,
    TraceQueue,
    cache_version,
    scenario_flags,
    scenario_of,
    trace_argv,
    trace_tensors,
)
from app.trace.process import STEPS, Outcome, error_message, progress_step, run_process
from app.trace.store import STALE_S, JobStatus, StoreError, TraceStore, summarise
from tests.support.trace_fakes import REPORT, fake_command, open_gate, runs, wait_for

A, B, C, D = "dp=2", "dp=4", "dp=8", "dp=16"


class Clock:
    """A clock the test moves: the store's notion of now."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> TraceStore:
    return TraceStore(tmp_path / "cache" / "traces.sqlite3", "test-version")


def make_queue(store: TraceStore, folder: Path, modes: dict[str, str] | None = None, **options: float) -> TraceQueue:
    """A queue of fake traces; one client may queue many and a failure may be retried at once, unless ``options``
    say otherwise (the tests of those limits)."""
    options = {"per_client": 100, "retry_after_s": 0.0, **options}
    return TraceQueue(store, fake_command(folder, modes), heartbeat_s=0.05, cwd=None, **options)  # type: ignore[arg-type]


def must(store: TraceStore, query: str) -> JobStatus:
    status = store.get(query)
    assert status is not None, f"no job for {query}"
    return status


def state(store: TraceStore, query: str) -> str | None:
    status = store.get(query)
    return None if status is None else status.state


# --------------------------------------------------------------------------- the queue


def test_a_trace_runs_and_its_summary_is_kept(store: TraceStore, tmp_path: Path, queues: list[TraceQueue]) -> None:
    queues.append(queue := make_queue(store, tmp_path))
    first = queue.submit(A)
    assert (first.state, first.place) == ("queued", 1)
    wait_for(lambda: state(store, A) == "finished")
    status = store.get(A)
    assert status is not None and status.summary == summarise(REPORT)
    assert status.summary["traced_peak"] == 759_868 and status.summary["modelled_peak"] == 758_464
    assert json.loads(store.report(A) or "") == REPORT  # the whole report, as the trace printed it
    again = queue.submit(A)  # finished: answered from the cache, nothing runs again
    assert again.state == "finished"
    assert runs(tmp_path) == [A]


def test_jobs_run_one_at_a_time_in_order_and_show_their_place(
    store: TraceStore, tmp_path: Path, queues: list[TraceQueue]
) -> None:
    queues.append(queue := make_queue(store, tmp_path, {A: "block"}))
    queue.submit(A)
    wait_for(lambda: runs(tmp_path) == [A])
    assert queue.submit(B).place == 1
    assert queue.submit(C).place == 2
    assert [(s.state, s.place) for s in (store.get(B), store.get(C)) if s] == [("queued", 1), ("queued", 2)]
    assert state(store, A) == "running"
    assert runs(tmp_path) == [A]  # B and C wait while A runs
    open_gate(tmp_path)
    wait_for(lambda: state(store, C) == "finished")
    assert runs(tmp_path) == [A, B, C]


def test_places_move_up_as_jobs_start(store: TraceStore, tmp_path: Path, queues: list[TraceQueue]) -> None:
    queues.append(queue := make_queue(store, tmp_path, {A: "block", B: "block"}))
    for query in (A, B, C):
        queue.submit(query)
    wait_for(lambda: state(store, A) == "running")
    assert must(store, C).place == 2
    open_gate(tmp_path)  # A and B finish; while B runs, C is next
    wait_for(lambda: state(store, C) == "finished")
    assert runs(tmp_path) == [A, B, C]


def test_the_same_query_joins_the_job_instead_of_queueing_twice(
    store: TraceStore, tmp_path: Path, queues: list[TraceQueue]
) -> None:
    queues.append(queue := make_queue(store, tmp_path, {A: "block"}))
    queue.submit(A)
    queue.submit(B)
    wait_for(lambda: state(store, A) == "running")
    assert queue.submit(A).state == "running"  # joins the running job
    assert (queue.submit(B).state, queue.submit(B).place) == ("queued", 1)  # joins the queued one
    open_gate(tmp_path)
    wait_for(lambda: state(store, B) == "finished")
    assert runs(tmp_path) == [A, B]


def test_another_worker_joins_a_job_through_the_shared_file(
    store: TraceStore, tmp_path: Path, queues: list[TraceQueue]
) -> None:
    queues.append(worker1 := make_queue(store, tmp_path, {A: "block"}))
    queues.append(worker2 := make_queue(TraceStore(store.path, store.version), tmp_path, {A: "block"}))
    worker1.submit(A)
    wait_for(lambda: state(store, A) == "running")
    assert worker2.submit(A).state == "running"
    open_gate(tmp_path)
    wait_for(lambda: state(store, A) == "finished")
    assert runs(tmp_path) == [A]


def test_a_full_queue_refuses_but_still_lets_a_duplicate_join(
    store: TraceStore, tmp_path: Path, queues: list[TraceQueue]
) -> None:
    queues.append(queue := make_queue(store, tmp_path, {A: "block"}, max_queued=2))
    queue.submit(A)
    wait_for(lambda: state(store, A) == "running")  # the running job is not in the queue
    queue.submit(B)
    queue.submit(C)
    with pytest.raises(QueueFull, match="2 traces are already waiting"):
        queue.submit(D)
    assert queue.submit(C).place == 2  # a job already queued is joined, full or not
    assert store.get(D) is None
    open_gate(tmp_path)
    wait_for(lambda: state(store, C) == "finished")
    assert queue.submit(D).state == "queued"  # room again


def test_progress_counts_the_finished_steps(store: TraceStore, tmp_path: Path, queues: list[TraceQueue]) -> None:
    queues.append(queue := make_queue(store, tmp_path, {A: "block"}))
    queue.submit(A)
    # the fake says building 2/2, sharding 1/2 (not a finished step), sharding 2/2, forward 3/3
    wait_for(lambda: must(store, A).done == 3)
    status = store.get(A)
    assert status is not None
    assert (status.state, status.total, status.step) == ("running", STEPS, "iteration 1/2: forward")
    open_gate(tmp_path)


def test_a_trace_over_its_time_limit_is_killed_and_fails(
    store: TraceStore, tmp_path: Path, queues: list[TraceQueue]
) -> None:
    queues.append(queue := make_queue(store, tmp_path, {A: "hang"}, timeout_s=0.5))
    queue.submit(A)
    queue.submit(B)
    wait_for(lambda: state(store, A) == "failed")
    status = store.get(A)
    assert status is not None and status.error is not None
    assert "longer than 0.5 s" in status.error
    wait_for(lambda: state(store, B) == "finished")  # the next job still runs


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fail", "--model: family 'bert' is not yet traceable"),  # the trace's own words, prefix dropped
        # a crash's traceback (paths of the server's files) goes to the server's log, not to the page
        ("crash", "the trace exited with status 1 (its output is in the server's log)"),
        ("garbage", "the trace printed no JSON report"),
    ],
)
def test_a_failed_trace_keeps_its_error_and_can_be_tried_again(
    store: TraceStore, tmp_path: Path, queues: list[TraceQueue], mode: str, message: str
) -> None:
    queues.append(queue := make_queue(store, tmp_path, {A: mode}))
    queue.submit(A)
    wait_for(lambda: state(store, A) == "failed")
    status = store.get(A)
    assert status is not None and status.error is not None
    assert status.error.startswith(message)
    assert "Traceback" not in status.error and "File " not in status.error
    assert queue.submit(A).state == "queued"  # asked again: a failure is not cached for good
    wait_for(lambda: len(runs(tmp_path)) == 2 and state(store, A) == "failed")


def test_closing_stops_the_running_trace_and_lets_the_waiting_ones_go(store: TraceStore, tmp_path: Path) -> None:
    queue = make_queue(store, tmp_path, {A: "hang"})
    queue.submit(A)
    queue.submit(B)
    wait_for(lambda: state(store, A) == "running")
    queue.close()
    assert [state(store, q) for q in (A, B)] == ["failed", "failed"]
    assert "stopped" in (must(store, B).error or "")
    with pytest.raises(RuntimeError):
        queue.submit(C)


def test_an_unwritable_cache_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    queue = TraceQueue(TraceStore(blocker / "traces.sqlite3", "v"), fake_command(tmp_path))
    with pytest.raises(StoreError, match="trace cache cannot be written") as caught:
        queue.submit(A)
    assert str(tmp_path) not in str(caught.value)  # the server's paths are not told to users
    queue.close()


# --------------------------------------------------------------------------- the store


def test_reading_creates_nothing(store: TraceStore) -> None:
    assert store.get(A) is None
    assert store.report(A) is None
    assert not store.path.exists() and not store.path.parent.exists()


def test_a_row_left_by_a_dead_worker_is_stale_and_taken_over(tmp_path: Path) -> None:
    clock = Clock()
    store = TraceStore(tmp_path / "t.sqlite3", "v", clock=clock)
    assert store.claim(A, "dead-worker", 1) is None
    store.start(A, "dead-worker", STEPS, "starting", [])
    assert must(store, A).state == "running"
    joined = store.claim(A, "live-worker", 1)
    assert joined is not None and joined.state == "running"  # still alive: joined
    clock.now += STALE_S + 1  # no heartbeat since
    gone = must(store, A)
    assert (gone.state, gone.gone) == ("failed", True)  # shown as failed, not as a place in a queue that is gone
    assert gone.error is not None and "stopped before it finished" in gone.error
    assert store.claim(A, "live-worker", 1) is None  # taken over
    store.progress(A, "dead-worker", 5, STEPS, "late")  # the old worker's writes no longer land
    assert must(store, A).done == 0


def test_the_cache_key_is_the_query_and_the_version(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    old, new = TraceStore(path, "0.1.0+aaaa"), TraceStore(path, "0.1.0+bbbb")
    assert old.claim(A, "w", 1) is None
    old.finish(A, "w", json.dumps(REPORT), summarise(REPORT))
    assert must(old, A).state == "finished"
    assert new.get(A) is None and old.get(B) is None
    assert cache_version().startswith(__version__ + "+")
    with closing(sqlite3.connect(path)) as db:  # one lookup per read: by the primary key
        plan = db.execute("EXPLAIN QUERY PLAN SELECT state FROM traces WHERE version = ? AND query = ?", ("v", A))
        assert "PRIMARY KEY" in " ".join(str(row) for row in plan.fetchall())


# --------------------------------------------------------------------------- the child process


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
        assert store.claim(q, "w", 1) is None
        store.finish(q, "w", report, summarise(REPORT))
    assert [q for q in queries if store.get(q) is not None] == queries[2:]  # the newest 4
    monkeypatch.setattr(store_module, "KEEP_BYTES", 2 * size + 1)
    now[0] += 1
    assert store.claim("dp=128", "w", 1) is None
    store.fail("dp=128", "w", "a failure keeps no report")
    assert [q for q in [*queries, "dp=128"] if store.get(q) is not None] == ["dp=16", "dp=32", "dp=128"]


# --------------------------------------------------------------------------- fair and bounded


def test_one_client_may_have_only_so_many_traces_and_the_others_keep_their_place(
    store: TraceStore, tmp_path: Path, queues: list[TraceQueue]
) -> None:
    queues.append(queue := make_queue(store, tmp_path, {A: "block"}, per_client=2))
    queue.submit(A, client="10.0.0.1")
    wait_for(lambda: runs(tmp_path) == [A])
    queue.submit(B, client="10.0.0.1")
    with pytest.raises(ClientBusy, match="already have 2 traces"):
        queue.submit(C, client="10.0.0.1")
    assert queue.submit(C, client="10.0.0.2").place == 2  # another client is not held up by the first
    assert queue.submit(B, client="10.0.0.1").state == "queued"  # joining a job of one's own is no new one
    open_gate(tmp_path)
    wait_for(lambda: state(store, C) == "finished")
    assert queue.submit(D, client="10.0.0.1").state == "queued"  # once its traces ran, the client may ask again


def test_a_failed_trace_is_not_run_again_for_a_while(tmp_path: Path, queues: list[TraceQueue]) -> None:
    clock = Clock()
    store = TraceStore(tmp_path / "t.sqlite3", "v", clock=clock)
    queues.append(queue := make_queue(store, tmp_path, {A: "fail"}, retry_after_s=120.0))
    queue.submit(A)
    wait_for(lambda: state(store, A) == "failed")
    clock.now += 30
    with pytest.raises(RetryLater) as caught:
        queue.submit(A)
    assert caught.value.seconds == 91 and "tried again in 91 s" in str(caught.value)
    clock.now += 91
    assert queue.submit(A).state == "queued"
    assert runs(tmp_path) in ([A], [A, A])  # the second run may have started already


def test_a_model_past_the_pages_trace_budget_is_refused_before_it_queues(
    store: TraceStore, tmp_path: Path, queues: list[TraceQueue]
) -> None:
    """The budget counts parameter tensors (each expert's): a trace's time on fake tensors follows them."""
    queues.append(queue := TraceQueue(store, fake_command(tmp_path), heartbeat_s=0.05, cwd=None))
    moe = compact({"model_type": "mixtral", "hidden_size": 256, "num_hidden_layers": 48, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1024, "num_local_experts": 64,
                   "num_experts_per_tok": 2})  # fmt: skip
    query = canonical_query(parse_scenario({"model": moe, "dp": 8}))
    with pytest.raises(TooLarge) as caught:
        queue.submit(query)
    assert caught.value.tensors == trace_tensors(query) > BUDGET_TENSORS
    assert "run the command below in a terminal, which has no such limit" in str(caught.value)
    assert store.get(query) is None and runs(tmp_path) == []  # nothing queued, nothing ran
    seven_b = canonical_query(parse_scenario({"model": "llama-2-7b", "dp": 8}))
    assert trace_tensors(seven_b) == 2 + 32 * 9 + 1 <= BUDGET_TENSORS  # embedding and head, 32 layers of 9, final norm
