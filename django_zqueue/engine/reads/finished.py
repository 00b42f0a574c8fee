"""Reads of the jobs that ended: the four ended states' sets (their counts and a range,
with Redis time, in one round trip) and the records of a page's jobs (one more);
:mod:`django_zqueue.read.finished` merges and shapes them.

==============  ============  =====================================================
state           set           record
==============  ============  =====================================================
``succeeded``   ``finished``  ``history`` (kept by ``ack``, ``keep_finished``)
``dead``        ``dead``      ``meta``, its last error in ``errors``
``cancelled``   ``cancels``   ``history`` (kept by ``cancel``, ``keep_finished``)
``expired``     ``expired``   ``meta``, its error in ``errors``
==============  ============  =====================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..records import text
from ..redis.connection import unavailable_as_error
from .pipeline import Timed, counts_of, queue_counts, queue_waiting, take, waiting_of

if TYPE_CHECKING:
    from ..base import EngineBase

#: the states of a job that ended, in the order a tie (same ms) lists them
FINISHED_STATES = ("succeeded", "dead", "cancelled", "expired")
#: the sorted set of each ended state (a field of QueueKeys)
ENDED_SET = {"succeeded": "finished", "dead": "dead", "cancelled": "cancels", "expired": "expired"}
#: the hash holding the record of a job of each ended state
RECORDS = {"succeeded": "history", "dead": "meta", "cancelled": "history", "expired": "meta"}
#: ``(tag, ended state, ms it ended, shard index)``: one entry of an ended state's set
Ended = tuple[str, str, float, int]


@dataclass(frozen=True, slots=True)
class EndedRange:
    """One round trip's read of the ended states: their counts and the entries of the
    states asked for, each shard's newest first (not merged)."""

    now_ms: int  # Redis time of the read
    counts: dict[str, int]  # jobs per ended state, summed over the shards
    entries: list[Ended]  # by shard, then state, each set's newest first
    #: with ``live``: the jobs in the other states (ready, delayed, leased, dead, waiting)
    live: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EndedHashes:
    """What the hashes hold of one ended job, as stored (None: nothing)."""

    record: Any  # from ``history`` (succeeded, cancelled) or ``meta`` (dead, expired)
    body: Any  # dead and expired jobs of the JSON layout
    error: Any  # dead and expired jobs, when errors were asked for
    kept: bool  # the record is a kept one (``history``)


def ended_range(
    e: EngineBase, states: Sequence[str], start: int, stop: int, *, live: bool = False
) -> EndedRange:
    """Redis time, the four ``ZCARD`` and, per shard and state of ``states``, the
    ``ZREVRANGE start stop`` of its set; with ``live``, the counts of the other states.
    One round trip (one transaction on one shard)."""
    shards = e._shards
    with unavailable_as_error():
        timed = Timed(e._client, shards[0].keys.finished, transaction=len(shards) == 1)
        for s in shards:
            for name in FINISHED_STATES:
                timed.pipe.zcard(getattr(s.keys, ENDED_SET[name]))
        for s in shards:
            for name in states:
                key = getattr(s.keys, ENDED_SET[name])
                timed.pipe.zrevrange(key, start, stop, withscores=True)
        if live:
            queue_counts(timed.pipe, shards)
            queue_waiting(timed.pipe, shards)
        now_ms, replies = timed.execute()
    got = [int(x) for x in take(replies, len(FINISHED_STATES) * len(shards))]
    counts = {name: sum(got[i :: len(FINISHED_STATES)]) for i, name in enumerate(FINISHED_STATES)}
    entries: list[Ended] = []
    for p in range(len(shards)):
        for name in states:
            entries += [(text(tag), name, float(sc), p) for tag, sc in next(replies)]
    other: dict[str, int] = {}
    if live:
        other = counts_of(replies, len(shards))
        other["waiting"] = waiting_of(replies, len(shards))
    return EndedRange(now_ms, counts, entries, other)


def ended_hashes(e: EngineBase, entries: Sequence[Ended], errors: bool) -> list[EndedHashes]:
    """One round trip: per shard, ``HMGET history`` of the succeeded and cancelled jobs,
    ``HMGET meta`` and ``HMGET body`` (bodies of the JSON layout) of the dead and expired
    ones, and with ``errors`` their ``HMGET errors``. In the order of ``entries``."""
    if not entries:
        return []
    wanted: dict[tuple[int, str], list[str]] = {}  # (shard, hash) -> tags
    for tag, name, _, p in entries:
        hashes = ("history",) if RECORDS[name] == "history" else ("meta", "body")
        if errors and RECORDS[name] == "meta":
            hashes = (*hashes, "errors")
        for h in hashes:
            tags = wanted.setdefault((p, h), [])
            if tag not in tags:
                tags.append(tag)
    with unavailable_as_error():
        pipe = e._client.pipeline(transaction=False)
        for (p, h), tags in wanted.items():
            pipe.hmget(getattr(e._shards[p].keys, h), tags)
        replies = iter(pipe.execute())
    found: dict[tuple[int, str, str], Any] = {}
    for (p, h), tags in wanted.items():
        for tag, value in zip(tags, next(replies), strict=True):
            found[(p, h, tag)] = value
    return [
        EndedHashes(
            record=found.get((p, RECORDS[name], tag)),
            body=found.get((p, "body", tag)),
            error=found.get((p, "errors", tag)),
            kept=RECORDS[name] == "history",
        )
        for tag, name, _, p in entries
    ]
