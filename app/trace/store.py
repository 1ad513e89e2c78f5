"""The page's traces, in one embedded SQLite file: which queue task holds each scenario's trace and for which client,
and once it ended, its report or its error; keyed by the lab's version and the scenario's canonical query.

The trace jobs themselves are on the task queue (:mod:`app.trace.queue`: huey, on SQLite or Redis), which is where
a job's place and progress are read (:mod:`app.trace.jobs`). This file is the web side's: every web worker process
of one server shares it, a row says which task a query was handed to (so that the same query is never queued twice),
and a job's end is copied here from the queue when a page first asks after it, to be kept (pruned to a count and a
size) and served. Reading never creates anything: without the file there is no trace yet, and a page that only looks
does one primary-key ``SELECT``. Standard library only (no web stack, no torch).

The file heals. Every write opens it afresh and makes its folder and table if they are gone (deleted, truncated);
a file SQLite cannot read as a database (garbage, a malformed image) is moved aside with one log line and a fresh
one started (:mod:`app.trace.sqlite_files`); a job's end is written again where its row went with the old file.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.trace.bounded import bounded_report
from app.trace.sqlite_files import move_aside, unreadable

State = Literal["queued", "running", "finished", "failed"]
ACTIVE: frozenset[str] = frozenset({"queued", "running"})
KEEP_ROWS = 1000  # finished and failed traces kept; the oldest go first (a report is ~10-300 kB)
KEEP_BYTES = 256 * 2**20  # and at most this much of their reports and summaries (a report is held to 256 KiB)
ERROR_CHARS = 2000  # an error message is the trace's stderr, cut to this length
SETTLE_TRIES, SETTLE_PAUSE_S = 5, 0.1  # a job's end is written again this often while its file is being replaced
SCHEMA_VERSION = 2  # a file of another layout is a cache of another release: its table is made again

_SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    version TEXT NOT NULL,
    query TEXT NOT NULL,
    state TEXT NOT NULL,
    task TEXT NOT NULL,
    client TEXT NOT NULL DEFAULT '',
    error TEXT,
    summary TEXT,
    report TEXT,
    updated REAL NOT NULL,
    PRIMARY KEY (version, query)
) WITHOUT ROWID
"""
_ROW_COLUMNS = "state, task, client, error, summary, updated"
logger = logging.getLogger("zero3_lab.trace.store")


def default_trace_cache() -> Path:
    """``$XDG_CACHE_HOME/zero3-lab/traces.sqlite3`` (``~/.cache`` by default): outside the checkout,
    which a container's user may not be able to write, and kept across restarts."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory to be found
            base = tempfile.gettempdir()
    return Path(base) / "zero3-lab" / "traces.sqlite3"


def trace_cache_from_env() -> Path:
    """``ZERO3_LAB_TRACE_CACHE`` when set, else :func:`default_trace_cache`."""
    cache = os.environ.get("ZERO3_LAB_TRACE_CACHE", "").strip()
    return Path(cache) if cache else default_trace_cache()


def check_writable(folder: Path, setting: str) -> None:
    """At start, not at the first trace: ``ValueError`` naming ``setting`` when ``folder`` cannot be made or written
    (a container's data volume mounted read-only, a path under a read-only root)."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{setting}: {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ValueError(f"{setting}: {folder} cannot be written ({exc.strerror or exc})") from None


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


@dataclass(frozen=True, slots=True)
class Row:
    """One query's row: ``queued`` (handed to the queue as ``task``: the queue says how it stands), or its end."""

    state: Literal["queued", "finished", "failed"]
    task: str
    client: str
    error: str | None
    summary: dict[str, Any] | None
    updated: float

    def ended(self, query: str) -> JobStatus:
        """A finished or failed row as the page shows it."""
        return JobStatus(query, self.state, error=self.error, summary=self.summary, updated=self.updated)


def summarise(report: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of a trace report (``zero3-lab trace --format json``): the traced peak beside
    the modelled one, each modelled instant beside the traced total over its stretch of the step, and the step's
    collective buffers beside the lab's communication terms.
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
        # the step's collective buffers, traced and the lab's (reports from before they were counted have none)
        "collectives": [
            {"kind": kind.replace("_", "-"), "lab": int(row["lab"]), "traced": int(row["traced"])}
            for kind, row in report.get("communication", {}).items()
            if row["lab"] or row["traced"]
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
        """One write transaction; ``BEGIN IMMEDIATE`` takes the write lock first, so that two web workers
        claiming the same query cannot both find it free. A failure is a :class:`StoreError`; a file that
        failed as no database is moved aside first, so that the next write starts a fresh one."""
        try:
            with self._transaction() as db:
                yield db
        except (sqlite3.Error, OSError) as exc:
            if unreadable(exc):
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
            db.execute("BEGIN IMMEDIATE")
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                db.execute("DROP TABLE IF EXISTS traces")
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute(_SCHEMA)
        except BaseException:
            db.close()
            raise
        return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            db = self._open()
        except sqlite3.DatabaseError as exc:
            if not unreadable(exc):
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
        move_aside(self.path, int(self.clock()), "the trace cache", exc, logger)

    def _select(self, sql: str, *params: object) -> list[Any]:
        """The rows of a read (none without the file, or from a file that cannot be read: the page must not fail
        because its cache did)."""
        if not self.path.exists():
            return []
        try:
            with closing(self._connect()) as db:
                return db.execute(sql, (self.version, *params)).fetchall()
        except sqlite3.Error:
            return []

    # ------------------------------------------------------------------ reading

    def get(self, query: str) -> Row | None:
        """The row of ``query``: one primary-key lookup, or None."""
        rows = self._select(f"SELECT {_ROW_COLUMNS} FROM traces WHERE version = ? AND query = ?", query)  # noqa: S608
        return _row(rows[0]) if rows else None

    def report(self, query: str) -> str | None:
        """A finished trace's whole JSON report, as the trace printed it."""
        rows = self._select("SELECT report FROM traces WHERE version = ? AND query = ? AND state = 'finished'", query)
        return str(rows[0][0]) if rows else None

    def queued_for(self, client: str) -> list[str]:
        """The queries ``client`` has handed to the queue that have not been seen to end."""
        rows = self._select("SELECT query FROM traces WHERE version = ? AND client = ? AND state = 'queued'", client)
        return [str(query) for (query,) in rows]

    def age(self, updated: float) -> float:
        """Seconds since ``updated``, by this store's clock."""
        return self.clock() - updated

    # ------------------------------------------------------------------ writing

    def claim(self, query: str, task: str, client: str, replacing: float | None) -> Row | None:
        """Hand ``query`` to ``task`` for ``client`` and give None, unless its row changed since the caller read it
        (``replacing``: that row's ``updated``, None for no row): then give the row that another claim wrote."""
        with self._writing() as db:
            found = db.execute(
                f"SELECT {_ROW_COLUMNS} FROM traces WHERE version = ? AND query = ?",  # noqa: S608
                (self.version, query),
            ).fetchone()
            if found is not None and float(found[-1]) != replacing:
                return _row(found)
            db.execute(
                "INSERT OR REPLACE INTO traces (version, query, state, task, client, updated) "
                "VALUES (?, ?, 'queued', ?, ?, ?)",
                (self.version, query, task, client, self.clock()),
            )
        return None

    def finish(self, query: str, task: str, report: str, summary: dict[str, Any]) -> None:
        """The job's report (held to :data:`~app.trace.bounded.MAX_REPORT_BYTES`) and the page's summary of it."""
        values = {"state": "finished", "report": bounded_report(report), "summary": json.dumps(summary), "error": None}
        self._settle(query, task, values)

    def fail(self, query: str, task: str, error: str) -> None:
        self._settle(query, task, {"state": "failed", "error": error[:ERROR_CHARS], "report": None, "summary": None})

    def _settle(self, query: str, task: str, values: Mapping[str, object]) -> None:
        """A job's end, written whatever became of the file meanwhile: the row is written again where it went with a
        deleted, truncated or replaced file (a row another task has taken over is left alone), and a file that turns
        out unreadable is moved aside and the end written to a fresh one. Then the oldest rows are pruned."""
        columns = ", ".join(f"{name} = ?" for name in values)  # names from this module, never from input
        for attempt in range(SETTLE_TRIES):
            try:
                with self._writing() as db:
                    changed = db.execute(
                        f"UPDATE traces SET {columns}, updated = ? WHERE version = ? AND query = ? AND task = ?",  # noqa: S608
                        (*values.values(), self.clock(), self.version, query, task),
                    ).rowcount
                    if not changed:
                        names, marks = ", ".join(values), ", ".join("?" for _ in values)
                        db.execute(
                            f"INSERT OR IGNORE INTO traces (version, query, task, updated, {names}) "  # noqa: S608
                            f"VALUES (?, ?, ?, ?, {marks})",
                            (self.version, query, task, self.clock(), *values.values()),
                        )
                break
            except StoreError:  # an unreadable file is aside by now; a folder being removed is gone in a moment
                if attempt == SETTLE_TRIES - 1:
                    raise
                time.sleep(SETTLE_PAUSE_S)
        self._prune()

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


def _row(found: Sequence[Any]) -> Row:
    state, task, client, error, summary, updated = found
    return Row(state, str(task), str(client), error, None if summary is None else json.loads(summary), float(updated))
