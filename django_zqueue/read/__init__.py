"""The read side of queues: every read of the dashboard, the operator commands and the
metrics, and the one place the stats hash and the workers hash are decoded (the job
record is decoded in :mod:`django_zqueue.engine.records`). It holds no Redis client and
knows no key: it asks the engine's read verbs (``engine.reads``,
:class:`~django_zqueue.engine.reads.Reads`) and decodes, merges and shapes what they
return.

Reads never write. Each works over a queue's shards alike: an unpartitioned queue is one
shard, and the figures of a partitioned queue are merged here (sums of counts and
counters, a merged minute ring, listings merged in global order: score, shard, tag).
Every read is a fixed, small number of pipelined round trips, none of which walks a
collection (no ``KEYS``, ``SCAN`` or unbounded command), but the search by arguments: it
walks a state in script calls of at most 1,000 jobs, within a time budget (:mod:`.search`).

- :class:`QueueReader` (``queue.read``): one queue's counts, counters, minutes, workers,
  pages of a state (:meth:`~QueueReader.listing`), one job (:meth:`~QueueReader.job`),
  dead letters; a page may also list the jobs waiting for their parents (workflows);
- :func:`read_finished` (``queue.read.finished()``): the jobs that ended (succeeded,
  dead, cancelled, expired), newest first, from the history of finished jobs and the
  dead and expired sets;
- :func:`overview`, :func:`locate`, :func:`schedules`: across queues, one pipeline per
  Redis client;
- :func:`group_figures` (``queue.read.groups()``): jobs ready and in flight and starts
  per group key, biggest groups first, bounded;
- :func:`read_links` (``queue.read.links``): a workflow job's parents and dependents;
- :func:`~.search.search` (``queue.read.search``): the jobs of a state whose arguments
  hold a text, in bounded steps with a cursor;
- :func:`~.tasknames.task_names` (``queue.read.task_names``): the task names the
  queued jobs call, with counts, over a bounded sample;
- :func:`scale_signals`, :func:`scale_document`: the autoscaling signal of queues (what
  is claimable now, the completion rate, the threads wanted for a target drain time);
- :mod:`.stats`: the stats hash and its 64-slot minute ring, worker registrations.
"""

from ..engine.reads import LISTED, STATES
from .finished import (
    FINISHED_STATES,
    MAX_ENDED_MERGED,
    FinishedJob,
    FinishedPage,
    read_finished,
)
from .groups import GroupFigures, GroupRow, group_figures
from .jobs import MAX_LIMIT, MAX_MERGED, JobReading, ListedJob, Listing, page_count
from .links import MAX_LINKED, JobLinks, LinkedJob, read_links
from .overview import Location, QueueFigures, locate, overview, valid_tag
from .reader import QueueReader
from .scale import ScaleSignal, scale_document, scale_signals
from .schedules import ScheduleRow, schedules
from .search import SearchMatch, SearchResult
from .stats import (
    SERIES,
    WORKER_WITHIN_MS,
    Minute,
    counters,
    decode_stats,
    eta_seconds,
    live_thread_count,
    live_threads_now,
    mean_run_ms,
    merge_stats,
    minute_rows,
    minutes,
    task_stat_slots,
)
from .tasknames import TaskNames, task_names

__all__ = [
    "FINISHED_STATES",
    "LISTED",
    "MAX_ENDED_MERGED",
    "MAX_LIMIT",
    "MAX_LINKED",
    "MAX_MERGED",
    "SERIES",
    "STATES",
    "WORKER_WITHIN_MS",
    "FinishedJob",
    "FinishedPage",
    "GroupFigures",
    "GroupRow",
    "JobLinks",
    "JobReading",
    "LinkedJob",
    "ListedJob",
    "Listing",
    "Location",
    "Minute",
    "QueueFigures",
    "QueueReader",
    "ScaleSignal",
    "ScheduleRow",
    "SearchMatch",
    "SearchResult",
    "TaskNames",
    "counters",
    "decode_stats",
    "eta_seconds",
    "group_figures",
    "live_thread_count",
    "live_threads_now",
    "locate",
    "mean_run_ms",
    "merge_stats",
    "minute_rows",
    "minutes",
    "overview",
    "page_count",
    "read_finished",
    "read_links",
    "scale_document",
    "scale_signals",
    "schedules",
    "task_names",
    "task_stat_slots",
    "valid_tag",
]
