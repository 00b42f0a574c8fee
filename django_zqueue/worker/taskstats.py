"""Per-task statistics over the last hour: runs, failures, retries and run-time
percentiles per task name, with bounded memory in Redis.

Workers add what they finished to the pipeline that already carries their acks and nacks
(:func:`add_to`: no extra round trip), into one hash per queue and 5-minute slot,
``{p:q}:tstats:<slot>``, which expires after :data:`KEEP_SECONDS`. Each hash holds, per
task name, ``<task>|n`` runs acked, ``<task>|f`` failures, ``<task>|r`` failures that will
be retried, ``<task>|s`` the sum of run times (ms), and ``<task>|b<i>`` a histogram of run
times over the fixed :data:`BOUNDS_MS`. Memory: at most 13 live slots per queue, each
``21 x task names`` fields. The admin reads the last hour (:func:`read`): 13 ``HGETALL`` in
one round trip. Slots follow the workers' clocks (as the workers hash does).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..engine.keys import TASK_STATS_SLOT_SECONDS
from ..engine.records import text
from ..read import task_stat_slots
from .outcome import Outcome, ParkedRun, Released, Success

if TYPE_CHECKING:
    from ..engine.records import Message
    from ..engine.scripts import Batch
    from ..queue import Queue

SLOT_SECONDS = TASK_STATS_SLOT_SECONDS
#: slots read for "the last hour": the current one and the twelve before it
SLOTS = 13
KEEP_SECONDS = SLOTS * SLOT_SECONDS
#: upper bounds (ms) of the run-time histogram's buckets; the last bucket is unbounded
BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000, 300_000)
#: the task name of a job whose body names none (a raw queue job)
RAW = "(raw job)"


def slot_now() -> int:
    return int(time.time()) // SLOT_SECONDS


def task_of(body: Any) -> str:
    """The task name of a body (``{"task": name, ...}``), else :data:`RAW`."""
    if isinstance(body, dict) and isinstance(body.get("task"), str):
        return str(body["task"])[:200]
    return RAW


def bucket(run_ms: int) -> int:
    return bisect.bisect_left(BOUNDS_MS, run_ms)


class Done(Protocol):
    """A finished job as a worker holds it before its ack or nack is sent."""

    @property
    def queue(self) -> Queue: ...
    @property
    def message(self) -> Message: ...
    @property
    def outcome(self) -> Outcome: ...


#: the fields of a task's counters in :func:`add_to`, in order: runs, run ms, failures,
#: retries, then the histogram's buckets
_FIELDS = ("n", "s", "f", "r", *(f"b{i}" for i in range(len(BOUNDS_MS) + 1)))


def add_to(batch: Batch, done: Iterable[Done]) -> None:
    """Queue in ``batch`` the counts of the finished jobs ``done``: a few ``HINCRBY`` per
    queue and task name, and one ``EXPIRE`` per queue, whatever the number of jobs.

    Summed in lists of counters first (the field names are made once per task and flush,
    not per job: this runs for every job a worker finishes)."""
    per_queue: dict[str, tuple[Queue, dict[str, list[int]]]] = {}
    for d in done:
        msg, out, q = d.message, d.outcome, d.queue
        if isinstance(out, Released | ParkedRun):  # given back unrun, or parked: not sent
            continue
        entry = per_queue.get(q.name)
        if entry is None:
            entry = per_queue[q.name] = (q, {})
        task = task_of(msg.body)
        c = entry[1].get(task)
        if c is None:
            c = entry[1][task] = [0] * len(_FIELDS)
        if isinstance(out, Success):
            c[0] += 1
            c[1] += out.run_ms
            c[4 + bisect.bisect_left(BOUNDS_MS, out.run_ms)] += 1
        else:
            c[2] += 1
            if not out.dead and msg.attempt <= msg.max_retries:
                c[3] += 1
    slot = slot_now()
    for q, tasks in per_queue.values():
        counts = {
            f"{task}|{_FIELDS[i]}": n
            for task, c in tasks.items()
            for i, n in enumerate(c)
            # the fields a job touched: a run's run ms even when 0, the others when > 0
            if n or (i == 1 and c[0])
        }
        q.engine.stats.add_task_stats(batch, slot, counts, KEEP_SECONDS)


@dataclass(frozen=True, slots=True)
class TaskStat:
    """One task's last hour."""

    task: str
    runs: int  # acked
    failures: int
    retries: int  # failures retried
    run_ms_total: int
    histogram: tuple[int, ...]  # runs per bucket of BOUNDS_MS (+ the unbounded one)

    @property
    def mean_ms(self) -> float | None:
        return self.run_ms_total / self.runs if self.runs else None

    def percentile_ms(self, p: float) -> int | None:
        """The upper bound of the bucket holding the ``p``-th percentile run (ms); None
        without runs, -1 when it is beyond the last bound."""
        total = sum(self.histogram)
        if not total:
            return None
        rank, seen = p / 100 * total, 0
        for i, n in enumerate(self.histogram):
            seen += n
            if seen >= rank and n:
                return BOUNDS_MS[i] if i < len(BOUNDS_MS) else -1
        return -1  # pragma: no cover - the loop always reaches the total


def merge(slots: Sequence[dict[Any, Any]]) -> list[TaskStat]:
    """The tasks of several slots' hashes, summed; busiest first."""
    sums: dict[str, dict[str, int]] = {}
    for raw in slots:
        for field, value in raw.items():
            task, _, name = text(field).rpartition("|")
            try:
                n = int(value)
            except ValueError:
                continue
            per = sums.setdefault(task, {})
            per[name] = per.get(name, 0) + n
    out = [
        TaskStat(
            task=task,
            runs=v.get("n", 0),
            failures=v.get("f", 0),
            retries=v.get("r", 0),
            run_ms_total=v.get("s", 0),
            histogram=tuple(v.get(f"b{i}", 0) for i in range(len(BOUNDS_MS) + 1)),
        )
        for task, v in sums.items()
        if task
    ]
    return sorted(out, key=lambda t: (-(t.runs + t.failures), t.task))


def read(q: Queue) -> list[TaskStat]:
    """The last hour of ``q``'s tasks: one round trip of :data:`SLOTS` ``HGETALL``."""
    now = slot_now()
    return merge(task_stat_slots(q.engine, now - SLOTS + 1, now))
