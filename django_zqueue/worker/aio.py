"""The event-loop lane of a worker: ``async def`` tasks, many at once on one thread.

Beside the consumer threads, a worker started with ``async_concurrency`` N > 0
(``zqueue_worker --async-concurrency``, by default 100 when a registered ``async def``
task uses one of its queues, else none; ``Worker(async_concurrency=0)`` by default)
runs an asyncio loop in a thread of its own. The lane claims from the same queues
(redis-py's asyncio client, the same scripts), up to its free slots at a time, and runs
each job as an asyncio task, so N jobs that await I/O wait together. It keeps the
worker's rules, through the worker's own parts:

- leases: every job it claims is held in the worker's :class:`~.leases.Leases`, so the
  heartbeat thread extends its lease and a stop gives it back;
- timeouts: ``asyncio.timeout(task.timeout)`` around the run, which interrupts any await
  (the thread lane's async exception cannot reach a coroutine), reported as
  ``django_zqueue.worker.JobTimeout`` like a thread's;
- retries, dead letters, results, ``on_failure``, signals, ``current_job()``,
  OpenTelemetry spans: the same :class:`~django_zqueue.worker.outcome.Outcome`, sent in one
  round trip with the next claim and acted on by the consumer's own code
  (:meth:`.consumer.Consumer.outcomes_sent`);
- cancellation: each run is an asyncio task; :meth:`AioLane.cancel` cancels it (the job
  ends dead with ``JobCancelled``), the one call a cancel of a running job needs.

A sync job the lane claims runs in one of ``concurrency`` threads of the lane's own (the
thread lane's runner and timeouts apply there; so a worker with a lane runs up to twice
``concurrency`` sync jobs at once); an async job a consumer thread claims is handed to the lane
(:meth:`AioLane.submit`), or, without a lane, run by that thread on a loop of its own
(:func:`.coro.run_blocking`). Django's async ORM works inside a task: its queries go to
asgiref's thread-sensitive executor, whose connections the lane checks (Django's
``close_old_connections``) after a failed job and at most once a second.
"""

from __future__ import annotations

import asyncio
import contextlib

from ..queue.aio import AsyncQueue
from .lane_base import LaneHost
from .lane_claims import LaneClaims
from .lane_runs import CHECK_DB_EVERY, async_task_of

__all__ = ["CHECK_DB_EVERY", "AioLane", "LaneHost", "async_task_of", "lane_for"]


class AioLane(LaneClaims):
    """The event-loop lane of ``worker``: at most ``slots`` jobs at once (:meth:`run`).
    Its parts: :class:`~.lane_base.LaneBase` (state, slots), :class:`~.lane_runs.LaneRuns`
    (one job), :class:`~.lane_outcomes.LaneOutcomes` (sending their ends),
    :class:`~.lane_claims.LaneClaims` (the claim loop)."""

    def run(self) -> None:
        """The lane thread: run the loop until the worker stops (or, with ``burst``, the
        queues have nothing ready and nothing runs)."""
        try:
            asyncio.run(self._main())
        finally:
            with self._room:
                self._closed = True
                self._room.notify_all()
            self._ready.set()

    async def _main(self) -> None:
        w = self.worker
        self._freed, self._finished = asyncio.Event(), asyncio.Event()
        with self._lock:
            self.loop = asyncio.get_running_loop()
        self._ready.set()
        aqs = {q.name: AsyncQueue(q) for q in w.queues}
        flusher = asyncio.create_task(self._flusher(aqs))
        try:
            await self._claim_loop(aqs)
        finally:
            with self._room:
                self._closed = True
                self._room.notify_all()
            await self._drain()
            self._stop_flusher = True  # (a cancel could be swallowed by an await in redis-py)
            assert self._finished is not None
            self._finished.set()
            _, late = await asyncio.wait({flusher}, timeout=5.0)
            for t in late:
                t.cancel()
            with contextlib.suppress(Exception):
                await self._flush(aqs, [])
            await self._check_db(force=True)
            self._executor.shutdown(wait=False)

    async def _drain(self) -> None:
        """Stopping: let the running jobs finish within the worker's grace period, then
        cancel the rest (the worker gives their leases back)."""
        if not self._tasks:
            return
        pending = set(self._tasks.values())
        _, late = await asyncio.wait(pending, timeout=max(0.0, self.worker.grace))
        for t in late:
            t.cancel()
        if late:
            await asyncio.wait(late, timeout=5.0)


def lane_for(worker: LaneHost, async_concurrency: int) -> AioLane | None:
    """The lane of ``worker`` with ``async_concurrency`` slots; None for 0 (a consumer
    thread then runs an async task on a loop of its own, one at a time)."""
    n = async_concurrency
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError("async_concurrency must be an int >= 0")
    return AioLane(worker, n) if n else None
