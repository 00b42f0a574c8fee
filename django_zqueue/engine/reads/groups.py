"""Reads behind the per-group figures (:mod:`django_zqueue.read.groups`): the records of
the first jobs in line and in flight of each shard, and the starts per group counted by
the claims of a fair queue."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..records import text
from ..redis.connection import server_time_ms, unavailable_as_error

if TYPE_CHECKING:
    from ..base import EngineBase


@dataclass(frozen=True, slots=True)
class GroupSample:
    """The records (as stored) of the first ``sample`` jobs ready and in flight of each
    shard, and the groups of the first ``sample`` jobs set aside by their group's limits
    (``gpark``, whose entries begin with the group); ``exact``: no state of a shard held
    more than that."""

    ready: list[Any]
    inflight: list[Any]
    exact: bool
    set_aside: list[str] = field(default_factory=list)


def group_sample(e: EngineBase, sample: int) -> GroupSample:
    """Two round trips: ``ZRANGE ready``, ``ZRANGE leased`` and ``ZRANGE gpark`` of each
    shard (one more than ``sample``: is there more?), then ``HMGET meta`` of the jobs
    listed in line and in flight."""
    ready: list[Any] = []
    inflight: list[Any] = []
    set_aside: list[str] = []
    exact = True
    with unavailable_as_error():
        pipe = e._client.pipeline(transaction=False)
        for s in e._shards:
            pipe.zrange(s.keys.ready, 0, sample)
            pipe.zrange(s.keys.leased, 0, sample)
        for s in e._shards:
            pipe.zrange(s.keys.gpark, 0, sample)
        listed = pipe.execute()
        for parked in listed[2 * len(e._shards) :]:
            exact = exact and len(parked) <= sample
            # an entry is "group\0order\0score\0run-at\0id" (lua/_fair.lua)
            set_aside.extend(text(m).split("\0", 1)[0] for m in parked[:sample])
        pipe = e._client.pipeline(transaction=False)
        wanted = []
        for i, s in enumerate(e._shards):
            for j, into in ((2 * i, ready), (2 * i + 1, inflight)):
                tags = listed[j]
                exact = exact and len(tags) <= sample
                tags = tags[:sample]
                if tags:
                    pipe.hmget(s.keys.meta, tags)
                    wanted.append(into)
        for into, metas in zip(wanted, pipe.execute(), strict=True):
            into.extend(metas)
    return GroupSample(ready, inflight, exact, set_aside)


def group_starts(e: EngineBase, groups: Sequence[str]) -> dict[str, tuple[int, int]]:
    """(this minute, the minute before) starts of each of ``groups``, summed over the
    shards, by Redis time; a shard whose counts are older than that counts 0. Two round
    trips (``TIME``, then per shard ``HGET ctr gmin`` and two ``HMGET``); none without
    groups."""
    if not groups:
        return {}
    with unavailable_as_error():
        minute = server_time_ms(e._client, e._keys.ctr) // 60000
        pipe = e._client.pipeline(transaction=False)
        for s in e._shards:
            pipe.hget(s.keys.ctr, "gmin")
            pipe.hmget(s.keys.gstarts, list(groups))
            pipe.hmget(s.keys.gstarts_prev, list(groups))
        replies = pipe.execute()
    out = dict.fromkeys(groups, (0, 0))
    for i in range(len(e._shards)):
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
