"""The engine's verbs of streamed output (``engine.jobstreams``): the chunks a job
streams to the person waiting on it (an answer as it is written, an export's progress
text), read back from an id, so a reader that reconnects resumes with no gap and no
duplicate (docs/position.md, "Streamed output").

One Redis stream per job, ``{p:q}:out:<id>`` (:meth:`QueueKeys.out`): an entry per
chunk, field ``c``; the entry id (``<ms>-<seq>``, Redis time) orders the chunks and is
the reader's cursor. Bounded: at most :data:`MAX_CHUNKS` chunks (``XADD ... MAXLEN``,
the oldest dropped) of at most :data:`MAX_CHUNK_BYTES` each, and the key expires
:data:`TTL_MS` after its last chunk. Each verb is one round trip."""

from __future__ import annotations

import re
from dataclasses import dataclass

import redis

from ..exceptions import InvalidArgument
from .base import Core
from .records import text
from .redis.connection import unavailable_as_error

#: most chunks one job's stream holds (the oldest are dropped past it)
MAX_CHUNKS = 10_000
#: the longest chunk, bytes of UTF-8
MAX_CHUNK_BYTES = 64 * 1024
#: a stream expires this long after its last chunk
TTL_MS = 3_600_000
#: most chunks one read returns
MAX_READ = 1000
#: a reader's cursor: "0" (from the start) or a stream entry id
CURSOR_RE = re.compile(r"^(0|[0-9]{1,20}-[0-9]{1,20})$")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a job's streamed output: its ``id`` (the cursor after it) and text."""

    id: str
    text: str


def check_cursor(after: object) -> str:
    """``after`` checked: "0" or a stream entry id (``InvalidArgument`` otherwise)."""
    if not isinstance(after, str) or not CURSOR_RE.match(after):
        raise InvalidArgument(f"after must be '0' or a chunk id ('<ms>-<seq>'), not {after!r}")
    return after


class JobStreams:
    """The streamed output verbs of one queue's engine (``engine.jobstreams``)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def append(self, tag: str, chunk: str) -> str:
        """Add ``chunk`` to job ``tag``'s stream; its id. A chunk that is not a str, is
        empty or is longer than ``MAX_CHUNK_BYTES`` raises ``InvalidArgument``, nothing
        written."""
        if not isinstance(chunk, str) or not chunk:
            raise InvalidArgument("a streamed chunk is a non-empty str")
        if len(chunk) > MAX_CHUNK_BYTES or len(chunk.encode("utf-8")) > MAX_CHUNK_BYTES:
            raise InvalidArgument(f"a streamed chunk holds at most {MAX_CHUNK_BYTES:,} bytes")
        e = self._engine
        key = e._keys_for(tag).out(tag)
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            pipe.xadd(key, {"c": chunk}, maxlen=MAX_CHUNKS, approximate=False)
            pipe.pexpire(key, TTL_MS)
            added, _ = pipe.execute()
        return text(added)

    def read(self, tag: str, after: str = "0", count: int = MAX_READ) -> list[Chunk]:
        """The chunks of job ``tag``'s stream after the cursor ``after`` (at most
        ``count``, oldest first); none when it has no stream (none, or expired)."""
        check_cursor(after)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_READ:
            raise InvalidArgument(f"count must be an int in [1, {MAX_READ}]")
        e = self._engine
        key = e._keys_for(tag).out(tag)
        start = "-" if after == "0" else f"({after}"
        with unavailable_as_error():
            try:
                entries = e._client.xrange(key, min=start, count=count)
            except redis.ResponseError:  # not a stream: a corrupt key reads as none
                return []
        out: list[Chunk] = []
        for entry_id, fields in entries or []:
            value = fields.get(b"c", fields.get("c")) if isinstance(fields, dict) else None
            # an entry not written here is left out
            if isinstance(value, bytes | str) and isinstance(entry_id, bytes | str):
                out.append(Chunk(text(entry_id), text(value)))
        return out
