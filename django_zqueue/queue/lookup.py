"""Looking up one job: its rank, score, state, record and kept result; and the queue's
counters and listings, read through :mod:`django_zqueue.read` (``queue.read``)."""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from typing import Any

from ..engine.reads.lookup import decode_result
from ..engine.records import JobInfo, validate
from ..exceptions import InvalidArgument
from ..read import QueueReader
from ..read.finished_filter import FinishedFilter
from .base import QueueBase

__all__ = ["Lookup", "decode_result"]


class Lookup(QueueBase):
    """The read side of a queue."""

    @cached_property
    def read(self) -> QueueReader:
        """Reads of many jobs and of the counters (:class:`~django_zqueue.read.QueueReader`)."""
        return QueueReader(self.engine)

    def rank(self, tag: str, *, within_key: bool = False) -> int | None:
        """Position in line: 0 = claimed next. None unless the job is ready.

        On a partitioned queue, the exact position in the global order (score, then
        partition, then tag): the job's rank in its partition plus, in every other
        partition, the jobs with a lower score, and those with an equal score in a
        lower-numbered partition. Two round trips, O(partitions · log N).

        ``within_key=True``: the job's place among the waiting jobs of its own ordering
        key, in the order they will run (set-aside jobs included; docs/job-control.md,
        "Strict order per key"); None unless it waits; ``InvalidArgument`` for a job
        without an ordering key, ``LookupError`` when unknown (:meth:`Ordering.rank
        <django_zqueue.engine.order.Ordering.rank>`)."""
        if within_key:
            return self.engine.order.rank(tag)
        return self.engine.reads.rank(validate.tag(tag))

    def score(self, tag: str) -> float | None:
        """The job's ready score (lower = sooner). None unless the job is ready."""
        return self.engine.reads.score(validate.tag(tag))

    def state(self, tag: str) -> str | None:
        """``"ready"``, ``"delayed"``, ``"leased"``, ``"dead"``, or None (no such job)."""
        return self.engine.reads.state(validate.tag(tag))

    def exists(self, tag: str) -> bool:
        """True while the job is ready, delayed, waiting for its parents (a workflow) or in
        flight (dead letters excluded)."""
        return self.state(tag) in ("ready", "delayed", "waiting", "leased")

    def info(self, tag: str, *, with_body: bool = True) -> JobInfo | None:
        """Everything known about one job, read atomically; None if there is no such job.
        After the end, a job kept in the history of finished jobs answers too (state
        ``succeeded`` with its kept result, or ``cancelled``: :meth:`finished`)."""
        return self.engine.reads.info(tag, with_body=with_body)

    def result(self, tag: str) -> Any:
        """The result kept by ``ack(msg, result=...)``; raises ``LookupError`` when none is
        kept (never stored, or expired)."""
        return self.engine.reads.result(validate.tag(tag))

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

    def finished(
        self,
        limit: int = 50,
        offset: int = 0,
        state: str | None = None,
        *,
        task: str = "",
        error: str = "",
        text: str = "",
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[JobInfo]:
        """Jobs that ended, newest first (one page): ``succeeded`` and ``cancelled`` ones
        kept in the history of finished jobs (options ``keep_finished``,
        ``finished_ttl``), ``dead`` letters and ``expired`` jobs; ``state`` lists one of
        them (None: all four, merged: then ``offset + limit`` is at most 2,000). Each is
        a :class:`JobInfo` with its record and body (no kept result: :meth:`info` reads
        it), dead and expired ones with their last error. Two round trips.

        Filtered by ``task`` (a substring of the task name), ``error`` (of the last
        error), ``text`` (the arguments, as ``read.search`` reads them: ``"user_id":
        4242`` whatever the spacing, or ``user_id:4242``) and when the job ended
        (``since``/``until``, aware datetimes, inclusive): the ``limit`` newest matches
        among the jobs walked from the ``offset``-th ended one, in pages of 200, for
        about a second (``queue.read.finished_matching`` says how far it went)."""
        flt = FinishedFilter(task, error, text, _ms(since, "since"), _ms(until, "until"))
        if flt.active:
            found = self.read.finished_matching(flt, state, limit, offset)
            return [job.info(self.name) for job in found.jobs]
        page = self.read.finished(state, offset, limit)
        return [job.info(self.name) for job in page.jobs if not job.gone]


def _ms(when: datetime | None, what: str) -> float | None:
    """``when`` as ms since the epoch; InvalidArgument for a naive datetime."""
    if when is None:
        return None
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise InvalidArgument(f"{what} must be an aware datetime, got {when!r}")
    return when.timestamp() * 1000
