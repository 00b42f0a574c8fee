"""The engine's verbs of job logs (``engine.joblogs``): the lines a job says while it
runs, per attempt (docs/admin.md, "Job logs").

One field per job of the queue's ``logs`` HASH (:attr:`QueueKeys.logs`), under the job's
id, written by ``log_append.lua``: a header (the line count and the lines dropped so far)
then the lines, each its attempt, the ms it was said (the worker's clock), its level name
and its text, packed as a MessagePack array. Bounded: the oldest lines past
``max_lines`` are dropped (and counted) by the write that adds the newer ones, and a line
longer than ``max_line_bytes`` is cut, with a marker.

A log lives as long as the job: while it waits, runs, is retried or is dead, and, once
it ended, as long as its entry in the history of finished jobs: the scripts that drop
history entries drop their logs in the same call (``_history.lua``), ``delete.lua``
drops a deleted job's, and each ``scan.lua`` step sweeps a bounded page of logs whose
job has neither a record nor a history entry (a queue without a history, dead letters
trimmed). A log of the older layout (a stream per job, ``{p:q}:log:<id>``, with a TTL)
is still read when the job has none in the hash, and its TTL drops it.

Each verb is one round trip."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis

from ..conf.joblogs import LINES_RANGE
from .base import Core
from .records import from_ms, text
from .records.codec import pack_value, unpack_one
from .redis.connection import unavailable_as_error
from .scripts import Call

#: the first bytes of a log in the ``logs`` hash (``log_append.lua``)
HEADER = b"ZL1"
#: most lines one read returns: the highest ``JOB_LOGS["MAX_LINES"]`` (conf.joblogs)
MAX_READ = LINES_RANGE[1]


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of a job's log: the attempt that said it (1 the first run), when
    (Redis time), its level name (``INFO``, ``WARNING``, ...) and its text."""

    attempt: int
    at: datetime
    level: str
    text: str
    id: str  # ``<ms>-<n>``: n the line's place in the log (a stream entry's id, older logs)


@dataclass(frozen=True, slots=True)
class JobLog:
    """A job's log: ``lines`` oldest first; ``dropped`` the oldest lines no longer kept
    (past ``JOB_LOGS["MAX_LINES"]``)."""

    lines: tuple[LogLine, ...] = ()
    dropped: int = 0

    def by_attempt(self) -> dict[int, list[LogLine]]:
        """The lines of each attempt, attempts in order, lines oldest first."""
        out: dict[int, list[LogLine]] = {}
        for line in sorted(self.lines, key=lambda x: x.attempt):  # stable: keeps order
            out.setdefault(line.attempt, []).append(line)
        return out


def cut(value: str, max_bytes: int) -> str:
    """``value`` cut to ``max_bytes`` bytes of UTF-8 (whole characters), with a marker
    saying how many bytes were cut; as it is when it fits."""
    raw = value.encode("utf-8", "replace")
    if len(raw) <= max_bytes:
        return value
    kept = raw[:max_bytes].decode("utf-8", "ignore")
    return f"{kept} … [line cut: {len(raw) - len(kept.encode('utf-8')):,} more bytes]"


def _line(entry: Any) -> LogLine | None:
    """A stream entry (the older layout) as a line; None for one not written here."""
    try:
        entry_id, fields = entry
        f = {text(k): text(v) for k, v in fields.items()}
        eid = text(entry_id)
        return LogLine(int(f["a"]), from_ms(int(eid.split("-")[0])), f["l"], f["m"], eid)
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


def pack_line(attempt: int, at_ms: int, level: str, line: str) -> bytes:
    """One line as ``log_append.lua`` keeps it: ``[attempt, ms, level, text]``."""
    return pack_value([attempt, at_ms, level, line])


def parse_log(raw: bytes) -> JobLog:
    """A value of the ``logs`` hash as a log: its lines up to the first that cannot be
    read (a corrupt value keeps what came before; one without the header is empty)."""
    if raw[:3] != HEADER or len(raw) < 19:
        return JobLog()
    try:
        dropped = int(raw[11:19], 16)
    except ValueError:
        return JobLog()
    lines: list[LogLine] = []
    at = 19
    while at + 8 <= len(raw) and len(lines) < MAX_READ:
        try:
            size = int(raw[at : at + 8], 16)
            chunk = raw[at + 8 : at + 8 + size]
            if len(chunk) != size:
                break
            value, end = unpack_one(chunk)
            attempt, ms, level, said = value
            if end != size or not isinstance(said, str) or not isinstance(level, str):
                break
            lines.append(
                LogLine(int(attempt), from_ms(int(ms)), level, said, f"{int(ms)}-{len(lines)}")
            )
        except (ValueError, TypeError, IndexError, OverflowError, OSError):
            break
        at += 8 + size
    return JobLog(tuple(lines), dropped)


def _read_counts(reply: Any) -> tuple[int, int, bool]:
    count, dropped, corrupt = reply
    return int(count), int(dropped), bool(int(corrupt))


class JobLogs:
    """The job log verbs of one queue's engine (``engine.joblogs``)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def append(
        self,
        tag: str,
        lines: Sequence[tuple[int, int, str, str]],
        *,
        max_lines: int,
        max_line_bytes: int,
    ) -> tuple[int, int, bool] | None:
        """Add ``(attempt, ms, level, text)`` lines said by job ``tag`` to its log (each
        text cut to ``max_line_bytes``; the oldest past ``max_lines`` dropped), in one
        script call. Returns (lines kept, lines dropped in all, whether a corrupt value
        was replaced); None (nothing sent) for no lines."""
        if not lines:
            return None
        e = self._engine
        packed = tuple(
            pack_line(a, ms, level, cut(line, max_line_bytes)) for a, ms, level, line in lines
        )
        call = Call(
            "log_append",
            (e._keys_for(tag).logs,),
            (tag, max_lines, *packed),
            _read_counts,
        )
        return e.run(call)

    def read(self, tag: str) -> JobLog:
        """Job ``tag``'s log (empty: none kept), in one round trip: its field of the
        ``logs`` hash, else a stream of the older layout."""
        e = self._engine
        keys = e._keys_for(tag)
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            pipe.hget(keys.logs, tag)
            pipe.xinfo_stream(keys.log(tag))
            pipe.xrange(keys.log(tag), count=MAX_READ)
            raw, info, entries = pipe.execute(raise_on_error=False)
        if isinstance(raw, bytes | str) and raw:
            return parse_log(raw.encode() if isinstance(raw, str) else raw)
        if isinstance(entries, redis.ResponseError) or not entries:
            return JobLog()  # none, or not a stream
        lines = tuple(x for x in map(_line, entries) if x is not None)
        dropped = 0
        if isinstance(info, dict):
            added = info.get("entries-added", info.get(b"entries-added"))
            if isinstance(added, int):
                dropped = max(0, added - len(entries))
        return JobLog(lines, dropped)

    def delete(self, tag: str) -> None:
        """Drop job ``tag``'s log (either layout)."""
        e = self._engine
        keys = e._keys_for(tag)
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            pipe.hdel(keys.logs, tag)
            pipe.delete(keys.log(tag))
            pipe.execute(raise_on_error=False)
