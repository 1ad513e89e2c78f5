"""The trace cache and the trace queue's SQLite file heal: either file deleted, truncated, replaced by garbage or a
malformed image, or its folder removed, a later trace still runs and keeps its result; an unreadable file is moved
aside with one log line; a trace that was running when the cache went still keeps its result. The traces are fake
child processes run by huey's consumer (tests/support/trace_queue.py)."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from app.trace.jobs import QueueDown, TraceQueue
from app.trace.store import TraceStore, summarise
from tests.support.trace_fakes import REPORT, open_gate, runs, wait_for
from tests.support.trace_queue import Jobs

A, B = "dp=2", "dp=4"


def _delete(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def _truncate(path: Path) -> None:
    _delete(path)
    path.write_bytes(b"")


def _garbage(path: Path) -> None:
    _delete(path)
    path.write_bytes(b"not a database, " * 512)


def _malformed(path: Path) -> None:
    """A real SQLite file whose pages after the header are zeroed: the header reads, the table does not."""
    data = bytearray(path.read_bytes())
    data[100:] = bytes(len(data) - 100)
    _delete(path)
    path.write_bytes(bytes(data))


def _remove_folder(path: Path) -> None:
    # a running job's heartbeat may make the folder again while it goes: what is removed is removed
    shutil.rmtree(path.parent, ignore_errors=True)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "deleted": _delete, "truncated": _truncate, "garbage": _garbage, "malformed": _malformed,
    "folder removed": _remove_folder,
}  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> TraceStore:
    return TraceStore(tmp_path / "cache" / "traces.sqlite3", "v")


def _state(store: TraceStore | TraceQueue, query: str) -> str | None:
    status = store.get(query) if isinstance(store, TraceStore) else store.status(query)
    return None if status is None else status.state


def _finished(store: TraceStore, query: str) -> None:
    store.claim(query, "w", "", replacing=None)
    store.finish(query, "w", json.dumps(REPORT), summarise(REPORT))


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_file_never_stops_a_later_trace(
    store: TraceStore, damage: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _finished(store, A)
    _flush(store.path)
    DAMAGE[damage](store.path)
    store.get(A)  # a page reading the damaged file never fails (it may not find A: that went with the file)
    with caplog.at_level(logging.WARNING, logger="zero3_lab.trace.store"):
        _finished(store, B)
    assert _state(store, B) == "finished"
    aside = sorted(p.name for p in store.path.parent.glob("traces.sqlite3.unreadable-*"))
    moved = [r for r in caplog.records if "cannot be read as a database" in r.getMessage()]
    if damage in ("garbage", "malformed"):
        assert len(moved) == 1 and aside, (moved, aside)  # one line, the file kept beside the fresh one
    else:
        assert moved == [] and aside == []


@pytest.mark.parametrize("damage", ["deleted", "garbage", "folder removed"])
def test_a_trace_running_when_the_cache_went_still_keeps_its_result(
    store: TraceStore, damage: str, tmp_path: Path, jobs: Jobs
) -> None:
    queue = jobs({A: "block"}, store=store)
    queue.submit(A)
    wait_for(lambda: runs(tmp_path) == [A])
    _flush(store.path)
    DAMAGE[damage](store.path)
    open_gate(tmp_path)
    wait_for(lambda: (status := queue.status(A, look=True)) is not None and status.state == "finished")
    assert json.loads(queue.report(A) or "") == REPORT


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_queue_file_never_stops_a_later_trace(
    damage: str, tmp_path: Path, jobs: Jobs, caplog: pytest.LogCaptureFixture
) -> None:
    """Damaged while huey's consumer and the page both hold it open: the jobs on it are lost (said as such once
    stale), the next trace runs on a fresh file, an unreadable one is kept aside with one log line."""
    queue = jobs()
    queue.submit(A)
    wait_for(lambda: _state(queue, A) == "finished")
    path = Path(queue.huey.storage.filename)
    _flush(path)
    with caplog.at_level(logging.WARNING, logger="zero3_lab.trace.queue"):
        DAMAGE[damage](path)
        wait_for(lambda: _submitted(queue, B))  # the first use after the damage may fail once; the next one runs
        wait_for(lambda: _state(queue, B) == "finished")
    assert runs(tmp_path) == [A, B]
    moved = [r for r in caplog.records if "cannot be read as a database" in r.getMessage()]
    aside = sorted(p.name for p in path.parent.glob("queue.sqlite3.unreadable-*"))
    if damage in ("garbage", "malformed"):
        assert moved and len([name for name in aside if name[-4:] not in ("-wal", "-shm")]) == 1, (moved, aside)
    else:
        assert moved == [] and aside == []


def _submitted(queue: TraceQueue, query: str) -> bool:
    try:
        queue.submit(query)
    except QueueDown:
        return False
    return True


def _flush(path: Path) -> None:
    """Fold the WAL into the file, so that damaging the file damages what was written."""
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
