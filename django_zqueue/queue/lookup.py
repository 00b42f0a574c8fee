"""Looking up one job: its rank, score, state, record and kept result; and the queue's
counters and listings, read through :mod:`django_zqueue.read` (``queue.read``)."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cached_property
from typing import Any

from ..engine.ahead import queue_ahead
from ..engine.records import JobInfo, validate
from ..engine.redis.connection import unavailable_as_error
from ..exceptions import CorruptResult
from ..read import QueueReader
from .base import QueueBase


class Lookup(QueueBase):
    """The read side of a queue."""

    @cached_property
    def read(self) -> QueueReader:
        """Reads of many jobs and of the counters (:class:`~django_zqueue.read.QueueReader`)."""
        return QueueReader(self.engine)

    def rank(self, tag: str) -> int | None:
        """Position in line: 0 = claimed next. None unless the job is ready.

        On a partitioned queue, the exact position in the global order (score, then
        partition, then tag): the job's rank in its partition plus, in every other
        partition, the jobs with a lower score, and those with an equal score in a
        lower-numbered partition. Two round trips, O(partitions · log N)."""
        validate.tag(tag)
        if self.partitions == 1:
            with unavailable_as_error():
                r: Any = self.engine.client.zrank(self.keys.ready, tag)
            return None if r is None else int(r)
        shard = self.engine.shard_for(tag)
        with unavailable_as_error():
            pipe = self.engine.client.pipeline(transaction=False)
            pipe.zscore(shard.keys.ready, tag)
            pipe.zrank(shard.keys.ready, tag)
            score, own = pipe.execute()
            if score is None or own is None:
                return None
            return int(own) + self._ahead(float(score), shard.index)

    def _ahead(self, score: float, p: int) -> int:
        """Jobs of the other shards ahead of score ``score`` in shard ``p`` (0 when the
        queue has one shard)."""
        if len(self.engine.shards) == 1:
            return 0
        pipe = self.engine.client.pipeline(transaction=False)
        queue_ahead(pipe, self.engine.shards, score, p)  # the tie rule, shared with the read side
        return sum(int(c) for c in pipe.execute())

    def score(self, tag: str) -> float | None:
        """The job's ready score (lower = sooner). None unless the job is ready."""
        with unavailable_as_error():
            s = self.engine.client.zscore(self.engine.keys_for(validate.tag(tag)).ready, tag)
        return None if s is None else float(s)

    def state(self, tag: str) -> str | None:
        """``"ready"``, ``"delayed"``, ``"leased"``, ``"dead"``, or None (no such job)."""
        return self.engine.run(self.engine.shard_for(validate.tag(tag)).state(tag))

    def exists(self, tag: str) -> bool:
        """True while the job is ready, delayed, waiting for its parents (a workflow) or in
        flight (dead letters excluded)."""
        return self.state(tag) in ("ready", "delayed", "waiting", "leased")

    def info(self, tag: str, *, with_body: bool = True) -> JobInfo | None:
        """Everything known about one job, read atomically; None if there is no such job.
        After the end, a job kept in the history of finished jobs answers too (state
        ``succeeded`` with its kept result, or ``cancelled``: :meth:`finished`)."""
        info = self.engine.run(self.engine.info_call(tag, with_body=with_body))
        if info is not None and info.rank is not None and len(self.engine.shards) > 1:
            # the script ranks within the shard; add the other shards' share
            assert info.score is not None
            with unavailable_as_error():
                ahead = self._ahead(info.score, self.engine.shard_for(tag).index)
            info = replace(info, rank=info.rank + ahead)
        return info

    def result(self, tag: str) -> Any:
        """The result kept by ``ack(msg, result=...)``; raises ``LookupError`` when none is
        kept (never stored, or expired)."""
        with unavailable_as_error():
            raw = self.engine.client.get(self.engine.keys_for(validate.tag(tag)).result(tag))
        if raw is None:
            raise LookupError(f"no result kept for job {tag!r} in queue {self.name!r}")
        return decode_result(raw, self.engine.keys_for(tag).result(tag))

    # ----------------------------------------------------------------- many jobs, counters
    # (the read model, :mod:`.read`; kept here as the queue's documented API)

    def total_count(self) -> int:
        """Jobs waiting in line (ready)."""
        return self.read.total_count()

    def counts(self) -> dict[str, int]:
        """Jobs per state: ``ready``, ``delayed``, ``inflight``, ``dead`` (one snapshot;
        on a partitioned queue, the sums of one read of each partition)."""
        return self.read.counts()

    def stats(self) -> dict[str, int]:
        """Lifetime counters: enqueued, claimed, acked, failed, retried, dead, expired, ..."""
        return self.read.stats()

    def minutes(self, last: int = 60) -> list[dict[str, int]]:
        """Per-minute figures for the ``last`` minutes (at most 63), oldest first: minute
        (since the epoch, Redis time), enqueued, acked, failed, dead, run_ms, and ready
        (depth: the last sample the scanner took in that minute, -1 when none was
        taken; for the current minute, the depth now). Minutes with no activity are
        zeros. One round trip (two on a Redis Cluster or a partitioned queue)."""
        return self.read.minutes(last)

    def live_threads(self, within: float = 30.0) -> int:
        """Worker threads serving this queue, as registered by workers seen in the last
        ``within`` seconds."""
        return self.read.live_threads(within)

    def dead_letters(self, offset: int = 0, limit: int = 50) -> list[JobInfo]:
        """Dead jobs, most recent first, with their last error (one page)."""
        return self.read.dead_letters(offset, limit)

    def finished(self, limit: int = 50, offset: int = 0, state: str | None = None) -> list[JobInfo]:
        """Jobs that ended, newest first (one page): ``succeeded`` and ``cancelled`` ones
        kept in the history of finished jobs (options ``keep_finished``,
        ``finished_ttl``), ``dead`` letters and ``expired`` jobs; ``state`` lists one of
        them (None: all four, merged: then ``offset + limit`` is at most 2,000). Each is
        a :class:`JobInfo` with its record and body (no kept result: :meth:`info` reads
        it), dead and expired ones with their last error. Two round trips."""
        page = self.read.finished(state, offset, limit)
        return [job.info(self.name) for job in page.jobs if not job.gone]


def decode_result(raw: bytes | str, key: str) -> Any:
    """A kept result read from ``key``; :class:`CorruptResult` when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError as exc:  # (bad UTF-8 too)
        raise CorruptResult(
            f"the result at {key} is not JSON ({exc}): it cannot be read; delete the key "
            "(DEL) or let it expire"
        ) from exc
