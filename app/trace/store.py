"""The page's traces, in one embedded SQLite file: each job's state while it waits or runs, its report
once finished, its error once failed, keyed by the lab's version and the scenario's canonical query.

The file is the one thing a server's workers share (``zero3-lab serve --workers N`` runs N processes
that share nothing else), so the state of a job lives here, not in the worker that runs it: any
worker can answer a poll, and a second worker asked for a query that another is tracing joins that
job. A worker that runs jobs refreshes their ``updated`` time every few seconds; a queued or running
row that stops being refreshed (its worker died or was restarted) is *stale*, reads as no job at
all, and the next request for that query takes it over.

Reading never creates anything: without the file there is no trace yet, and a page that only looks
does one primary-key ``SELECT``. Standard library only (no web stack, no torch).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

State = Literal["queued", "running", "finished", "failed"]
ACTIVE: frozenset[str] = frozenset({"queued", "running"})
# A worker refreshes its rows every HEARTBEAT_S while it runs a job; a row unrefreshed for STALE_S
# belongs to a worker that is gone. Several heartbeats fit in it, so a busy disk does not orphan a job.
HEARTBEAT_S = 2.0
STALE_S = 30.0
KEEP_ROWS = 1000  # finished and failed traces kept; the oldest go first (a report is ~10-300 kB)
KEEP_BYTES = 256 * 2**20  # and at most this much of their reports and summaries (one may be up to 32 MB)
ERROR_CHARS = 2000  # an error message is the trace's stderr, cut to this length

_SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    version TEXT NOT NULL,
    query TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    place INTEGER NOT NULL DEFAULT 0,
    done INTEGER NOT NULL DEFAULT 0,
    total INTEGER NOT NULL DEFAULT 0,
    step TEXT NOT NULL DEFAULT '',
    error TEXT,
    summary TEXT,
    report TEXT,
    updated REAL NOT NULL,
    PRIMARY KEY (version, query)
) WITHOUT ROWID
"""
_STATUS_COLUMNS = "state, place, done, total, step, error, summary, updated"


class StoreError(Exception):
    """The cache cannot be written (its folder or file is not writable, the disk is full, …)."""


@dataclass(frozen=True, slots=True)
class JobStatus:
    """Where one scenario's trace stands. ``place`` is 1 for the next job to run (0 once running);
    ``done`` of ``total`` steps, the last one ``step``; ``summary`` is :func:`summarise`'s dict."""

    query: str
    state: State
    place: int = 0
    done: int = 0
    total: int = 0
    step: str = ""
    error: str | None = None
    summary: dict[str, Any] | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE


def summarise(report: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of a trace report (``zero3-lab trace --format json``): the traced peak beside
    the modelled one, and each modelled instant beside the traced total over its stretch of the step.
    Kept apart from the report so that a page reads a few kB, not the whole timeline."""
    modelled = report["modelled"]
    trace = report["trace"]
    return {
        "model": str(trace["model"]),
        "world_size": int(trace["world_size"]),
        "torch": str(trace["torch"]),
        "seconds": round(sum(float(s) for s in trace["seconds"].values()), 1),
        "traced_peak": int(report["peak"]["total"]),
        "modelled_peak": int(modelled["stage3_peak"]),
        "modelled_peak_instant": modelled["stage3_peak_instant"],
        "declared_peak": int(modelled["stage3_declared_peak"]),
        "peak_at": {k: report["peak_at"][k] for k in ("phase", "after", "unit", "module")},
        "instants": [
            {
                "instant": str(i["instant"]),
                "modelled": int(i["modelled"]),
                "traced": None if i["traced"] is None else int(i["traced"]),
            }
            for i in report["instants"]
        ],
    }


class TraceStore:
    """The SQLite file at ``path`` (created, with its folder, on the first write)."""

    def __init__(self, path: Path, version: str, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.version = version
        self.clock = clock
        self._ready = False

    # ------------------------------------------------------------------ connections

    def _connect(self) -> sqlite3.Connection:
        # autocommit (isolation_level=None): each write is its own transaction unless _writing opens one
        return sqlite3.connect(self.path, timeout=10, isolation_level=None)

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; ``BEGIN IMMEDIATE`` takes the write lock first, so that two workers
        claiming the same query cannot both find it free. A failure is a :class:`StoreError`."""
        try:
            with self._transaction() as db:
                yield db
        except (sqlite3.Error, OSError) as exc:
            # said to users: the reason, never the server's path (an OSError's str() names it)
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise StoreError(f"the lab's trace cache cannot be written ({reason})") from exc

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(self._connect()) as db:
                db.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
                db.execute(_SCHEMA)
            self._ready = True
        with closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # ------------------------------------------------------------------ reading

    def get(self, query: str) -> JobStatus | None:
        """The trace of ``query``: one primary-key lookup, or None (no file, no row, a stale row, or a
        file that cannot be read: the page must not fail because its cache did)."""
        if not self.path.exists():
            return None
        try:
            with closing(self._connect()) as db:
                row = db.execute(
                    f"SELECT {_STATUS_COLUMNS} FROM traces WHERE version = ? AND query = ?",  # noqa: S608
                    (self.version, query),
                ).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else self._status(query, row)

    def report(self, query: str) -> str | None:
        """A finished trace's whole JSON report, as the trace printed it."""
        if not self.path.exists():
            return None
        try:
            with closing(self._connect()) as db:
                row = db.execute(
                    "SELECT report FROM traces WHERE version = ? AND query = ? AND state = 'finished'",
                    (self.version, query),
                ).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else str(row[0])

    def _status(self, query: str, row: Sequence[Any]) -> JobStatus | None:
        state, place, done, total, step, error, summary, updated = row
        if state in ACTIVE and self.clock() - float(updated) > STALE_S:
            return None
        return JobStatus(
            query=query,
            state=state,
            place=int(place),
            done=int(done),
            total=int(total),
            step=str(step),
            error=error,
            summary=None if summary is None else json.loads(summary),
        )

    # ------------------------------------------------------------------ writing

    def claim(self, query: str, owner: str, place: int) -> JobStatus | None:
        """Queue ``query`` for ``owner`` at ``place`` and give None, unless it is finished or another
        live job holds it: then give that job's status (the caller joins it instead)."""
        with self._writing() as db:
            row = db.execute(
                f"SELECT {_STATUS_COLUMNS} FROM traces WHERE version = ? AND query = ?",  # noqa: S608
                (self.version, query),
            ).fetchone()
            existing = None if row is None else self._status(query, row)
            if existing is not None and existing.state != "failed":  # a failed trace is tried again
                return existing
            db.execute(
                "INSERT OR REPLACE INTO traces (version, query, state, owner, place, updated) "
                "VALUES (?, ?, 'queued', ?, ?, ?)",
                (self.version, query, owner, place, self.clock()),
            )
        return None

    def start(self, query: str, owner: str, total: int, step: str, queued: Sequence[str]) -> None:
        """``query`` runs now; ``owner``'s queue behind it is ``queued``, its i-th query (from 0) at place
        i + 1. One transaction: no reader sees the job running and the queue not yet moved up."""
        with self._writing() as db:
            now = self.clock()
            db.execute(
                "UPDATE traces SET state = 'running', place = 0, done = 0, total = ?, step = ?, updated = ? "
                "WHERE version = ? AND query = ? AND owner = ?",
                (total, step, now, self.version, query, owner),
            )
            for i, waiting in enumerate(queued):
                db.execute(
                    "UPDATE traces SET place = ?, updated = ? WHERE version = ? AND query = ? AND owner = ?",
                    (i + 1, now, self.version, waiting, owner),
                )

    def progress(self, query: str, owner: str, done: int, total: int, step: str) -> None:
        self._update(query, owner, done=done, total=total, step=step)

    def heartbeat(self, owner: str) -> None:
        """Mark every queued and running job of ``owner`` alive."""
        with self._writing() as db:
            db.execute(
                "UPDATE traces SET updated = ? WHERE version = ? AND owner = ? AND state IN ('queued', 'running')",
                (self.clock(), self.version, owner),
            )

    def finish(self, query: str, owner: str, report: str, summary: dict[str, Any]) -> None:
        self._update(query, owner, state="finished", report=report, summary=json.dumps(summary), error=None)
        self._prune()

    def fail(self, query: str, owner: str, error: str) -> None:
        self._update(query, owner, state="failed", error=error[:ERROR_CHARS], report=None, summary=None)
        self._prune()

    def _update(self, query: str, owner: str, **values: object) -> None:
        """Set ``values`` on ``owner``'s row of ``query`` (a row another worker took over is left alone)."""
        columns = ", ".join(f"{name} = ?" for name in values)  # names from this module, never from input
        with self._writing() as db:
            db.execute(
                f"UPDATE traces SET {columns}, updated = ? WHERE version = ? AND query = ? AND owner = ?",  # noqa: S608
                (*values.values(), self.clock(), self.version, query, owner),
            )

    def _prune(self) -> None:
        """Keep the newest :data:`KEEP_ROWS` finished or failed traces (of any version), and of those only
        as many as fit in :data:`KEEP_BYTES` of reports and summaries (the newest first): the file's size
        is bounded whatever the scenarios traced."""
        with self._writing() as db:
            db.execute(
                "DELETE FROM traces WHERE (version, query) IN (SELECT version, query FROM traces "
                "WHERE state IN ('finished', 'failed') ORDER BY updated DESC LIMIT -1 OFFSET ?)",
                (KEEP_ROWS,),
            )
            db.execute(
                "DELETE FROM traces WHERE (version, query) IN (SELECT version, query FROM ("
                "SELECT version, query, SUM(LENGTH(COALESCE(report, '')) + LENGTH(COALESCE(summary, ''))) "
                "OVER (ORDER BY updated DESC, query) AS kept FROM traces WHERE state IN ('finished', 'failed')"
                ") WHERE kept > ?)",
                (KEEP_BYTES,),
            )
