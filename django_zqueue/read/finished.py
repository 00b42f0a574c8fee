"""The jobs that ended, newest first: the history of finished jobs and the dead letters.

A job ends in one of four states, each a sorted set of every shard (id -> ms it ended):

==============  ============  =====================================================
state           set           record
==============  ============  =====================================================
``succeeded``   ``finished``  ``history`` (kept by ``ack``, ``keep_finished``)
``dead``        ``dead``      ``meta``, its last error in ``errors``
``cancelled``   ``cancels``   ``history`` (kept by ``cancel``, ``keep_finished``)
``expired``     ``expired``   ``meta``, its error in ``errors``
==============  ============  =====================================================

A page is two round trips whatever the sets hold: Redis time, the four ``ZCARD`` and the
range of the sets listed, per shard; then one ``HMGET`` per hash and shard for the page's
tags only. One state on one shard is a ``ZREVRANGE`` from ``offset`` (any depth); several
states (``state=None``), or a partitioned queue, read each set's first ``offset + limit``
entries and merge them, newest first, so ``offset + limit`` is at most
``MAX_ENDED_MERGED`` (2,000) there: the merge reads and sorts that many entries of each
set (four sets of 10,000 took 120 ms with the page's rendering; 2,000, about 35 ms).
No ``KEYS``, ``SCAN`` or walk of a set.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engine.records import JobInfo, Record, decode_json, from_ms, text
from ..engine.records.attempts import last_error
from ..engine.records.codec import split_kept, split_record
from ..engine.redis.connection import unavailable_as_error
from ..exceptions import InvalidArgument
from .pipeline import Timed, counts_of, queue_counts, queue_waiting, take, waiting_of

if TYPE_CHECKING:
    from .source import Readable

#: the states of a job that ended, in the order a tie (same ms) lists them
FINISHED_STATES = ("succeeded", "dead", "cancelled", "expired")
#: the sorted set of each ended state (a field of QueueKeys)
_SET = {"succeeded": "finished", "dead": "dead", "cancelled": "cancels", "expired": "expired"}
#: the hash holding the record of a job of each ended state
_RECORDS = {"succeeded": "history", "dead": "meta", "cancelled": "history", "expired": "meta"}
#: most jobs one page of finished jobs may list
MAX_FINISHED_LIMIT = 1000
#: a merged listing of ended jobs (several states, or partitions) reads the newest
#: ``offset + limit`` entries of each set, at most this many
MAX_ENDED_MERGED = 2000


@dataclass(frozen=True, slots=True)
class FinishedJob:
    """One job that ended, as listed: when (``ended_ms``, its score), its record and body
    (None when gone since the range was read, or unreadable) and, for dead and expired
    jobs read with errors, the text of its last error."""

    tag: str
    state: str  # succeeded | dead | cancelled | expired
    ended_ms: float
    shard: int
    record: Record | None
    body: Any
    error: str | None = None

    @property
    def gone(self) -> bool:
        return self.record is None

    def info(self, queue: str) -> JobInfo:
        """As :meth:`Queue.info <django_zqueue.queue.Queue.info>` shows it (without its
        kept result or its attempts' errors, which a page does not read)."""
        r = self.record or Record()
        at = from_ms(self.ended_ms)
        return JobInfo(
            tag=self.tag,
            queue=queue,
            state=self.state,
            rank=None,
            score=None,
            run_at=None,
            lease_deadline=None,
            died_at=at if self.state == "dead" else None,
            priority=r.priority,
            attempts=r.attempts,
            max_retries=r.max_retries,
            enqueued_at=from_ms(r.enqueued_at_ms or 0),
            started_at=r.started_at,
            consumer=r.consumer,
            last_error=self.error,
            progress=None,
            body=self.body,
            group=r.group,
            expires_at=None if r.expires_at_ms is None else from_ms(r.expires_at_ms),
            expired_at=at if self.state == "expired" else None,
            finished_at=at if self.state in ("succeeded", "cancelled") else None,
            run_ms=r.run_ms,
            was=r.was,
        )


@dataclass(frozen=True, slots=True)
class FinishedPage:
    """A page of the jobs that ended, newest first, with the counts of the same read."""

    state: str | None  # None: every ended state
    counts: dict[str, int]  # jobs per ended state (succeeded, dead, cancelled, expired)
    jobs: list[FinishedJob]
    offset: int
    limit: int
    now_ms: int  # Redis time of the read
    max_total: int | None  # a merged listing reaches this many jobs (MAX_ENDED_MERGED)
    #: with ``live``: the jobs in the other states (ready, delayed, leased, dead, waiting)
    live: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Jobs of the state listed (of every ended state when ``state`` is None)."""
        if self.state is None:
            return sum(self.counts.values())
        return self.counts[self.state]


def check_finished_state(state: str | None) -> str | None:
    if state is not None and state not in FINISHED_STATES:
        raise InvalidArgument(
            f"state must be None or one of {', '.join(FINISHED_STATES)}, got {state!r}"
        )
    return state


def read_finished(
    q: Readable,
    state: str | None = None,
    offset: int = 0,
    limit: int = 50,
    *,
    errors: bool = True,
    live: bool = False,
) -> FinishedPage:
    """The jobs of ``q`` that ended in ``state`` (None: any), newest first, from ``offset``:
    two round trips. With ``errors``, the last error of dead and expired jobs is read too;
    with ``live``, the counts of the other states (in the first round trip). An offset
    past the end gives an empty page."""
    state = check_finished_state(state)
    if offset < 0 or not 1 <= limit <= MAX_FINISHED_LIMIT:
        raise InvalidArgument(f"offset must be >= 0 and limit in [1, {MAX_FINISHED_LIMIT}]")
    states = FINISHED_STATES if state is None else (state,)
    merged = len(states) > 1 or len(q.shards) > 1
    if merged and offset + limit > MAX_ENDED_MERGED:
        raise InvalidArgument(
            f"offset + limit must be at most {MAX_ENDED_MERGED} when several states or partitions "
            f"are listed (got offset={offset}, limit={limit}): list one state to go deeper"
        )
    shards = q.shards
    start = 0 if merged else offset
    with unavailable_as_error():
        timed = Timed(q.client, shards[0].keys.finished, transaction=len(shards) == 1)
        for s in shards:
            for name in FINISHED_STATES:
                timed.pipe.zcard(getattr(s.keys, _SET[name]))
        for s in shards:
            for name in states:
                key = getattr(s.keys, _SET[name])
                timed.pipe.zrevrange(key, start, offset + limit - 1, withscores=True)
        if live:
            queue_counts(timed.pipe, shards)
            queue_waiting(timed.pipe, shards)
        now_ms, replies = timed.execute()
    got = [int(x) for x in take(replies, len(FINISHED_STATES) * len(shards))]
    counts = {name: sum(got[i :: len(FINISHED_STATES)]) for i, name in enumerate(FINISHED_STATES)}
    entries: list[tuple[str, str, float, int]] = []  # (tag, state, ms, shard)
    for p in range(len(shards)):
        for name in states:
            entries += [(text(tag), name, float(sc), p) for tag, sc in next(replies)]
    other: dict[str, int] = {}
    if live:
        other = counts_of(replies, len(shards))
        other["waiting"] = waiting_of(replies, len(shards))
    if merged:
        rank = {name: i for i, name in enumerate(FINISHED_STATES)}
        # newest first; a tie by state, then shard, then tag (stable across reads)
        entries.sort(key=lambda e: (-e[2], rank[e[1]], e[3], e[0].encode("utf-8")))
        entries = entries[offset : offset + limit]
    return FinishedPage(
        state=state,
        counts=counts,
        jobs=_read_records(q, entries, errors),
        offset=offset,
        limit=limit,
        now_ms=now_ms,
        max_total=MAX_ENDED_MERGED if merged else None,
        live=other,
    )


def _read_records(
    q: Readable, entries: list[tuple[str, str, float, int]], errors: bool
) -> list[FinishedJob]:
    """One round trip: per shard, ``HMGET history`` of the succeeded and cancelled jobs,
    ``HMGET meta`` and ``HMGET body`` (bodies of the JSON layout) of the dead and expired
    ones, and with ``errors`` their ``HMGET errors``."""
    if not entries:
        return []
    wanted: dict[tuple[int, str], list[str]] = {}  # (shard, hash) -> tags
    for tag, name, _, p in entries:
        hashes = ("history",) if _RECORDS[name] == "history" else ("meta", "body")
        if errors and _RECORDS[name] == "meta":
            hashes = (*hashes, "errors")
        for h in hashes:
            tags = wanted.setdefault((p, h), [])
            if tag not in tags:
                tags.append(tag)
    with unavailable_as_error():
        pipe = q.client.pipeline(transaction=False)
        for (p, h), tags in wanted.items():
            pipe.hmget(getattr(q.shards[p].keys, h), tags)
        replies = iter(pipe.execute())
    found: dict[tuple[int, str, str], Any] = {}
    for (p, h), tags in wanted.items():
        for tag, value in zip(tags, next(replies), strict=True):
            found[(p, h, tag)] = value
    out = []
    for tag, name, ms, p in entries:
        kept = _RECORDS[name] == "history"
        raw = found.get((p, _RECORDS[name], tag))
        body = found.get((p, "body", tag))
        if raw:
            with contextlib.suppress(ValueError):  # an unreadable record: Record() below
                body = (split_kept(raw) if kept else split_record(raw))[1] or body
        error = found.get((p, "errors", tag))
        out.append(
            FinishedJob(
                tag=tag,
                state=name,
                ended_ms=ms,
                shard=p,
                record=Record.decode(raw, kept=kept),
                body=decode_json(body),
                error=last_error(error) if error else None,
            )
        )
    return out
