"""The engine's verbs for publishing sets of prepared jobs in shared calls
(``engine.sets``): which shard a job goes to, and the ``publish`` call of some jobs of one
shard. :mod:`django_zqueue.queue.sets` plans which sets share a call and sends the calls
with the engine's :meth:`~.base.EngineBase.batch`, :meth:`~.base.EngineBase.send` and
:meth:`~.base.EngineBase.run`; it knows no shard and no key.

Its own small object rather than part of ``engine.control`` or ``engine.reads``: these
verbs neither act on existing jobs nor read; they build the write of new ones, which the
sets' planner batches across queues.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .flow import Flow
    from .records import NewJob
    from .scripts import Call

__all__ = ["Sets"]


class Sets:
    """The publishing verbs of one queue's engine for sets of prepared jobs."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Flow) -> None:
        self._engine = engine

    def shard_index(self, tag: str) -> int:
        """The index of the shard that holds job ``tag``."""
        return self._engine._shard_for(tag).index

    def publish_call(self, shard: int, jobs: Sequence[NewJob]) -> Call[list[tuple[str, str]]]:
        """The ``publish`` call of ``jobs`` (all of shard ``shard``, at most
        ``PUBLISH_CHUNK``), not sent: its reply is the clashes (tag, state)."""
        return self._engine._shards[shard].publish(jobs)
