"""Worker recycling (``zqueue_worker --max-jobs-per-child N --max-memory MB``): a worker
process past its budget stops as on SIGTERM (no more claims, the jobs it prefetched
given back to their old places, the running ones finished within ``--grace``) and exits
with :data:`RECYCLE_EXIT`; the parent of ``--processes`` starts a fresh one in its place
(:mod:`.processes`). Celery's ``max_tasks_per_child`` / ``max_memory_per_child``.

The jobs budget has jitter (up to +10 %, at least one job), so children started together
do not all recycle at once. The memory is the process's resident set (``/proc/self/statm``
on Linux, else the peak from ``getrusage``), looked at after each job: a process whose
jobs leak is replaced after the job that took it past the limit, and one that starts past
it still runs a job before it goes (no restart loop).
"""

from __future__ import annotations

import os
import random
import resource
import sys
import threading
from dataclasses import dataclass

from ..events import kv, log

#: the exit status of a recycled worker: the parent starts another (EX_TEMPFAIL)
RECYCLE_EXIT = 75
#: the counter of the worker's first queue's stats hash (``zqueue_workers_recycled_total``)
RECYCLED_COUNTER = "recycled"
JITTER = 0.1


def rss_mb() -> float:
    """This process's resident memory, MiB (the peak where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB (bytes on macOS)
        return peak / (2**20 if sys.platform == "darwin" else 2**10)


def jittered(jobs: int) -> int:
    """``jobs`` plus up to 10 % (a whole number of jobs, maybe 0 for a small budget)."""
    return jobs + random.randint(0, int(jobs * JITTER))


@dataclass(slots=True)
class Budget:
    """How long a worker process lives: ``jobs`` jobs run (jittered), ``memory_mb`` MiB
    resident; None: no limit."""

    jobs: int | None = None
    memory_mb: float | None = None

    def __post_init__(self) -> None:
        if self.jobs is not None and (isinstance(self.jobs, bool) or self.jobs < 1):
            raise ValueError("max_jobs_per_child must be >= 1")
        if self.memory_mb is not None and not self.memory_mb > 0:
            raise ValueError("max_memory_mb must be > 0")
        if self.jobs is not None:
            self.jobs = jittered(self.jobs)

    @property
    def limited(self) -> bool:
        return self.jobs is not None or self.memory_mb is not None

    def spent(self, processed: int) -> dict[str, str] | None:
        """After a job, the ``processed``-th: why the process is to be recycled (log
        fields), or None."""
        if self.jobs is not None and processed >= self.jobs:
            return {"reason": "max_jobs", "jobs": str(processed), "limit": str(self.jobs)}
        if self.memory_mb is not None:
            rss = rss_mb()
            if rss > self.memory_mb:
                return {
                    "reason": "max_memory",
                    "rss_mb": f"{rss:.0f}",
                    "limit_mb": f"{self.memory_mb:g}",
                }
        return None


class Recycler:
    """A worker's budget, checked after each job (:meth:`after_job`); once spent, the
    worker is stopped once (``stopping``) and ``reason`` is set."""

    def __init__(self, budget: Budget, stopping: threading.Event, worker_id: str) -> None:
        self.budget = budget
        self.stopping = stopping
        self.worker_id = worker_id
        self.reason: str | None = None
        self._lock = threading.Lock()

    def after_job(self, processed: int) -> bool:
        """True the first time the budget is found spent (the worker is then stopping)."""
        if not self.budget.limited or self.reason is not None:
            return False
        why = self.budget.spent(processed)
        if why is None:
            return False
        with self._lock:
            if self.reason is not None:
                return False
            self.reason = why["reason"]
        log.info(kv(event="worker_recycle", worker=self.worker_id, **why))
        self.stopping.set()
        return True
