"""The live workers of a set of queues, from what workers publish: their registration in
each queue's workers hash (``{threads, seen, host, pid, started, state}``, every 10 s and
at each change of state), the orders left for them (``wctl``: quiet, stop) and the
consumer id (``c``) that ``claim`` writes in the record of each job it leases.

Bounded: the in-flight jobs read per queue shard are the :data:`MAX_HELD` nearest to
their lease deadline. Two round trips per Redis client: ``TIME``, ``HGETALL workers`` and
``HGETALL wctl`` and ``ZRANGE leased`` of each queue, then ``HMGET meta`` and ``HMGET
progress`` of the leased jobs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engine.reads import Reads
from ..engine.records import Progress, Record, lenient_text, record_task
from .stats import WORKER_WITHIN_MS, local_ms

if TYPE_CHECKING:
    from .source import Readable

#: in-flight jobs read per queue shard
MAX_HELD = 500
#: what a worker says it does in its registration
STATES = ("running", "quiet", "stopping")


@dataclass(frozen=True, slots=True)
class HeldJob:
    queue: str
    tag: str
    started_ms: int | None  # Redis time of the claim
    deadline_ms: int  # lease deadline, Redis time
    task: str | None = None  # None: a body that is not a task's, or apart from the record
    progress: float | None = None  # 0.0-1.0, as the job last reported it (None: never)


@dataclass(slots=True)
class WorkerInfo:
    """One worker process, over every queue it registered in."""

    id: str
    host: str
    pid: int | None
    threads: int
    seen_ms: int  # its last heartbeat, on its host's clock
    started_ms: int | None  # when it started, on its host's clock (None: older workers)
    #: what it says it does: running, quiet (claims no more) or stopping
    state: str = "running"
    order: str | None = None  # the order left for it and not done yet: quiet or stop
    queues: list[str] = field(default_factory=list)
    jobs: list[HeldJob] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.seen_ms >= local_ms() - WORKER_WITHIN_MS


@dataclass(frozen=True, slots=True)
class WorkersReading:
    workers: list[WorkerInfo]  # most recently seen first
    now_ms: int  # Redis time
    capped: bool  # some queue had more than MAX_HELD jobs in flight: not all are listed


def _entry(raw: Any) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _int(value: Any) -> int | None:
    """An int of a number (None for anything else, infinities and NaN too)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if math.isfinite(value) else None


def _deadline(score: float) -> int:
    """A lease deadline score as ms (an infinite one clamped: it still shows)."""
    return int(min(max(score, -(2.0**62)), 2.0**62)) if score == score else 0


def read_workers(queues: Sequence[Readable]) -> WorkersReading:
    """Every worker registered in ``queues`` with the jobs it holds (see module doc)."""
    found: dict[str, WorkerInfo] = {}
    got = Reads.workers([q.reads for q in queues], MAX_HELD)
    for queue in got.queues:
        _register(found, queue.queue, queue.workers)
    for queue in got.queues:
        _orders(found, queue.orders)
        for tag, deadline, raw, done in queue.held:
            record = Record.decode(raw)
            holder = found.get(record.consumer or "") if record else None
            if holder is not None and record is not None:
                progress = Progress.decode(done)
                holder.jobs.append(
                    HeldJob(
                        queue.queue,
                        tag,
                        record.started_at_ms,
                        _deadline(deadline),
                        record_task(raw),
                        progress.value if progress else None,
                    )
                )
    workers = sorted(found.values(), key=lambda w: (-w.seen_ms, w.id))
    return WorkersReading(workers, got.now_ms, got.capped)


def _register(found: dict[str, WorkerInfo], queue: str, raw: dict[Any, Any]) -> None:
    for wid, value in raw.items():
        entry = _entry(value)
        if entry is None:  # garbage: a worker's heartbeat removes it
            continue
        key = lenient_text(wid) or ""
        info = found.get(key)
        if info is None:
            info = found[key] = WorkerInfo(
                id=key,
                host=str(entry.get("host", "")),
                pid=_int(entry.get("pid")),
                threads=_int(entry.get("threads")) or 0,
                seen_ms=_int(entry.get("seen")) or 0,
                started_ms=_int(entry.get("started")),
            )
        seen = _int(entry.get("seen")) or 0
        if seen >= info.seen_ms and entry.get("state") in STATES:
            info.state = str(entry["state"])  # (the latest registration's)
        info.seen_ms = max(info.seen_ms, seen)
        info.queues.append(queue)


def _orders(found: dict[str, WorkerInfo], raw: dict[Any, Any]) -> None:
    """The orders left for the workers (``stop`` over ``quiet``), unless done already."""
    for wid, value in raw.items():
        info = found.get(lenient_text(wid) or "")
        order = lenient_text(value)
        if info is None or order not in ("quiet", "stop") or info.order == "stop":
            continue
        done = {"quiet": ("quiet", "stopping"), "stop": ("stopping",)}[order]
        info.order = None if info.state in done else order
