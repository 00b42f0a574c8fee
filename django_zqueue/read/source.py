"""What the read side uses of a queue: a queue's engine
(:class:`~django_zqueue.engine.Engine`, ``queue.engine``) is a :class:`Readable`. The
read side depends on this contract, not on the engine's class, so that the queue can own
its reader (``queue.read``) without an import cycle."""

from __future__ import annotations

from typing import Protocol

from ..engine.chunkcalls import ChunkCalls
from ..engine.joblogs import JobLogs
from ..engine.reads import Reads


class Readable(Protocol):
    """A queue as the read side sees it: its name and its engine's read verbs
    (:class:`~django_zqueue.engine.reads.Reads`), never a client, a key or a shard."""

    @property
    def name(self) -> str: ...
    @property
    def reads(self) -> Reads: ...
    @property
    def joblogs(self) -> JobLogs: ...
    @property
    def chunkcalls(self) -> ChunkCalls: ...
