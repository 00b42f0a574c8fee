"""The jobs that ended, newest first: the history of finished jobs and the dead letters.

A job ends in one of four states, each a sorted set of every shard (id -> ms it ended):
``succeeded`` and ``cancelled`` (their records kept in the history of finished jobs, by
``keep_finished``), ``dead`` and ``expired`` (their records and last errors kept where
they were; :mod:`django_zqueue.engine.reads.finished` names the sets and hashes).

A page is two round trips whatever the sets hold: Redis time, the four counts and the
range of the sets listed, per shard; then the records of the page's jobs only. One
state on one shard is a range from ``offset`` (any depth); several states
(``state=None``), or a partitioned queue, read each set's first ``offset + limit``
entries and merge them, newest first, so ``offset + limit`` is at most
``MAX_ENDED_MERGED`` (2,000) there: the merge reads and sorts that many entries of each
set (four sets of 10,000 took 120 ms with the page's rendering; 2,000, about 35 ms).
No ``KEYS``, ``SCAN`` or walk of a set.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engine.reads import FINISHED_STATES as FINISHED_STATES
from ..engine.reads import Ended, EndedHashes
from ..engine.records import JobInfo, Record, decode_json, from_ms
from ..engine.records.attempts import last_error
from ..engine.records.codec import split_kept, split_record
from ..exceptions import InvalidArgument

if TYPE_CHECKING:
    from .source import Readable

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


def check_page(state: str | None, offset: int, limit: int, shards: int) -> bool:
    """Check a page's arguments (``InvalidArgument``); whether it is merged (several
    states, or partitions), and then ``offset + limit`` is at most ``MAX_ENDED_MERGED``."""
    check_finished_state(state)
    if offset < 0 or not 1 <= limit <= MAX_FINISHED_LIMIT:
        raise InvalidArgument(f"offset must be >= 0 and limit in [1, {MAX_FINISHED_LIMIT}]")
    merged = state is None or shards > 1
    if merged and offset + limit > MAX_ENDED_MERGED:
        raise InvalidArgument(
            f"offset + limit must be at most {MAX_ENDED_MERGED} when several states or partitions "
            f"are listed (got offset={offset}, limit={limit}): list one state to go deeper"
        )
    return merged


def newest_first(entries: list[Ended], offset: int, limit: int) -> list[Ended]:
    """The page of ``entries`` (several sets' newest, read from 0) from ``offset``, newest
    first; a tie by state, then shard, then tag (stable across reads)."""
    rank = {name: i for i, name in enumerate(FINISHED_STATES)}
    entries = sorted(entries, key=lambda e: (-e[2], rank[e[1]], e[3], e[0].encode("utf-8")))
    return entries[offset : offset + limit]


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
    merged = check_page(state, offset, limit, q.reads.partitions)
    states = FINISHED_STATES if state is None else (state,)
    start = 0 if merged else offset
    got = q.reads.ended_range(states, start, offset + limit - 1, live=live)
    entries = newest_first(got.entries, offset, limit) if merged else got.entries
    found = q.reads.ended_hashes(entries, errors)
    return FinishedPage(
        state=state,
        counts=got.counts,
        jobs=[finished_job(e, h) for e, h in zip(entries, found, strict=True)],
        offset=offset,
        limit=limit,
        now_ms=got.now_ms,
        max_total=MAX_ENDED_MERGED if merged else None,
        live=got.live,
    )


def finished_job(entry: Ended, found: EndedHashes) -> FinishedJob:
    """One listed job that ended, from what its hashes hold."""
    tag, name, ms, p = entry
    raw, body = found.record, found.body
    if raw:
        with contextlib.suppress(ValueError):  # an unreadable record: Record() below
            body = (split_kept(raw) if found.kept else split_record(raw))[1] or body
    return FinishedJob(
        tag=tag,
        state=name,
        ended_ms=ms,
        shard=p,
        record=Record.decode(raw, kept=found.kept),
        body=decode_json(body),
        error=last_error(found.error) if found.error else None,
    )
