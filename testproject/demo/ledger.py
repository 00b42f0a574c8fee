"""An execution ledger outside Redis: a SQLite file with a row per run.

The fault tasks in ``tasks.py`` write a row when a run starts and fill ``finished`` when
it ends; the fault suite (tests/fault/) reads the file afterwards. Times are read with
``clock_gettime(CLOCK_REALTIME)``, which the clock-skew test does not patch, so they stay
the real wall clock even inside a worker whose ``time.time`` is off.

The file keeps SQLite's rollback journal, not WAL. In WAL mode a CI run once read the
ledger as "database disk image is malformed" after eight writers, each opening and
closing a connection per row (a checkpoint at each last close), were killed and
restarted for 30 s; the SQLite there (3.40) predates the fix of the WAL-reset race
(3.51.3), in which a write meeting another connection's checkpoint can corrupt the file.
A rollback journal does not have that race and is as safe against a killed writer (the
next connection rolls its hot journal back).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    key TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    started REAL NOT NULL,
    finished REAL
)
"""


def now() -> float:
    """The real wall clock (not ``time.time``, which a test may patch)."""
    return time.clock_gettime(time.CLOCK_REALTIME)


def connect(path: str) -> sqlite3.Connection:
    """Open the ledger (a rollback journal: see the module's note), making its table once.

    Writers take the write lock at ``BEGIN IMMEDIATE``, where SQLite's busy handler waits
    out ``timeout``; a plain write statement could meet a reader's upgrade and be answered
    "database is locked" at once."""
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    db.execute("PRAGMA synchronous=OFF")  # a killed process loses nothing; only the OS could
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone() is None:
        with _write(db):
            db.execute(SCHEMA)
    return db


@contextmanager
def _write(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def start(path: str, job: str, key: str, attempt: int, pid: int) -> int:
    db = connect(path)
    try:
        with _write(db):
            cur = db.execute(
                "INSERT INTO runs (job, key, attempt, pid, started) VALUES (?, ?, ?, ?, ?)",
                (job, key, attempt, pid, now()),
            )
        return int(cur.lastrowid or 0)
    finally:
        db.close()


def finish(path: str, run: int) -> None:
    db = connect(path)
    try:
        with _write(db):
            db.execute("UPDATE runs SET finished = ? WHERE id = ?", (now(), run))
    finally:
        db.close()


@dataclass(frozen=True)
class Run:
    id: int
    job: str
    key: str
    attempt: int
    pid: int
    started: float
    finished: float | None


def runs(path: str) -> list[Run]:
    db = connect(path)
    try:
        rows = db.execute(
            "SELECT id, job, key, attempt, pid, started, finished FROM runs ORDER BY id"
        ).fetchall()
    finally:
        db.close()
    return [Run(*row) for row in rows]
