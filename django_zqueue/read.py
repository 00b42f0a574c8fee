"""The read side of a queue: counts, counters, the per-minute ring, workers and listings,
decoded in one place for the dashboard, the operator commands and the metrics.

Reads never write. Each reader works over the queue's shards alike: an unpartitioned
queue is one shard, and the figures of a partitioned queue are merged here (sums of
counts and counters, a merged minute ring, listings merged in global order).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .connection import is_cluster, server_time_ms, unavailable_as_error
from .exceptions import InvalidArgument
from .records import JobInfo, text

if TYPE_CHECKING:
    from .queue import Queue

STATES = ("ready", "delayed", "leased", "dead")
#: the per-minute series of the stats ring: field prefix -> name
SERIES = {"e": "enqueued", "a": "acked", "f": "failed", "d": "dead", "t": "run_ms", "r": "ready"}
#: on a partitioned queue, a merged listing (dead letters, admin pages) reads at most
#: this many entries per partition: offset + limit must stay within it
MAX_MERGED = 10_000


def decode_stats(raw: Mapping[Any, Any]) -> dict[str, int]:
    """A stats hash (lifetime counters and the 64-slot minute ring) as ints."""
    return {text(k): int(v) for k, v in raw.items()}


def counters(fields: Mapping[str, int]) -> dict[str, int]:
    """The lifetime counters of a decoded stats hash (the ring's fields left out)."""
    return {name: v for name, v in fields.items() if not name[-1:].isdigit()}


def merge_stats(parts: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """Decoded stats hashes of several shards as one: lifetime counters summed field by
    field, and each slot of the minute ring summed over the shards whose slot holds the
    newest minute. One shard's hash is returned as it is."""
    if len(parts) == 1:
        return dict(parts[0])
    fields: dict[str, int] = {}
    for part in parts:
        for name, v in counters(part).items():
            fields[name] = fields.get(name, 0) + v
    for slot in range(64):
        owners = [part for part in parts if f"m{slot}" in part]
        if not owners:
            continue
        minute = max(part[f"m{slot}"] for part in owners)
        fields[f"m{slot}"] = minute
        for part in owners:
            if part[f"m{slot}"] != minute:
                continue
            for short in SERIES:
                key = f"{short}{slot}"
                if key in part:
                    fields[key] = fields.get(key, 0) + part[key]
    return fields


def minute_rows(
    fields: Mapping[str, int], now_minute: int, last: int, ready_now: int | None = None
) -> list[dict[str, int]]:
    """Rows of :meth:`Queue.minutes` from the decoded stats hash (the 64-slot ring);
    ``ready_now``, when given, is the current minute's depth (the live ZCARD)."""
    out = []
    for minute in range(now_minute - last + 1, now_minute + 1):
        slot = minute % 64
        live = fields.get(f"m{slot}") == minute
        row = {"minute": minute}
        for short, name in SERIES.items():
            row[name] = fields.get(f"{short}{slot}", 0) if live else 0
        if not live or f"r{slot}" not in fields:
            row["ready"] = -1
        out.append(row)
    if ready_now is not None and out:
        out[-1]["ready"] = ready_now
    return out


def live_thread_count(workers: Mapping[Any, Any], cutoff_ms: float) -> int:
    """Threads of the worker registrations (the workers hash) seen since ``cutoff_ms``."""
    total = 0
    for value in workers.values():
        try:
            entry = json.loads(value)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("seen", 0) >= cutoff_ms:
            total += int(entry.get("threads", 1))
    return total


def _now_ms() -> int:
    return int(time.time() * 1000)


class QueueReader:
    """Reads of one queue (``queue.read``); one round trip per method unless it says."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def total_count(self) -> int:
        """Jobs waiting in line (ready)."""
        q = self.queue
        if len(q.shards) > 1:
            return self.counts()["ready"]
        with unavailable_as_error():
            return int(q.client.zcard(q.keys.ready))

    def counts(self) -> dict[str, int]:
        """Jobs per state: ``ready``, ``delayed``, ``inflight``, ``dead`` (one snapshot of
        one shard; on a partitioned queue, the sums of one read of each partition)."""
        q = self.queue
        with unavailable_as_error():
            pipe = q.client.pipeline(transaction=len(q.shards) == 1)
            for s in q.shards:
                for key in (s.keys.ready, s.keys.delayed, s.keys.leased, s.keys.dead):
                    pipe.zcard(key)
            replies = pipe.execute()
        r, d, inflight, dead = (sum(int(x) for x in replies[i::4]) for i in range(4))
        return {"ready": r, "delayed": d, "inflight": inflight, "dead": dead}

    def stats_fields(self) -> dict[str, int]:
        """The decoded stats hash, merged over the shards (:func:`merge_stats`)."""
        q = self.queue
        with unavailable_as_error():
            pipe = q.client.pipeline(transaction=False)
            for s in q.shards:
                pipe.hgetall(s.keys.stats)
            return merge_stats([decode_stats(raw) for raw in pipe.execute()])

    def stats(self) -> dict[str, int]:
        """Lifetime counters: enqueued, claimed, acked, failed, retried, dead, expired, ..."""
        return counters(self.stats_fields())

    def minutes(self, last: int = 60) -> list[dict[str, int]]:
        """See :meth:`Queue.minutes <django_zqueue.queue.Queue.minutes>`."""
        if not 1 <= last <= 63:
            raise InvalidArgument("last must be in [1, 63]")
        q = self.queue
        with unavailable_as_error():
            # a cluster pipeline takes no TIME, and shards may live on several nodes
            own_time = len(q.shards) == 1 and not is_cluster(q.client)
            now_ms = 0 if own_time else server_time_ms(q.client, q.keys.stats)
            pipe = q.client.pipeline(transaction=False)
            if own_time:
                pipe.time()
            for s in q.shards:
                pipe.hgetall(s.keys.stats)
                pipe.zcard(s.keys.ready)
            replies = pipe.execute()
        if own_time:
            secs, micros = replies.pop(0)
            now_ms = int(secs) * 1000 + int(micros) // 1000
        fields = merge_stats([decode_stats(raw) for raw in replies[0::2]])
        depth = sum(int(n) for n in replies[1::2])
        return minute_rows(fields, now_ms // 60000, last, depth)

    def live_threads(self, within: float = 30.0) -> int:
        """Worker threads serving this queue, as registered by workers seen in the last
        ``within`` seconds."""
        q = self.queue
        with unavailable_as_error():
            raw = q.client.hgetall(q.keys.workers)
        return live_thread_count(raw, _now_ms() - within * 1000)

    def page(self, state: str, offset: int, limit: int) -> list[tuple[str, float, int]]:
        """One page of a state's sorted set over all shards, in global order:
        ``(tag, score, shard index)``. Ready, delayed, leased ascend by (score, shard,
        tag); dead descends (most recent first). Reads ``offset + limit`` entries of each
        shard, so ``offset + limit`` must be at most ``MAX_MERGED`` on a partitioned
        queue. One round trip."""
        q = self.queue
        if offset < 0 or limit < 1 or (len(q.shards) > 1 and offset + limit > MAX_MERGED):
            raise InvalidArgument(
                f"offset + limit must be at most {MAX_MERGED} on a partitioned queue "
                f"(got offset={offset}, limit={limit})"
            )
        newest = state == "dead"
        name = {"inflight": "leased"}.get(state, state)
        if name not in STATES:
            raise InvalidArgument(f"state must be one of {', '.join(STATES)}, got {state!r}")
        one = len(q.shards) == 1
        start = offset if one else 0
        with unavailable_as_error():
            pipe = q.client.pipeline(transaction=False)
            for s in q.shards:
                key = getattr(s.keys, name)
                if newest:
                    pipe.zrevrange(key, start, offset + limit - 1, withscores=True)
                else:
                    pipe.zrange(key, start, offset + limit - 1, withscores=True)
            replies = pipe.execute()
        entries = [
            (text(tag), float(score), p) for p, rows in enumerate(replies) for tag, score in rows
        ]
        if one:
            return entries
        entries.sort(key=lambda e: (e[1], e[2], e[0].encode("utf-8")), reverse=newest)
        return entries[offset : offset + limit]

    def infos(self, entries: Sequence[tuple[str, int]], *, with_body: bool = True) -> list[JobInfo]:
        """:class:`JobInfo` of ``(tag, shard index)`` pairs, in one round trip; jobs gone
        in the meantime are left out."""
        q = self.queue
        if not entries:
            return []
        batch = q.scripts.batch()
        pending = [batch.add(q.shards[p].info(tag, with_body)) for tag, p in entries]
        with unavailable_as_error():
            batch.send()
        return [info for p in pending if (info := p.result()) is not None]

    def dead_letters(self, offset: int = 0, limit: int = 50) -> list[JobInfo]:
        """Dead jobs, most recent first, with their last error (one page)."""
        if offset < 0 or not 1 <= limit <= 1000:
            raise InvalidArgument("offset must be >= 0 and limit in [1, 1000]")
        page = self.page("dead", offset, limit)
        return self.infos([(tag, p) for tag, _, p in page])
