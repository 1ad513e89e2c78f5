"""What the lab's two SQLite files (the trace cache, the embedded trace queue) do when one is damaged.

A file SQLite cannot read as a database (garbage, a malformed image) is moved aside, with its WAL files, and a fresh
one started; one log line says where it went. A passing condition (a lock, a full disk: ``OperationalError``) is not
damage and is left to the caller. Standard library only.
"""

from __future__ import annotations

import logging
import sqlite3
from contextlib import suppress
from pathlib import Path

SUFFIXES = ("", "-wal", "-shm")


def unreadable(exc: BaseException) -> bool:
    """Whether ``exc`` says the file is no database SQLite can read, as opposed to a passing condition."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


def move_aside(path: Path, stamp: int, what: str, exc: BaseException, logger: logging.Logger) -> None:
    """Keep the unreadable ``path`` beside the fresh one (for whoever wants to look): ``<name>.unreadable-<stamp>``."""
    aside = path.with_name(f"{path.name}.unreadable-{stamp}")
    logger.warning("%s %s cannot be read as a database (%s): moved to %s, a fresh one started",
                   what, path, exc, aside.name)  # fmt: skip
    for suffix in SUFFIXES:
        with suppress(FileNotFoundError):
            path.with_name(path.name + suffix).replace(aside.with_name(aside.name + suffix))


def same_file(path: Path, inode: int | None) -> bool:
    """Whether ``path`` is still the file whose inode was ``inode`` (not deleted, not replaced)."""
    try:
        return path.stat().st_ino == inode
    except OSError:
        return False
