"""The engine's verbs of where jobs stand (``engine.positions``): a ready job's rank and
score, the jobs of other shards ahead of it, the reads the watch batches, and the jobs
overdue on Redis' clock."""

from __future__ import annotations

from collections.abc import Sequence

from .ahead import ahead_of, queue_ahead
from .base import Core
from .records import JobInfo
from .redis.connection import server_time_ms, unavailable_as_error
from .scripts import Batch, Pending, Standing


class Positions:
    """The position verbs of one queue's engine (``engine.positions``)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def ready_standing(self, tag: str) -> tuple[int | None, float | None]:
        """(rank in its shard, score) of job ``tag`` in ``ready``, in one round trip;
        (None, None) unless it is ready."""
        e = self._engine
        ready = e._keys_for(tag).ready
        pipe = e._client.pipeline(transaction=False)
        pipe.zrank(ready, tag)
        pipe.zscore(ready, tag)
        rank, score = pipe.execute()
        return (None if rank is None else int(rank), None if score is None else float(score))

    def ahead_elsewhere(self, standings: Sequence[Standing]) -> list[int]:
        """For each ready job of ``standings`` (each with a score), the jobs of the other
        shards ahead of it (one round trip; zeros on an unpartitioned queue)."""
        e = self._engine
        if len(e._shards) == 1 or not standings:
            return [0] * len(standings)
        pipe = e._client.pipeline(transaction=False)
        counts = [
            queue_ahead(pipe, e._shards, s.score or 0.0, e._shard_for(s.tag).index)
            for s in standings
        ]
        replies = iter(pipe.execute())
        return [ahead_of(replies, n) for n in counts]

    def add_positions(
        self, batch: Batch, tags: Sequence[str], most: int
    ) -> tuple[list[Pending[list[Standing]]], list[list[str]]]:
        """Add to ``batch`` the reads of where ``tags`` stand: one ``positions`` call per
        shard and ``most`` jobs, then per shard the progress of its jobs (one ``HMGET``),
        then per shard its ``acked`` and ``run_ms`` counters, then the workers hash. The
        pending replies of the ``positions`` calls and the tags of each shard, in the
        order of the ``HMGET``s (the batch's raw replies after the calls')."""
        e = self._engine
        by_shard: dict[int, list[str]] = {}
        for tag in tags:
            by_shard.setdefault(e._shard_for(tag).index, []).append(tag)
        pending = [
            batch.add(e._shards[i].positions(chunk[n : n + most]))
            for i, chunk in by_shard.items()
            for n in range(0, len(chunk), most)
        ]
        for i, chunk in by_shard.items():
            batch.command("hmget", e._shards[i].keys.progress, chunk)
        for s in e._shards:
            batch.command("hmget", s.keys.stats, ["acked", "run_ms"])
        batch.command("hgetall", e._keys.workers)
        return pending, list(by_shard.values())

    def add_job_read(self, batch: Batch, tag: str) -> tuple[Pending[JobInfo | None], int]:
        """Add to ``batch`` the info call of job ``tag`` (with its body) and a ``GET`` of its
        result key: the info's pending reply and the index of the ``GET``'s raw reply."""
        shard = self._engine._shard_for(tag)  # the job's partition (the queue's own if one)
        return batch.add(shard.info(tag, True)), batch.command("get", shard.keys.result(tag))

    def overdue(self, slack_ms: int) -> dict[str, tuple[int, float]]:
        """For ``"delayed"`` and ``"leased"``: how many of the queue's jobs are due (a delay
        ended, a lease expired) for longer than ``slack_ms``, and for how long (ms) the
        oldest, on Redis' clock."""
        e = self._engine
        with unavailable_as_error():
            now = server_time_ms(e._client, e._keys.ready)
            late: dict[str, tuple[int, float]] = {}
            for kind in ("delayed", "leased"):
                pipe = e._client.pipeline(transaction=False)
                for k in e._part_keys:
                    key = getattr(k, kind)
                    pipe.zcount(key, "-inf", now - slack_ms)
                    pipe.zrange(key, 0, 0, withscores=True)
                replies = pipe.execute()
                count = sum(int(c) for c in replies[0::2])
                oldest = min((r[0][1] for r in replies[1::2] if r), default=now)
                late[kind] = (count, now - oldest)
        return late

    def server_ms(self) -> int:
        """Redis ``TIME`` in ms on the queue's node."""
        e = self._engine
        with unavailable_as_error():
            return server_time_ms(e._client, e._keys.ready)
