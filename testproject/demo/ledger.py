"""An execution ledger outside Redis: a SQLite file (WAL mode) with a row per run.

The fault tasks in ``tasks.py`` write a row when a run starts and fill ``finished`` when
it ends; the fault suite (tests/fault/) reads the file afterwards. Times are read with
``clock_gettime(CLOCK_REALTIME)``, which the clock-skew test does not patch, so they stay
the real wall clock even inside a worker whose ``time.time`` is off.
"""

from __future__ import annotations

import sqlite3
import time
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
    """Open the ledger, switching a new file to WAL mode.

    SQLite answers a journal-mode switch that meets another connection's lock with
    "database is locked" at once, without waiting out ``timeout``; the mode persists in
    the file, so it is set only when the file is not in WAL mode yet, retried for up to
    ten seconds (the suite creates each ledger before its workers start)."""
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    deadline = time.monotonic() + 10.0
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                db.close()
                raise
            time.sleep(0.05)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(SCHEMA)
    return db


def start(path: str, job: str, key: str, attempt: int, pid: int) -> int:
    db = connect(path)
    try:
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
