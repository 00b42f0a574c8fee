"""The engine's counter writes (``engine.stats``): the queue's stats hash and its
per-task statistics."""

from __future__ import annotations

from collections.abc import Mapping

from .base import Core
from .redis.connection import server_time_ms, unavailable_as_error
from .rollup import KEEP_SECONDS, roll_up
from .scripts import Batch


def _ints(raw: Mapping[bytes | str, bytes | str]) -> dict[str, int]:
    """A hash of integers (a field whose value is not one is left out)."""
    out: dict[str, int] = {}
    for k, v in raw.items():
        try:
            out[k.decode() if isinstance(k, bytes) else k] = int(v)
        except (UnicodeDecodeError, ValueError):
            continue
    return out


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

    def roll_up(self) -> int:
        """Sum the minute ring of each shard's stats hash into its 10-minute and hourly
        rings (:mod:`django_zqueue.engine.rollup`): two round trips, bounded work (the 64
        minutes and the last two hours' 10-minute buckets read, at most 9 buckets
        written a shard). Returns the buckets written."""
        e = self._engine
        keys = [s.keys for s in e._shards]
        with unavailable_as_error():
            now_minute = server_time_ms(e._client, keys[0].stats) // 60_000
            pipe = e._client.pipeline(transaction=False)
            for k in keys:
                pipe.hgetall(k.stats)
                pipe.hgetall(k.roll(10))
            got = pipe.execute()
            pipe = e._client.pipeline(transaction=False)
            written = 0
            for i, k in enumerate(keys):
                plan = roll_up(_ints(got[2 * i]), _ints(got[2 * i + 1]), now_minute)
                for minutes, (fields, drop) in plan.items():
                    if not fields:
                        continue
                    written += sum(1 for f in fields if f.startswith("m"))
                    pipe.hset(k.roll(minutes), mapping=fields)  # type: ignore[arg-type]
                    if drop:
                        pipe.hdel(k.roll(minutes), *drop)
                    pipe.expire(k.roll(minutes), KEEP_SECONDS)
            if written:
                pipe.execute()
        return written
