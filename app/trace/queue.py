"""The trace jobs' task queue: huey (pinned, ``huey==3.5.4``), on SQLite by default, on Redis to scale out.

Why huey: it is small and well kept, has an embedded SQLite storage (nothing to install: the README's two commands
stay the whole set-up) and a Redis one (workers on other machines), thread workers, task locks and result storage,
which is all the trace jobs need. :mod:`app.trace.jobs` defines the task and reads a job's place, progress and end
from here; ``zero3-lab worker`` (:mod:`app.trace.worker`) runs huey's own consumer.

``ZERO3_LAB_QUEUE`` picks the storage: unset, the SQLite file ``queue.sqlite3`` beside the trace cache;
``sqlite:///<absolute path>`` another file (``sqlite:////srv/lab/queue.sqlite3``: the path begins after the
third slash); ``redis://host:port/db`` (or ``rediss://``, ``unix://``) a Redis that
the web server and every worker reach. A Redis queue holds pickled tasks: it must be the lab's own, on a private
network (docs/deploy.md).

The SQLite file heals as the trace cache does (:mod:`app.trace.sqlite_files`): huey keeps one connection open, so
before each use the file is checked to be the one that connection opened; a file deleted, truncated or replaced is
opened afresh with huey's tables, and one that cannot be read as a database is moved aside with one log line (the
operation that found it fails once; the next one runs on a fresh file).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from huey import Huey, RedisHuey
from huey.storage import SqliteStorage

from app.trace.sqlite_files import move_aside, same_file, unreadable
from app.trace.store import check_writable

NAME = "zero3-lab-traces"
ENV = "ZERO3_LAB_QUEUE"
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
logger = logging.getLogger("zero3_lab.trace.queue")


class HealingSqliteStorage(SqliteStorage):
    """huey's SQLite storage, whose file heals (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._inode: int | None = None
        super().__init__(*args, **kwargs)

    def _create_connection(self) -> sqlite3.Connection:
        path = Path(self.filename)
        path.parent.mkdir(parents=True, exist_ok=True)
        conn: sqlite3.Connection = super()._create_connection()
        self._inode = path.stat().st_ino
        return conn

    @contextmanager
    def db(self, commit: bool = False, close: bool = False) -> Iterator[sqlite3.Cursor]:
        path = Path(self.filename)
        if self._conn is not None and not same_file(path, self._inode):
            self.close()  # deleted or replaced: the next connection opens what is there now
        if self._conn is None:
            self._make_tables(path)  # huey's CREATE … IF NOT EXISTS, once per connection
        try:
            with super().db(commit=commit, close=close) as cursor:
                yield cursor
        except sqlite3.DatabaseError as exc:
            self.close()  # the next use connects afresh (and makes the tables of a file truncated in place)
            if unreadable(exc):
                move_aside(path, int(time.time()), "the trace queue", exc, logger)
            raise

    def _make_tables(self, path: Path) -> None:
        try:
            self.initialize_schema()
        except sqlite3.DatabaseError as exc:  # garbage where the file was: aside, and the tables in a fresh one
            if not unreadable(exc):
                raise
            self.close()
            move_aside(path, int(time.time()), "the trace queue", exc, logger)
            self.initialize_schema()

    def initialize_schema(self) -> None:
        with super().db(commit=True) as cursor:
            for sql in self.ddl:
                cursor.execute(sql)


def queue_url(default_folder: Path) -> str:
    """The queue the environment names (``ZERO3_LAB_QUEUE``), else the SQLite file in ``default_folder``;
    ``ValueError`` naming the variable for anything else."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return f"sqlite:///{(default_folder / 'queue.sqlite3').resolve()}"
    check_queue_url(raw)
    return raw


def check_queue_url(url: str) -> None:
    if url.startswith(REDIS_SCHEMES):
        return
    if url.startswith("sqlite:///") and Path(url.removeprefix("sqlite:///")).is_absolute():
        return
    raise ValueError(f"{ENV} = {url[:64]!r}: redis://host:port/db, rediss://…, unix://… or sqlite:////absolute/path")


def make_huey(url: str) -> Huey:
    """The huey of ``url`` (see :func:`queue_url`); nothing is connected until it is used."""
    check_queue_url(url)
    if url.startswith(REDIS_SCHEMES):
        return RedisHuey(NAME, url=url)
    # the tables are made on first use, not here: a page that builds the queue must not fail for its file
    return Huey(NAME, storage_class=HealingSqliteStorage, filename=url.removeprefix("sqlite:///"), create_tables=False)


def check_reachable(url: str, timeout_s: float = 3.0) -> None:
    """At start: ``ValueError`` naming the setting when the queue cannot be used — a Redis that does not answer a
    PING within ``timeout_s``, or a SQLite file whose folder cannot be written."""
    if not url.startswith(REDIS_SCHEMES):
        setting = ENV if os.environ.get(ENV, "").strip() else "ZERO3_LAB_TRACE_CACHE (the queue's file is beside it)"
        check_writable(Path(url.removeprefix("sqlite:///")).parent, setting)
        return
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ValueError(f"{ENV} = {describe(url)}: no Redis answers there ({exc})") from None
    finally:
        client.close()


def release(huey: Huey) -> None:
    """Close what ``huey``'s storage holds open in this process (a Redis connection pool, SQLite connections): a web
    worker that stops, or a test that is done with a queue, leaves no socket for the collector to find."""
    pool = getattr(huey.storage, "pool", None)
    if pool is not None:
        pool.disconnect()
    else:
        huey.storage.close()


def describe(url: str) -> str:
    """``url`` without a password, for a log line."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"
