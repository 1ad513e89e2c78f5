"""The page's traces, in one embedded SQLite file: each job's state while it waits or runs, its report
once finished, its error once failed, keyed by the lab's version and the scenario's canonical query.

The file is the one thing a server's workers share (``zero3-lab serve --workers N`` runs N processes
that share nothing else), so the state of a job lives here, not in the worker that runs it: any
worker can answer a poll, and a second worker asked for a query that another is tracing joins that
job. A worker that runs jobs refreshes their ``updated`` time every few seconds; a queued or running
row that stops being refreshed (its worker died or was restarted) is *stale* and reads as a failed job whose
error says its worker stopped; the next request for that query takes it over.

Reading never creates anything: without the file there is no trace yet, and a page that only looks
does one primary-key ``SELECT``. Standard library only (no web stack, no torch).

The file heals. Every write opens it afresh and makes its folder and table if they are gone (deleted, truncated);
a file SQLite cannot read as a database (garbage, a malformed image) is moved aside with one log line and a
fresh one started. A finished or failed trace whose row went with the old file is written again, so a result is
not lost to a file replaced while its trace ran.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.trace.bounded import bounded_report

State = Literal["queued", "running", "finished", "failed"]
ACTIVE: frozenset[str] = frozenset({"queued", "running"})
# A worker refreshes its rows every HEARTBEAT_S while it runs a job; a row unrefreshed for STALE_S
# belongs to a worker that is gone. Several heartbeats fit in it, so a busy disk does not orphan a job.
HEARTBEAT_S = 2.0
STALE_S = 30.0
KEEP_ROWS = 1000  # finished and failed traces kept; the oldest go first (a report is ~10-300 kB)
KEEP_BYTES = 256 * 2**20  # and at most this much of their reports and summaries (a report is held to 256 KiB)
ERROR_CHARS = 2000  # an error message is the trace's stderr, cut to this length
SETTLE_TRIES, SETTLE_PAUSE_S = 5, 0.1  # a job's end is written again this often while its file is being replaced

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
logger = logging.getLogger("zero3_lab.trace.store")


def _unreadable(exc: BaseException) -> bool:
    """Whether ``exc`` says the file is no database SQLite can read (garbage, a malformed image), as opposed to a
    passing condition (a lock, a full disk: ``OperationalError``)."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


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
    updated: float = 0.0  # when the row was last written (a failure: when it failed)
    gone: bool = False  # failed because the worker that held it stopped (its row went stale), not by itself

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

    # ------------------------------------------------------------------ connections

    def _connect(self) -> sqlite3.Connection:
        # autocommit (isolation_level=None): each write is its own transaction unless _writing opens one
        return sqlite3.connect(self.path, timeout=10, isolation_level=None)

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; ``BEGIN IMMEDIATE`` takes the write lock first, so that two workers
        claiming the same query cannot both find it free. A failure is a :class:`StoreError`; a file that
        failed as no database is moved aside first, so that the next write starts a fresh one."""
        try:
            with self._transaction() as db:
                yield db
        except (sqlite3.Error, OSError) as exc:
            if _unreadable(exc):
                self._move_aside(exc)
            # said to users: the reason, never the server's path (an OSError's str() names it)
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise StoreError(f"the lab's trace cache cannot be written ({reason})") from exc

    def _open(self) -> sqlite3.Connection:
        """The file, its folder and its table, made where they are gone, in a write transaction."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = self._connect()
        try:
            db.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
            db.execute(_SCHEMA)
            db.execute("BEGIN IMMEDIATE")
        except BaseException:
            db.close()
            raise
        return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            db = self._open()
        except sqlite3.DatabaseError as exc:
            if not _unreadable(exc):
                raise
            self._move_aside(exc)  # garbage or a malformed image: start a fresh file, once
            db = self._open()
        with closing(db):
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _move_aside(self, exc: BaseException) -> None:
        """Keep the unreadable file beside the fresh one (for whoever wants to look), with its WAL files."""
        aside = self.path.with_name(f"{self.path.name}.unreadable-{int(self.clock())}")
        logger.warning("the trace cache %s cannot be read as a database (%s): moved to %s, a fresh one started",
                       self.path, exc, aside.name)  # fmt: skip
        for suffix in ("", "-wal", "-shm"):
            source = self.path.with_name(self.path.name + suffix)
            with suppress(FileNotFoundError):
                source.replace(aside.with_name(aside.name + suffix))

    # ------------------------------------------------------------------ reading

    def get(self, query: str) -> JobStatus | None:
        """The trace of ``query``: one primary-key lookup, or None (no file, no row, or a
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
            why = "the server process that held this trace stopped before it finished; ask again"
            return JobStatus(query=query, state="failed", error=why, updated=float(updated), gone=True)
        return JobStatus(
            query=query,
            state=state,
            place=int(place),
            done=int(done),
            total=int(total),
            step=str(step),
            error=error,
            summary=None if summary is None else json.loads(summary),
            updated=float(updated),
        )

    def age(self, status: JobStatus) -> float:
        """Seconds since ``status`` was written, by this store's clock."""
        return self.clock() - status.updated

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
        """The job's report (held to :data:`~app.trace.bounded.MAX_REPORT_BYTES`) and the page's summary of it."""
        report = bounded_report(report)
        self._settle(query, owner, state="finished", report=report, summary=json.dumps(summary), error=None)
        self._prune()

    def fail(self, query: str, owner: str, error: str) -> None:
        self._settle(query, owner, state="failed", error=error[:ERROR_CHARS], report=None, summary=None)
        self._prune()

    def _settle(self, query: str, owner: str, **values: object) -> None:
        """A job's end, written whatever became of the file meanwhile: the row is written again where it went
        with a deleted, truncated or replaced file (a row another worker took over is still left alone), and a
        file that turns out unreadable is moved aside and the end written to a fresh one."""
        for attempt in range(SETTLE_TRIES):
            try:
                self._update(query, owner, insert=True, **values)
                return
            except StoreError:  # an unreadable file is aside by now; a folder being removed is gone in a moment
                if attempt == SETTLE_TRIES - 1:
                    raise
                time.sleep(SETTLE_PAUSE_S)

    def _update(self, query: str, owner: str, *, insert: bool = False, **values: object) -> None:
        """Set ``values`` on ``owner``'s row of ``query`` (a row another worker took over is left alone); with
        ``insert``, make the row where there is none."""
        columns = ", ".join(f"{name} = ?" for name in values)  # names from this module, never from input
        with self._writing() as db:
            changed = db.execute(
                f"UPDATE traces SET {columns}, updated = ? WHERE version = ? AND query = ? AND owner = ?",  # noqa: S608
                (*values.values(), self.clock(), self.version, query, owner),
            ).rowcount
            if insert and not changed:
                names = ", ".join(values)
                marks = ", ".join("?" for _ in values)
                db.execute(
                    f"INSERT OR IGNORE INTO traces (version, query, owner, updated, {names}) "  # noqa: S608
                    f"VALUES (?, ?, ?, ?, {marks})",
                    (self.version, query, owner, self.clock(), *values.values()),
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
