"""The engine's verbs of job logs (``engine.joblogs``): the lines a job says while it
runs, per attempt (docs/admin.md, "Job logs").

One Redis stream per job, ``{p:q}:log:<id>`` (:meth:`QueueKeys.log`): an entry per line,
fields ``a`` (the attempt), ``l`` (the level name) and ``m`` (the text); the entry id
is the Redis time it was written. Bounded: ``XADD ... MAXLEN = max_lines`` drops the
oldest line past the cap in the same command (the stream's ``entries-added`` minus its
length is how many were dropped), and a line longer than ``max_line_bytes`` is cut,
with a marker. The key's TTL is renewed at each write: the queue's history of finished
jobs and its dead letters' TTL, whichever is longer, plus a day, so a job's log lives
as long as what the admin shows of the job and is dropped with it.

Each verb is one round trip (a pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis

from ..conf.joblogs import LINES_RANGE
from .base import Core
from .records import from_ms, text
from .redis.connection import unavailable_as_error

#: a log outlives its last line by the longer of ``finished_ttl`` and
#: ``dead_letter_ttl``, and this much
KEEP_MARGIN_MS = 86_400_000
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
    id: str  # the stream entry's id (``<ms>-<seq>``)


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
    """A stream entry as a line; None for one not written here (a corrupt key)."""
    try:
        entry_id, fields = entry
        f = {text(k): text(v) for k, v in fields.items()}
        eid = text(entry_id)
        return LogLine(int(f["a"]), from_ms(int(eid.split("-")[0])), f["l"], f["m"], eid)
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


class JobLogs:
    """The job log verbs of one queue's engine (``engine.joblogs``)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def keep_ms(self) -> int:
        """The TTL a log gets at each write (see the module docstring)."""
        o = self._engine.options
        return int(max(o.finished_ttl, o.dead_letter_ttl) * 1000) + KEEP_MARGIN_MS

    def append(
        self,
        tag: str,
        attempt: int,
        lines: Sequence[tuple[str, str]],
        *,
        max_lines: int,
        max_line_bytes: int,
    ) -> None:
        """Add ``(level, text)`` lines said by ``attempt`` of job ``tag`` to its log
        (each cut to ``max_line_bytes``; the oldest past ``max_lines`` dropped), in one
        round trip. Nothing for no lines."""
        if not lines:
            return
        e = self._engine
        key = e._keys_for(tag).log(tag)
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            for level, line in lines:
                fields = {"a": attempt, "l": level, "m": cut(line, max_line_bytes)}
                pipe.xadd(key, fields, maxlen=max_lines, approximate=False)  # type: ignore[arg-type]
            pipe.pexpire(key, self.keep_ms())
            pipe.execute()

    def read(self, tag: str) -> JobLog:
        """Job ``tag``'s log (empty: none kept), in one round trip."""
        e = self._engine
        key = e._keys_for(tag).log(tag)
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            pipe.xinfo_stream(key)
            pipe.xrange(key, count=MAX_READ)
            info, entries = pipe.execute(raise_on_error=False)
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
        """Drop job ``tag``'s log."""
        e = self._engine
        with unavailable_as_error():
            e._client.delete(e._keys_for(tag).log(tag))
