"""``queue.read``: the reads of one queue, over its shards alike."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from ..engine.joblogs import JobLog
from ..engine.reads import Entry, check_state
from ..engine.records import JobInfo, validate
from ..engine.rollup import RINGS as ROLL_RINGS
from ..exceptions import InvalidArgument
from .finished import FinishedPage, read_finished
from .finished_filter import FilteredFinished, FinishedFilter, read_finished_filtered
from .groups import GroupFigures, group_figures
from .jobs import MAX_MERGED, JobReading, Listing, read_job, read_listing
from .links import JobLinks, Progress, read_links, read_progress
from .search import SearchResult, search
from .stats import (
    Minute,
    buckets,
    counters,
    decode_stats,
    live_thread_count,
    local_ms,
    merge_stats,
    minute_rows,
)
from .tasknames import TaskNames, task_names

if TYPE_CHECKING:
    from .source import Readable


class QueueReader:
    """Reads of one queue (``queue.read``); one round trip per method unless it says."""

    def __init__(self, queue: Readable) -> None:
        self.queue = queue

    def total_count(self) -> int:
        """Jobs waiting in line (ready)."""
        return self.queue.reads.ready_count()

    def counts(self) -> dict[str, int]:
        """Jobs per state: ``ready``, ``delayed``, ``inflight``, ``dead`` (one snapshot of
        one shard; on a partitioned queue, the sums of one read of each partition)."""
        got = self.queue.reads.state_counts()
        got["inflight"] = got.pop("leased")
        return {name: got[name] for name in ("ready", "delayed", "inflight", "dead")}

    def stats_fields(self) -> dict[str, int]:
        """The decoded stats hash, merged over the shards (:func:`merge_stats`)."""
        return merge_stats([decode_stats(raw) for raw in self.queue.reads.stats_hashes()])

    def stats(self) -> dict[str, int]:
        """Lifetime counters: enqueued, claimed, acked, failed, retried, dead, expired, ..."""
        return counters(self.stats_fields())

    def minutes(self, last: int = 60) -> list[dict[str, int]]:
        """See :meth:`Queue.minutes <django_zqueue.queue.Queue.minutes>`."""
        if not 1 <= last <= 63:
            raise InvalidArgument("last must be in [1, 63]")
        got = self.queue.reads.minute_reading()
        fields = merge_stats([decode_stats(raw) for raw in got.stats])
        return minute_rows(fields, got.now_ms // 60000, last, got.ready)

    def buckets(self, size: int, last: int) -> list[Minute]:
        """The last ``last`` buckets of ``size`` minutes (10: up to 150, 60: up to 170),
        oldest first, from the roll-up rings the scanner writes (:func:`buckets`): one
        round trip. A bucket no roll-up wrote is a gap (``live`` False)."""
        if size not in ROLL_RINGS or not 1 <= last <= ROLL_RINGS[size]:
            raise InvalidArgument("size must be 10 or 60 and last within its ring")
        got = self.queue.reads.minute_reading(size)
        fields = merge_stats([decode_stats(raw) for raw in got.stats], ROLL_RINGS[size])
        return buckets(fields, got.now_ms, size, last, got.ready)

    def live_threads(self, within: float = 30.0) -> int:
        """Worker threads serving this queue, as registered by workers seen in the last
        ``within`` seconds."""
        raw = self.queue.reads.workers_hash()
        return live_thread_count(raw, local_ms() - within * 1000)

    def page(self, state: str, offset: int, limit: int) -> list[Entry]:
        """One page of a state's sorted set over all shards, in global order:
        ``(tag, score, shard index)``. Ready, delayed, leased ascend by (score, shard,
        tag); dead descends (most recent first). Reads ``offset + limit`` entries of each
        shard, so ``offset + limit`` must be at most ``MAX_MERGED`` on a partitioned
        queue."""
        n = self.queue.reads.partitions
        if offset < 0 or limit < 1 or (n > 1 and offset + limit > MAX_MERGED):
            raise InvalidArgument(
                f"offset + limit must be at most {MAX_MERGED} on a partitioned queue "
                f"(got offset={offset}, limit={limit})"
            )
        return self.queue.reads.state_page(check_state(state), offset, limit)

    def infos(self, entries: Sequence[tuple[str, int]], *, with_body: bool = True) -> list[JobInfo]:
        """:class:`JobInfo` of ``(tag, shard index)`` pairs, in one round trip; jobs gone
        in the meantime are left out."""
        return self.queue.reads.infos(entries, with_body=with_body)

    def dead_letters(self, offset: int = 0, limit: int = 50) -> list[JobInfo]:
        """Dead jobs, most recent first, with their last error (one page). Two round
        trips."""
        if offset < 0 or not 1 <= limit <= 1000:
            raise InvalidArgument("offset must be >= 0 and limit in [1, 1000]")
        page = self.page("dead", offset, limit)
        return self.infos([(tag, p) for tag, _, p in page])

    def finished(
        self,
        state: str | None = None,
        offset: int = 0,
        limit: int = 50,
        *,
        errors: bool = True,
        live: bool = False,
    ) -> FinishedPage:
        """A page of the jobs that ended (succeeded, dead, cancelled, expired; ``state``
        None: all), newest first, with the counts of each (:func:`~.finished.read_finished`;
        ``live``: the other states' counts too). Two round trips."""
        return read_finished(self.queue, state, offset, limit, errors=errors, live=live)

    def finished_matching(
        self, flt: FinishedFilter, state: str | None = None, limit: int = 50, offset: int = 0
    ) -> FilteredFinished:
        """The jobs that ended that ``flt`` keeps (task, error, arguments, time range),
        newest first, walked from the ``offset``-th ended job in bounded pages
        (:func:`~.finished_filter.read_finished_filtered`)."""
        return read_finished_filtered(self.queue, flt, state, limit, offset)

    def info(self, tag: str, *, with_body: bool = True) -> JobInfo | None:
        """Everything known about one job, its rank in the whole queue (see
        :meth:`Queue.info <django_zqueue.queue.Queue.info>`)."""
        return self.queue.reads.info(tag, with_body=with_body)

    def job(self, tag: str) -> JobReading | None:
        """One job with its body, and the figures of its ETA (:func:`~.jobs.read_job`).
        Two round trips."""
        return read_job(self.queue, tag)

    def groups(self, top: int = 20, sample: int = 1000) -> GroupFigures:
        """Per-group counts, biggest groups first (:func:`~.groups.group_figures`)."""
        return group_figures(self.queue, top, sample)

    def links(self, tag: str, offset: int = 0, limit: int = 50) -> JobLinks | None:
        """A workflow job's parents and dependents with their states, a page of each
        (:func:`~.links.read_links`); None when it has none. Two round trips."""
        return read_links(self.queue, tag, offset, limit)

    def progress(self, tag: str) -> Progress | None:
        """How many parents a workflow job waits for (``need``) and how many are in
        (``got``): for a batch's ``on_complete``, the members that ended
        (``any_end``); None when it has no links (gone, or acked). One round trip."""
        return read_progress(self.queue, tag)

    def waiting_count(self) -> int:
        """Jobs waiting for their parents (workflows), over all shards."""
        return self.queue.reads.waiting_count()

    def listing(
        self, state: str, number: int = 1, per_page: int = 50, *, errors: bool = False
    ) -> Listing:
        """A page of a state's jobs with their records (:func:`~.jobs.read_listing`).
        Two round trips (three past the end)."""
        return read_listing(self.queue, state, number, per_page, errors=errors)

    def log(self, tag: str) -> JobLog:
        """The lines job ``tag`` said while it ran, per attempt (``current_job().log``
        and, with ``JOB_LOGS["LEVEL"]``, the ``logging`` records of its runs), oldest
        first, and how many of the oldest were dropped past the cap. One round trip."""
        return self.queue.joblogs.read(validate.tag(tag))

    def chunk_members(self, tag: str) -> list[str] | None:
        """The tags of the jobs a chunk task's handler ran (or runs) in one call with job
        ``tag``, its latest call (``tag`` among them, in the call's order); None when no
        call is recorded (not a chunk task's job, not run yet, or expired). Two round
        trips."""
        return self.queue.chunkcalls.members(validate.tag(tag))

    def task_names(self, sample: int = 1000, skip: Collection[str] = ()) -> TaskNames:
        """The task names the first ``sample`` ready and delayed jobs call, with counts
        (:func:`~.tasknames.task_names`). Four round trips."""
        return task_names(self.queue, sample, skip)

    def search(
        self, text: str, state: str = "ready", limit: int = 50, cursor: str | None = None
    ) -> SearchResult:
        """The jobs of ``state`` (the finished ``succeeded``, ``cancelled``, ``expired``
        too) whose arguments (body), task name or id hold ``text``, case-sensitive,
        whatever JSON's spacing, or match its field form (``user_id:4242``), walked in
        bounded steps from ``cursor``
        (:func:`~.search.search`): at most 1,000 jobs per step, 1,000 steps or about one
        second per call; ``result.cursor`` continues."""
        return search(self.queue, text, state, limit, cursor)
