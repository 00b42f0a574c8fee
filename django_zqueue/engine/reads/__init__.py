"""The engine's reads (``engine.reads``): every read of the dashboard, the operator
commands and the metrics, as named verbs with typed values. The read side
(:mod:`django_zqueue.read`) decodes, merges and shapes what they return; it holds no
client, sends no command and knows no key.

Each verb is a fixed, small number of pipelined round trips, none of which walks a
collection (no ``KEYS``, ``SCAN`` or unbounded command), but the search, one bounded
script call per step. One module per concern: :mod:`.pipeline` (pipelines that start
with ``TIME``, the shard-generic commands and merges), :mod:`.counts` (one queue's
counts, counters and registrations), :mod:`.jobs` (a page of a state, one job),
:mod:`.finished` (the jobs that ended), :mod:`.links` (a workflow job's links),
:mod:`.groups` (the per-group figures), :mod:`.across` (reads across queues, one
pipeline per Redis client).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..records import JobInfo
from ..records.links import Ref
from ..scripts import SearchStep
from . import across, counts, finished, groups, jobs, links
from .across import Place, QueueSnapshot, QueueWorkers, ScheduleReading, WorkersRead
from .counts import MinuteReading
from .finished import FINISHED_STATES, Ended, EndedHashes, EndedRange
from .groups import GroupSample
from .jobs import JobFigures, JobHashes, StateRange
from .pipeline import LISTED, SET_OF, STATES, Entry, Hash, check_state

if TYPE_CHECKING:
    from ..flow import Flow

__all__ = [
    "FINISHED_STATES",
    "LISTED",
    "SET_OF",
    "STATES",
    "Ended",
    "EndedHashes",
    "EndedRange",
    "Entry",
    "GroupSample",
    "Hash",
    "JobFigures",
    "JobHashes",
    "MinuteReading",
    "Place",
    "QueueSnapshot",
    "QueueWorkers",
    "Reads",
    "ScheduleReading",
    "StateRange",
    "WorkersRead",
    "check_state",
]


class Reads:
    """The read verbs of one queue's engine (``engine.reads``); across queues, the verbs
    take the ``Reads`` of each (queues of several Redis clients are read one pipeline per
    client). Connection errors become ``QueueUnavailable``."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Flow) -> None:
        self._engine = engine

    @property
    def name(self) -> str:
        return self._engine.name

    @property
    def partitions(self) -> int:
        """How many shards (hash tags) the queue's jobs are spread over."""
        return len(self._engine.shards)

    # ---------------------------------------------------------------- counts, counters

    def ready_count(self) -> int:
        return counts.ready_count(self._engine)

    def state_counts(self) -> dict[str, int]:
        """Jobs per state (ready, delayed, leased, dead), summed over the shards."""
        return counts.state_counts(self._engine)

    def waiting_count(self) -> int:
        return counts.waiting_count(self._engine)

    def stats_hashes(self) -> list[Hash]:
        """Each shard's stats hash, as stored."""
        return counts.stats_hashes(self._engine)

    def minute_reading(self) -> MinuteReading:
        return counts.minute_reading(self._engine)

    def workers_hash(self) -> Hash:
        return counts.workers_hash(self._engine)

    def task_stat_slots(self, first: int, last: int) -> list[Hash]:
        return counts.task_stat_slots(self._engine, first, last)

    # ---------------------------------------------------------------- jobs

    def state_page(self, state: str, offset: int, limit: int) -> list[Entry]:
        return counts.state_page(self._engine, state, offset, limit)

    def infos(self, entries: Sequence[tuple[str, int]], *, with_body: bool = True) -> list[JobInfo]:
        return counts.infos(self._engine, entries, with_body=with_body)

    def state_range(self, state: str, offset: int, limit: int, *, ended: bool = True) -> StateRange:
        return jobs.state_range(self._engine, state, offset, limit, ended=ended)

    def job_hashes(self, state: str, entries: list[Entry], errors: bool) -> list[JobHashes]:
        return jobs.job_hashes(self._engine, state, entries, errors)

    def info(self, tag: str, *, with_body: bool = True, ranked: bool = True) -> JobInfo | None:
        """One job's info (None: no such job); its rank in the whole queue with
        ``ranked``, else in its shard."""
        return jobs.ranked_info(self._engine, tag, with_body=with_body, ranked=ranked)

    def job_figures(self, info: JobInfo) -> JobFigures:
        return jobs.job_figures(self._engine, info)

    def search_step(
        self,
        shard: int,
        set_name: str,
        needle: bytes,
        after: tuple[str, str] | None,
        steps: int,
        limit: int,
    ) -> SearchStep:
        """One ``search.lua`` call on shard ``shard``: at most ``steps`` jobs of its set
        ``set_name`` looked at after the cursor ``after``, at most ``limit`` matches."""
        e = self._engine
        return e.run(e.shards[shard].search(set_name, needle, after, steps, limit))

    # ---------------------------------------------------------------- ended jobs

    def ended_range(
        self, states: Sequence[str], start: int, stop: int, *, live: bool = False
    ) -> EndedRange:
        return finished.ended_range(self._engine, states, start, stop, live=live)

    def ended_hashes(self, entries: Sequence[Ended], errors: bool) -> list[EndedHashes]:
        return finished.ended_hashes(self._engine, entries, errors)

    # ---------------------------------------------------------------- links, groups

    def links_hash(self, tag: str) -> Hash:
        return links.links_hash(self._engine, tag)

    def progress_fields(self, tag: str) -> list[Any]:
        return links.progress_fields(self._engine, tag)

    def link_states(self, refs: Sequence[Ref]) -> list[str | None]:
        return links.link_states(self._engine, refs)

    def group_sample(self, sample: int) -> GroupSample:
        return groups.group_sample(self._engine, sample)

    def group_starts(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        return groups.group_starts(self._engine, names)

    # ---------------------------------------------------------------- across queues

    @staticmethod
    def figures(queues: Sequence[Reads]) -> list[QueueSnapshot]:
        return across.figures([r._engine for r in queues])

    @staticmethod
    def places(queues: Sequence[Reads], tag: str) -> list[Place]:
        return across.places([r._engine for r in queues], tag)

    @staticmethod
    def schedules(queues: Sequence[Reads]) -> list[ScheduleReading]:
        return across.schedule_reads([r._engine for r in queues])

    @staticmethod
    def workers(queues: Sequence[Reads], most: int) -> WorkersRead:
        return across.workers_reads([r._engine for r in queues], most)
