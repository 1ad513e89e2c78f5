"""The page's trace jobs on huey's queue, without the web: order and places, joined duplicates, the queue's bound,
progress, the time limit, failures, a worker that stops or dies, the version a worker runs, and the fair-use limits.
Each trace is a fake child process (tests/support/trace_fakes.py) run by huey's own consumer in this process
(tests/support/trace_queue.py), so each test takes a fraction of a second."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.ledger.scenario.links import canonical_query
from app.trace.jobs import (
    BUDGET_TENSORS,
    LOST,
    ClientBusy,
    QueueDown,
    QueueFull,
    RetryLater,
    TooLarge,
    TraceQueue,
    trace_tensors,
)
from app.trace.process import STEPS
from app.trace.runner import STALE_S, STOPPED
from app.trace.store import JobStatus, StoreError, summarise
from tests.support.trace_fakes import REPORT, open_gate, runs, wait_for
from tests.support.trace_queue import Jobs, stop_consumer

A, B, C, D = "dp=2", "dp=4", "dp=8", "dp=16"


class Clock:
    """A clock the test moves: the store's and the workers' notion of now."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def must(queue: TraceQueue, query: str) -> JobStatus:
    status = queue.status(query)
    assert status is not None, f"no job for {query}"
    return status


def state(queue: TraceQueue, query: str) -> str | None:
    status = queue.status(query)
    return None if status is None else status.state


# --------------------------------------------------------------------------- the queue


def test_a_trace_runs_and_its_summary_is_kept(jobs: Jobs, tmp_path: Path) -> None:
    queue = jobs()
    first = queue.submit(A)
    assert first.state in ("queued", "running")
    wait_for(lambda: state(queue, A) == "finished")
    status = must(queue, A)
    assert status.summary == summarise(REPORT)
    assert status.summary["traced_peak"] == 759_868 and status.summary["modelled_peak"] == 758_464
    assert queue.report(A) is not None and queue.store.report(A) == queue.report(A)
    assert queue.runner.record("progress", A) is None and queue.runner.record("end", A) is None  # settled: all gone
    again = queue.submit(A)  # finished: answered from the cache, nothing runs again
    assert again.state == "finished"
    assert runs(tmp_path) == [A]


def test_jobs_run_one_at_a_time_in_order_and_show_their_place(jobs: Jobs, tmp_path: Path) -> None:
    queue = jobs({A: "block"})
    queue.submit(A)
    wait_for(lambda: runs(tmp_path) == [A])
    assert queue.submit(B).place == 1
    assert queue.submit(C).place == 2
    assert [(s.state, s.place) for s in (must(queue, B), must(queue, C))] == [("queued", 1), ("queued", 2)]
    assert state(queue, A) == "running"
    assert runs(tmp_path) == [A]  # B and C wait while A runs
    open_gate(tmp_path)
    wait_for(lambda: state(queue, C) == "finished")
    assert runs(tmp_path) == [A, B, C]


def test_two_workers_run_two_traces_at_once(jobs: Jobs, tmp_path: Path) -> None:
    queue = jobs({A: "block", B: "block"}, workers=2)
    for query in (A, B, C):
        queue.submit(query)
    wait_for(lambda: state(queue, A) == state(queue, B) == "running")
    assert (must(queue, C).state, must(queue, C).place) == ("queued", 1)
    open_gate(tmp_path)
    wait_for(lambda: state(queue, C) == "finished")
    assert sorted(runs(tmp_path)) == sorted([A, B, C])


def test_the_same_query_joins_the_job_instead_of_queueing_twice(jobs: Jobs, tmp_path: Path) -> None:
    queue = jobs({A: "block"})
    queue.submit(A)
    queue.submit(B)
    wait_for(lambda: state(queue, A) == "running")
    assert queue.submit(A).state == "running"  # joins the running job
    assert (queue.submit(B).state, queue.submit(B).place) == ("queued", 1)  # joins the queued one
    assert queue.huey.pending_count() == 1
    open_gate(tmp_path)
    wait_for(lambda: state(queue, B) == "finished")
    assert runs(tmp_path) == [A, B]


def test_another_web_worker_joins_a_job_through_the_shared_files(jobs: Jobs, tmp_path: Path) -> None:
    web1 = jobs({A: "block"})
    web2 = jobs({A: "block"}, workers=0)  # the same cache and queue files, no consumer of its own
    web1.submit(A)
    wait_for(lambda: state(web1, A) == "running")
    assert web2.submit(A).state == "running"
    open_gate(tmp_path)
    wait_for(lambda: state(web2, A) == "finished")
    assert runs(tmp_path) == [A]


def test_a_full_queue_refuses_but_still_lets_a_duplicate_join(jobs: Jobs, tmp_path: Path) -> None:
    queue = jobs({A: "block"}, max_queued=2)
    queue.submit(A)
    wait_for(lambda: state(queue, A) == "running")  # the running job is not in the queue
    queue.submit(B)
    queue.submit(C)
    with pytest.raises(QueueFull, match="2 traces are already waiting"):
        queue.submit(D)
    assert queue.submit(C).place == 2  # a job already queued is joined, full or not
    assert queue.status(D) is None
    open_gate(tmp_path)
    wait_for(lambda: state(queue, C) == "finished")
    assert queue.submit(D).state in ("queued", "running", "finished")  # room again


def test_progress_counts_the_finished_steps(jobs: Jobs, tmp_path: Path) -> None:
    queue = jobs({A: "block"})
    queue.submit(A)
    # the fake says building 2/2, sharding 1/2 (not a finished step), sharding 2/2, forward 3/3
    wait_for(lambda: must(queue, A).done == 3)
    status = must(queue, A)
    assert (status.state, status.total, status.step) == ("running", STEPS, "iteration 1/2: forward")
    open_gate(tmp_path)


def test_a_trace_over_its_time_limit_is_killed_and_fails(jobs: Jobs) -> None:
    queue = jobs({A: "hang"}, timeout_s=0.5)
    queue.submit(A)
    queue.submit(B)
    wait_for(lambda: state(queue, A) == "failed")
    assert "longer than 0.5 s" in (must(queue, A).error or "")
    wait_for(lambda: state(queue, B) == "finished")  # the next job still runs


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
    jobs: Jobs, tmp_path: Path, mode: str, message: str
) -> None:
    queue = jobs({A: mode})
    queue.submit(A)
    wait_for(lambda: state(queue, A) == "failed")
    error = must(queue, A).error or ""
    assert error.startswith(message)
    assert "Traceback" not in error and "File " not in error
    assert queue.submit(A).state in ("queued", "running", "failed")  # asked again: a failure is not cached for good
    wait_for(lambda: len(runs(tmp_path)) == 2 and state(queue, A) == "failed")


def test_a_worker_that_stops_kills_its_trace_and_the_job_may_be_asked_again_at_once(jobs: Jobs, tmp_path: Path) -> None:
    queue = jobs({A: "hang"}, retry_after_s=120.0)
    queue.submit(A)
    queue.submit(B)
    wait_for(lambda: state(queue, A) == "running")
    stop_consumer(jobs.consumers.pop())  # as `zero3-lab worker` stops on SIGTERM
    assert (must(queue, A).state, must(queue, A).error) == ("failed", STOPPED)
    assert must(queue, B).state == "queued"  # still on the queue, for the next worker
    jobs({A: "ok"})  # a new worker: it runs B, and A once asked again (no wait: nothing in A failed)
    assert queue.submit(A).state in ("queued", "running", "finished")
    wait_for(lambda: state(queue, A) == state(queue, B) == "finished")


def test_a_job_whose_worker_died_reads_as_failed_and_is_taken_over(jobs: Jobs, tmp_path: Path) -> None:
    """A worker killed outright writes nothing more: once its progress is stale the job reads as failed (not as
    running for ever) and may be asked for again at once; the lock it held is taken over."""
    clock = Clock()
    queue = jobs({A: "block"}, clock=clock)
    queue.store.clock = clock
    queue.submit(A)
    wait_for(lambda: state(queue, A) == "running")
    clock.now += STALE_S + 1  # no heartbeat lands in this much time
    gone = must(queue, A)
    assert (gone.state, gone.gone, gone.error) == ("failed", True, LOST)
    assert queue.retry_in(gone) == 0
    assert queue.store.queued_for("") == []  # settled as lost: it no longer counts against its client
    queue.submit(A)  # taken over: a second run while the first is stuck is what a dead worker would need
    wait_for(lambda: len(runs(tmp_path)) == 1)  # one worker here: the new job waits behind the stuck one
    open_gate(tmp_path)
    wait_for(lambda: state(queue, A) == "finished")


def test_a_worker_running_other_code_refuses_the_job(jobs: Jobs) -> None:
    queue = jobs(version="the-server's")
    worker = jobs(version="the-worker's", queue_file=Path(queue.huey.storage.filename))
    stop_consumer(jobs.consumers.pop(0))  # only the worker of other code runs
    assert worker.runner.version != queue.runner.version
    queue.submit(A)
    wait_for(lambda: state(queue, A) == "failed")
    assert "runs lab the-worker's, the server the-server's" in (must(queue, A).error or "")


def test_an_unwritable_cache_is_a_store_error(jobs: Jobs, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    from app.trace.store import TraceStore

    queue = jobs(store=TraceStore(blocker / "traces.sqlite3", "v"), workers=0)
    with pytest.raises(StoreError, match="trace cache cannot be written") as caught:
        queue.submit(A)
    assert str(tmp_path) not in str(caught.value)  # the server's paths are not told to users


def test_a_queue_that_cannot_be_reached_is_said_and_asked_again_at_once(jobs: Jobs, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("", encoding="utf-8")
    queue = jobs(queue_file=blocker / "queue.sqlite3", workers=0)
    with pytest.raises(QueueDown, match="cannot be reached"):
        queue.submit(A)
    assert queue.retry_in(queue.status(A)) == 0


# --------------------------------------------------------------------------- fair and bounded


def test_one_client_may_have_only_so_many_traces_and_the_others_keep_their_place(jobs: Jobs, tmp_path: Path) -> None:
    queue = jobs({A: "block"}, per_client=2)
    queue.submit(A, client="10.0.0.1")
    wait_for(lambda: runs(tmp_path) == [A])
    queue.submit(B, client="10.0.0.1")
    with pytest.raises(ClientBusy, match="already have 2 traces"):
        queue.submit(C, client="10.0.0.1")
    assert queue.submit(C, client="10.0.0.2").place == 2  # another client is not held up by the first
    assert queue.submit(B, client="10.0.0.1").state == "queued"  # joining a job of one's own is no new one
    open_gate(tmp_path)
    wait_for(lambda: state(queue, C) == "finished" and state(queue, B) == "finished")
    assert queue.submit(D, client="10.0.0.1").state in ("queued", "running", "finished")  # may ask again


def test_a_failed_trace_is_not_run_again_for_a_while(jobs: Jobs, tmp_path: Path) -> None:
    clock = Clock()
    queue = jobs({A: "fail"}, retry_after_s=120.0)
    queue.store.clock = clock
    queue.submit(A)
    wait_for(lambda: state(queue, A) == "failed")
    clock.now += 30
    with pytest.raises(RetryLater) as caught:
        queue.submit(A)
    assert caught.value.seconds == 91 and "tried again in 91 s" in str(caught.value)
    clock.now += 91
    assert queue.submit(A).state in ("queued", "running", "failed")
    wait_for(lambda: runs(tmp_path) == [A, A])


def test_a_model_past_the_pages_trace_budget_is_refused_before_it_queues(jobs: Jobs, tmp_path: Path) -> None:
    """The budget counts parameter tensors: a trace's time on fake tensors follows them (160 small layers of 9)."""
    queue = jobs()
    deep = compact({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 160, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1024})  # fmt: skip
    query = canonical_query(parse_scenario({"model": deep, "dp": 8}))
    with pytest.raises(TooLarge) as caught:
        queue.submit(query)
    assert caught.value.tensors == trace_tensors(query) > BUDGET_TENSORS
    assert "run the command below in a terminal, which has no such limit" in str(caught.value)
    assert queue.status(query) is None and queue.huey.pending_count() == 0 and runs(tmp_path) == []
    seven_b = canonical_query(parse_scenario({"model": "llama-2-7b", "dp": 8}))
    assert trace_tensors(seven_b) == 2 + 32 * 9 + 1 <= BUDGET_TENSORS  # embedding and head, 32 layers of 9, final norm
