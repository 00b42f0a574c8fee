"""The admin's workers page: every worker registered in a configured queue, shaped for
display from :func:`django_zqueue.read.workers.read_workers`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engine.records import from_ms
from ..read.stats import local_ms
from ..read.workers import MAX_HELD, read_workers
from ..web.humanize import duration
from .dashboard_text import due_in, local_text

if TYPE_CHECKING:
    from ..queue import Queue


@dataclass(frozen=True, slots=True)
class HeldRow:
    queue: str
    tag: str
    url: str
    running: str  # for how long, on Redis' clock
    lease_left: str  # time to the lease deadline ('overdue by …' when past)


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: str
    host: str
    pid: int | None
    threads: int
    queues: list[str]
    started: str  # '' for a worker that does not publish it
    up_for: str
    heartbeat: str  # how long ago it was last seen
    live: bool
    jobs: list[HeldRow]


@dataclass(frozen=True, slots=True)
class WorkersPage:
    workers: list[WorkerRow]
    capped: bool  # more than MAX_HELD jobs in flight in some queue: not all listed
    max_held: int = MAX_HELD

    @property
    def live(self) -> int:
        return sum(w.live for w in self.workers)

    @property
    def threads(self) -> int:
        return sum(w.threads for w in self.workers if w.live)


def workers(queues: Sequence[Queue], job_url: Callable[[str, str], str]) -> WorkersPage:
    """The rows of the workers page; ``job_url(queue, tag)`` links each held job."""
    reading = read_workers([q.engine for q in queues])
    here = local_ms()
    rows = []
    for w in reading.workers:
        held = [
            HeldRow(
                queue=j.queue,
                tag=j.tag,
                url=job_url(j.queue, j.tag),
                running=duration((reading.now_ms - j.started_ms) / 1000) if j.started_ms else "",
                lease_left=due_in(from_ms(j.deadline_ms), reading.now_ms),
            )
            for j in sorted(w.jobs, key=lambda j: j.started_ms or 0)
        ]
        rows.append(
            WorkerRow(
                id=w.id,
                host=w.host,
                pid=w.pid,
                threads=w.threads,
                queues=sorted(w.queues),
                started=local_text(from_ms(w.started_ms)) if w.started_ms else "",
                up_for=duration((here - w.started_ms) / 1000) if w.started_ms else "",
                heartbeat=duration((here - w.seen_ms) / 1000),
                live=w.live,
                jobs=held,
            )
        )
    return WorkersPage(rows, reading.capped)
