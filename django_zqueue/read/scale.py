"""The autoscaling signal of queues: how much work is claimable now, how fast jobs end,
and how many worker threads would drain the line within a target time
(``manage.py zqueue_scale``, the ``zqueue_scale_*`` Prometheus gauges and the view KEDA's
``metrics-api`` scaler reads: docs/deploying.md).

It is one :func:`~.overview.overview` read (two round trips per Redis client, summed over
a queue's partitions and Cluster shards), shaped:

- ``ready``: the jobs in line a worker could claim now. Jobs delayed (a retry's backoff,
  ``enqueue_in``, a durable task parked by a sleep or a wait) are in ``delayed``, jobs
  waiting for their parents in ``wait``, jobs set aside by their group's limits in their
  own set: none of them is in the line, so none is counted; a paused queue has none
  claimable (``ready`` 0, ``in_line`` still says how many wait);
- ``completed_per_second``: acked and failed runs over the last ``RATE_MINUTES`` minutes
  of the stats ring (the current one up to now);
- ``desired_threads = inflight + ceil(ready x mean run time / target_seconds)``: the
  threads busy now, and as many more as would run the claimable line within
  ``target_seconds``; the mean run time is that of the jobs acked in the same minutes,
  else over the queue's life, else ``DEFAULT_RUN_SECONDS``;
- ``desired_workers``: ``desired_threads`` over ``threads_per_worker`` (a worker's
  ``--concurrency``), rounded up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import InvalidArgument
from .overview import QueueFigures, overview
from .stats import mean_run_ms

if TYPE_CHECKING:
    from .source import Readable

RATE_MINUTES = 5  # minutes of the stats ring the completion rate and the mean run time read
DEFAULT_RUN_SECONDS = 1.0  # the mean run time assumed before any job of the queue was acked
DEFAULT_TARGET_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class ScaleSignal:
    """One queue's (or, as ``total``, every queue's) autoscaling figures."""

    queue: str
    ready: int  # claimable now: in line and not paused
    in_line: int  # in line, paused or not
    paused: bool
    inflight: int
    lag_seconds: float  # the wait of the job claimed next (rank 0); 0 when none
    completed_per_second: float
    mean_run_seconds: float | None  # None: no job acked yet (DEFAULT_RUN_SECONDS used)
    live_threads: int
    desired_threads: int
    desired_workers: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_scale_args(target_seconds: float, threads_per_worker: int) -> None:
    """InvalidArgument for a target that is not a positive number of seconds, or a
    count of threads per worker below 1."""
    if (
        isinstance(target_seconds, bool)
        or not isinstance(target_seconds, int | float)
        or not math.isfinite(target_seconds)
        or not 0 < target_seconds <= 86400 * 7
    ):
        raise InvalidArgument("target_seconds must be a number of seconds in (0, 604800]")
    if isinstance(threads_per_worker, bool) or not isinstance(threads_per_worker, int):
        raise InvalidArgument("threads_per_worker must be an int >= 1")
    if threads_per_worker < 1:
        raise InvalidArgument("threads_per_worker must be an int >= 1")


def scale_signals(
    queues: Sequence[Readable],
    target_seconds: float = DEFAULT_TARGET_SECONDS,
    threads_per_worker: int = 1,
) -> list[ScaleSignal]:
    """The signal of each queue, in order (one :func:`overview` read)."""
    check_scale_args(target_seconds, threads_per_worker)
    return [signal_of(f, target_seconds, threads_per_worker) for f in overview(queues)]


def signal_of(f: QueueFigures, target: float, per_worker: int = 1) -> ScaleSignal:
    """The signal of one queue's figures (read already: the metrics' scrape reuses its
    own)."""
    rows = f.minutes(RATE_MINUTES)
    ended = sum(m.acked + m.failed for m in rows)
    elapsed = (RATE_MINUTES - 1) * 60 + (f.now_ms % 60_000) / 1000
    acked = sum(m.acked for m in rows)
    mean_ms = mean_run_ms(acked, sum(m.run_ms for m in rows))
    if mean_ms is None:
        lifetime = f.counters
        mean_ms = mean_run_ms(lifetime.get("acked", 0), lifetime.get("run_ms", 0))
    mean = None if mean_ms is None else mean_ms / 1000
    ready = 0 if f.paused else f.ready
    threads = f.inflight + math.ceil(
        ready * (DEFAULT_RUN_SECONDS if mean is None else mean) / target
    )
    return ScaleSignal(
        queue=f.name,
        ready=ready,
        in_line=f.ready,
        paused=f.paused,
        inflight=f.inflight,
        lag_seconds=round(f.lag_seconds or 0.0, 3),
        completed_per_second=round(ended / max(1.0, elapsed), 3),
        mean_run_seconds=None if mean is None else round(mean, 4),
        live_threads=f.workers,
        desired_threads=threads,
        desired_workers=math.ceil(threads / per_worker),
    )


def total(signals: Sequence[ScaleSignal], threads_per_worker: int = 1) -> ScaleSignal:
    """Every queue's signal summed: for workers that serve them all. The lag is the
    longest; the mean run time is left out (None); live threads are the most any queue
    has (a thread serves several queues)."""
    threads = sum(s.desired_threads for s in signals)
    return ScaleSignal(
        queue="*",
        ready=sum(s.ready for s in signals),
        in_line=sum(s.in_line for s in signals),
        paused=bool(signals) and all(s.paused for s in signals),
        inflight=sum(s.inflight for s in signals),
        lag_seconds=max((s.lag_seconds for s in signals), default=0.0),
        completed_per_second=round(sum(s.completed_per_second for s in signals), 3),
        mean_run_seconds=None,
        live_threads=max((s.live_threads for s in signals), default=0),
        desired_threads=threads,
        desired_workers=math.ceil(threads / threads_per_worker),
    )


def scale_document(
    queues: Sequence[Readable],
    target_seconds: float = DEFAULT_TARGET_SECONDS,
    threads_per_worker: int = 1,
) -> dict[str, Any]:
    """What ``zqueue_scale --json`` prints and the scale view answers: ``{"target_seconds",
    "threads_per_worker", "queues": {name: figures}, "total": figures}``."""
    signals = scale_signals(queues, target_seconds, threads_per_worker)
    return {
        "target_seconds": target_seconds,
        "threads_per_worker": threads_per_worker,
        "queues": {s.queue: s.as_dict() for s in signals},
        "total": total(signals, threads_per_worker).as_dict(),
    }
