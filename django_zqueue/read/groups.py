"""Per-group figures of a queue (docs/fairness.md#watching-groups): jobs ready and in
flight per group key, and starts per group in this minute and the one before.

Bounded: a queue may hold any number of groups, so the counts are taken over the first
``sample`` jobs in line and the first ``sample`` jobs in flight of each shard (exact
when a state holds no more than that; :attr:`GroupFigures.exact` says which), and the
starts are read only for the groups found there. Four round trips (two listings, Redis
time, the starts), O(sample) records read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engine.records import Record, text
from ..engine.redis.connection import server_time_ms, unavailable_as_error
from ..exceptions import InvalidArgument

if TYPE_CHECKING:
    from .source import Readable

#: most jobs of one state read per shard
MAX_SAMPLE = 5000
#: the group of jobs published without one
NO_GROUP = ""


@dataclass(frozen=True, slots=True)
class GroupRow:
    """One group's figures: ``ready`` and ``inflight`` among the jobs read, ``started``
    in the current minute of Redis time and ``started_before`` in the minute before
    (counted by claims of a queue with ``fairness="groups"``; 0 in a fifo queue)."""

    group: str
    ready: int
    inflight: int
    started: int
    started_before: int


@dataclass(frozen=True, slots=True)
class GroupFigures:
    """The biggest groups first (by ready, then in flight, then name), at most ``top``;
    ``exact``: every ready and in-flight job was read (no state held more than
    ``sample`` jobs in a shard), so the counts are the queue's own; otherwise they are
    those of the head of the line and the oldest leases."""

    rows: list[GroupRow]
    exact: bool
    groups_seen: int  # distinct groups among the jobs read


def group_figures(queue: Readable, top: int = 20, sample: int = 1000) -> GroupFigures:
    """Per-group counts of ``queue`` (see the module docstring)."""
    if not 1 <= top <= 1000 or not 1 <= sample <= MAX_SAMPLE:
        raise InvalidArgument(f"top must be in [1, 1000] and sample in [1, {MAX_SAMPLE}]")
    ready: Counter[str] = Counter()
    inflight: Counter[str] = Counter()
    exact = True
    with unavailable_as_error():
        pipe = queue.client.pipeline(transaction=False)
        for s in queue.shards:
            pipe.zrange(s.keys.ready, 0, sample)  # one more: is there more than sample?
            pipe.zrange(s.keys.leased, 0, sample)
        listed = pipe.execute()
        pipe = queue.client.pipeline(transaction=False)
        wanted = []
        for i, s in enumerate(queue.shards):
            for j, counter in ((2 * i, ready), (2 * i + 1, inflight)):
                tags = listed[j]
                exact = exact and len(tags) <= sample
                tags = tags[:sample]
                if tags:
                    pipe.hmget(s.keys.meta, tags)
                    wanted.append(counter)
        for counter, metas in zip(wanted, pipe.execute(), strict=True):
            for raw in metas:
                record = Record.decode(raw)
                if record is not None:
                    counter[record.group or NO_GROUP] += 1
        names = sorted(set(ready) | set(inflight), key=lambda g: (-ready[g], -inflight[g], g))
        chosen = names[:top]
        started = _starts(queue, chosen)
    rows = [GroupRow(g, ready[g], inflight[g], *started.get(g, (0, 0))) for g in chosen]
    return GroupFigures(rows, exact, len(names))


def _starts(queue: Readable, groups: list[str]) -> dict[str, tuple[int, int]]:
    """(this minute, the minute before) starts of each group, summed over the shards;
    a shard whose counts are older than that counts 0."""
    if not groups:
        return {}
    minute = server_time_ms(queue.client, queue.keys.ctr) // 60000
    pipe = queue.client.pipeline(transaction=False)
    for s in queue.shards:
        pipe.hget(s.keys.ctr, "gmin")
        pipe.hmget(s.keys.gstarts, groups)
        pipe.hmget(s.keys.gstarts_prev, groups)
    replies = pipe.execute()
    out = dict.fromkeys(groups, (0, 0))
    for i in range(len(queue.shards)):
        held, cur, prev = replies[3 * i : 3 * i + 3]
        held_minute = int(text(held)) if held is not None else -2
        for g, c, p in zip(groups, cur, prev, strict=True):
            this, before = out[g]
            if held_minute == minute:
                this += int(c or 0)
                before += int(p or 0)
            elif held_minute == minute - 1:
                before += int(c or 0)
            out[g] = (this, before)
    return out
