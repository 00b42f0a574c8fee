"""The engine's reads (``engine.reads``): every read of the dashboard, the operator
commands and the metrics, as named verbs with typed values. The read side
(:mod:`django_zqueue.read`) decodes, merges and shapes what they return; it holds no
client, sends no command and knows no key.

Each verb is a fixed, small number of pipelined round trips, none of which walks a
collection (no ``KEYS``, ``SCAN`` or unbounded command), but the search, one bounded
script call per step. One module per concern: :mod:`.pipeline` (pipelines that start
with ``TIME``, the shard-generic commands and merges), :mod:`.counts` (one queue's
counts, counters and registrations), :mod:`.jobs` (a page of a state, one job),
:mod:`.lookup` (one job by its tag),
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
from . import across, counts, finished, groups, jobs, links, lookup
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
        """The queue's name."""
        return self._engine.name

    @property
    def partitions(self) -> int:
        """How many shards (hash tags) the queue's jobs are spread over."""
        return len(self._engine._shards)

    # ---------------------------------------------------------------- counts, counters

    def ready_count(self) -> int:
        """Jobs ready, over all shards."""
        return counts.ready_count(self._engine)

    def state_counts(self) -> dict[str, int]:
        """Jobs per state (ready, delayed, leased, dead), summed over the shards."""
        return counts.state_counts(self._engine)

    def waiting_count(self) -> int:
        """Jobs waiting for their parents (workflows), over all shards."""
        return counts.waiting_count(self._engine)

    def stats_hashes(self) -> list[Hash]:
        """Each shard's stats hash, as stored."""
        return counts.stats_hashes(self._engine)

    def minute_reading(self, roll: int | None = None) -> MinuteReading:
        """Redis time, each shard's stats hash (with ``roll``: its roll-up ring of that
        many minutes a bucket) and the jobs ready now."""
        return counts.minute_reading(self._engine, roll)

    def workers_hash(self) -> Hash:
        """The queue's workers hash, as stored (worker id -> its registration)."""
        return counts.workers_hash(self._engine)

    def task_stat_slots(self, first: int, last: int) -> list[Hash]:
        """The per-task statistics hashes of slots ``first`` to ``last``, as stored."""
        return counts.task_stat_slots(self._engine, first, last)

    # ---------------------------------------------------------------- jobs

    def state_page(self, state: str, offset: int, limit: int) -> list[Entry]:
        """A page of a state's set over all shards, in global order."""
        return counts.state_page(self._engine, state, offset, limit)

    def infos(self, entries: Sequence[tuple[str, int]], *, with_body: bool = True) -> list[JobInfo]:
        """The info of ``(tag, shard index)`` pairs, in one round trip (gone ones left out)."""
        return counts.infos(self._engine, entries, with_body=with_body)

    def state_range(self, state: str, offset: int, limit: int, *, ended: bool = True) -> StateRange:
        """A page of a state with the queue's counts, in one round trip."""
        return jobs.state_range(self._engine, state, offset, limit, ended=ended)

    def job_hashes(self, state: str, entries: list[Entry], errors: bool) -> list[JobHashes]:
        """What the hashes hold of each listed job, in the order of ``entries``."""
        return jobs.job_hashes(self._engine, state, entries, errors)

    def info(self, tag: str, *, with_body: bool = True, ranked: bool = True) -> JobInfo | None:
        """One job's info (None: no such job); its rank in the whole queue with
        ``ranked``, else in its shard."""
        return jobs.ranked_info(self._engine, tag, with_body=with_body, ranked=ranked)

    def rank(self, tag: str) -> int | None:
        """Job ``tag``'s position in the whole queue's line (None: not ready)."""
        return lookup.rank(self._engine, tag)

    def score(self, tag: str) -> float | None:
        """Job ``tag``'s ready score (None: not ready)."""
        return lookup.score(self._engine, tag)

    def state(self, tag: str) -> str | None:
        """Job ``tag``'s state: ready, delayed, waiting, leased, dead (None: no such job)."""
        return lookup.state(self._engine, tag)

    def result(self, tag: str) -> Any:
        """The result kept for job ``tag`` (``LookupError``: none; ``CorruptResult``:
        not JSON)."""
        return lookup.result(self._engine, tag)

    def job_figures(self, info: JobInfo) -> JobFigures:
        """What ``info``'s ETA needs: Redis time, run-time counters, workers, jobs ahead."""
        return jobs.job_figures(self._engine, info)

    def search_step(
        self,
        shard: int,
        set_name: str,
        needle: bytes,
        after: tuple[str, str] | None,
        steps: int,
        limit: int,
        *,
        pattern: bool = False,
        field: tuple[str, str] | None = None,
    ) -> SearchStep:
        """One ``search.lua`` call on shard ``shard``: at most ``steps`` jobs of its set
        ``set_name`` looked at after the cursor ``after``, at most ``limit`` matches;
        ``needle`` a Lua pattern with ``pattern``, ``field`` a (path, value) that also
        matches (:meth:`Shard.search <django_zqueue.engine.shard.Shard.search>`)."""
        e = self._engine
        call = e._shards[shard].search(
            set_name, needle, after, steps, limit, pattern=pattern, field=field
        )
        return e.run(call)

    # ---------------------------------------------------------------- ended jobs

    def ended_range(
        self, states: Sequence[str], start: int, stop: int, *, live: bool = False
    ) -> EndedRange:
        """Redis time, the ended states' counts and each shard's range of ``states``."""
        return finished.ended_range(self._engine, states, start, stop, live=live)

    def ended_hashes(self, entries: Sequence[Ended], errors: bool) -> list[EndedHashes]:
        """What the hashes hold of each ended job, in the order of ``entries``."""
        return finished.ended_hashes(self._engine, entries, errors)

    # ---------------------------------------------------------------- links, groups

    def links_hash(self, tag: str) -> Hash:
        """Job ``tag``'s links hash, as stored ({}: none)."""
        return links.links_hash(self._engine, tag)

    def progress_fields(self, tag: str) -> list[Any]:
        """``need``, ``got`` and ``opt`` of job ``tag``'s links, as stored."""
        return links.progress_fields(self._engine, tag)

    def link_states(self, refs: Sequence[Ref]) -> list[str | None]:
        """The state of each linked job (None: in no set: finished, or deleted)."""
        return links.link_states(self._engine, refs)

    def group_sample(self, sample: int) -> GroupSample:
        """The records of the first ``sample`` jobs ready and in flight of each shard."""
        return groups.group_sample(self._engine, sample)

    def group_starts(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(this minute, the minute before) starts of each group, by Redis time."""
        return groups.group_starts(self._engine, names)

    # ---------------------------------------------------------------- across queues

    @staticmethod
    def figures(queues: Sequence[Reads]) -> list[QueueSnapshot]:
        """Each queue's figures (counts, stats, head, workers, pause), in order."""
        return across.figures([r._engine for r in queues])

    @staticmethod
    def places(queues: Sequence[Reads], tag: str) -> list[Place]:
        """Where job ``tag`` is, in each queue that has it."""
        return across.places([r._engine for r in queues], tag)

    @staticmethod
    def schedules(queues: Sequence[Reads]) -> list[ScheduleReading]:
        """The periodic schedules of the queues that have any."""
        return across.schedule_reads([r._engine for r in queues])

    @staticmethod
    def workers(queues: Sequence[Reads], most: int) -> WorkersRead:
        """The workers hashes and the jobs in flight (``most`` per shard) of the queues."""
        return across.workers_reads([r._engine for r in queues], most)
