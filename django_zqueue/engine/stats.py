"""The engine's counter writes (``engine.stats``): the queue's stats hash and its
per-task statistics."""

from __future__ import annotations

from collections.abc import Mapping

from .base import Core
from .scripts import Batch


class Stats:
    """The counter verbs of one queue's engine (``engine.stats``)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def incr(self, counter: str, n: int) -> None:
        """Add ``n`` to ``counter`` in the queue's stats hash (of its first shard)."""
        e = self._engine
        e._client.hincrby(e._shards[0].keys.stats, counter, n)

    def add_task_stats(
        self, batch: Batch, slot: int, counts: Mapping[str, int], keep_seconds: int
    ) -> None:
        """Add to ``batch`` an ``HINCRBY`` of each of ``counts`` in the per-task statistics
        of 5-minute slot ``slot``, and one ``EXPIRE`` of ``keep_seconds``."""
        key = self._engine._keys.task_stats(slot)
        for field, n in counts.items():
            batch.command("hincrby", key, field, n)
        batch.command("expire", key, keep_seconds)
