"""The event-loop lane's claims (:class:`LaneClaims`): the loop that takes the free slots,
claims up to as many jobs from the first of the worker's queues that has some (the
pending outcomes in the same round trip), starts them, and otherwise waits for a
wake-up, riding out errors and outages."""

from __future__ import annotations

import asyncio
import time

from ..engine.redis.outages import is_unavailable
from ..queue import Message, Queue
from ..queue.aio import AsyncQueue
from .consumer import RETRY_RESET_AFTER, report_error
from .lane_outcomes import LaneOutcomes
from .lane_runs import LaneRuns

LOOP = "zqueue-aio claims"  # its name in the health probes' lines


class LaneClaims(LaneOutcomes, LaneRuns):
    """The claim loop of the event-loop lane."""

    async def _claim_loop(self, aqs: dict[str, AsyncQueue]) -> None:
        try:
            await self._claims(aqs)
        finally:
            self.worker.vitals.gone(LOOP)

    async def _claims(self, aqs: dict[str, AsyncQueue]) -> None:
        w = self.worker
        assert self._freed is not None
        errors, failed_at = 0, 0.0
        while not w.stopping.is_set():
            w.vitals.tick(LOOP)  # the probes' "claim loop not blocked" (health.py)
            if w.quiet.is_set():  # a quiet order: the running coroutines end, no claim
                if w.burst and self._idle():
                    return
                await self._wait_freed(0.1)
                continue
            free = self._reserve()
            if free <= 0:
                if w.max_jobs is not None and w.leases.claimed >= w.max_jobs and not self._tasks:
                    w.stopping.set()
                    return
                await self._wait_freed(0.1)
                continue
            flushes = self._flushes  # an outcome sent after this may put a job back in line
            try:
                queue, msgs, hints = await self._claim(aqs, free)
                if msgs or time.monotonic() - failed_at > RETRY_RESET_AFTER:
                    errors = 0  # (see RETRY_RESET_AFTER)
                w.outage.ok()
            except Exception as exc:
                self._release(free)
                errors, failed_at = errors + 1, time.monotonic()
                await self._pause(exc, errors)
                continue
            self._release(free - self._start(queue, msgs))
            if queue is not None:
                continue
            if w.burst and not any(h == 0 for h in hints):
                if self._idle() and self._flushes == flushes:  # (else: claim once more)
                    return
                await self._wait_freed(0.1)
                continue
            wait = min([*hints, 1.0])
            if wait > 0:
                if self._tasks:  # a job may end meanwhile: do not block for long
                    wait = min(wait, 0.05)
                w.vitals.tick(LOOP, wait)  # (a blocking wait)
                try:
                    await aqs[w.queues[0].name].engine.wait_on(w.wakeups.groups, wait)
                except Exception as exc:  # Redis gone while idle: ridden out, never the end
                    errors, failed_at = errors + 1, time.monotonic()
                    await self._pause(exc, errors, call="blpop")

    def _start(self, queue: Queue | None, msgs: list[Message]) -> int:
        """Hold the leases of the jobs claimed from ``queue`` and spawn each that starts;
        how many did."""
        if queue is None:
            return 0
        w = self.worker
        w.leases.hold(queue, msgs)
        started = 0
        for msg in msgs:
            if w.leases.start(queue, msg):
                started += 1
                self._spawn(queue, msg)
        return started

    def _idle(self) -> bool:
        """Nothing running, no job on its way from a thread, no outcome unsent or on its
        way (with ``burst``: the lane's end)."""
        with self._lock:
            idle = self._taken == 0
        return idle and not self._tasks and not self.done and not self._flushing

    async def _pause(self, exc: Exception, errors: int, **where: str) -> None:
        """After a failed claim or wait, the ``errors``-th in a row: an outage noted, any
        other error reported; then a pause that grows with ``errors`` (5 s at most)."""
        w = self.worker
        pause = min(5.0, 0.1 * 2**errors)
        if is_unavailable(exc):
            w.outage.failed(exc)
        else:
            report_error(w, exc, pause, lane="aio", **where)
        w.vitals.tick(LOOP, pause)  # a backoff is not a blocked loop
        await asyncio.sleep(pause)

    async def _claim(
        self, aqs: dict[str, AsyncQueue], budget: int
    ) -> tuple[Queue | None, list[Message], list[float]]:
        """Claim up to ``budget`` jobs from the first queue in order that has some; the
        pending outcomes go in the first claim's round trip. A queue whose claim fails
        for an error of its own, not an outage (a key of the wrong type), is logged and
        left alone for a growing while (``worker.paused``, shared with the consumer
        threads); an outage raises."""
        w = self.worker
        hints: list[float] = []
        first = True
        for q in self.reporter.order():
            paused = w.paused.wait(q.name)
            if paused > 0:
                hints.append(paused)
                continue
            aq = aqs[q.name]
            try:
                if first and self.done:
                    msgs, hint = await self._flush(aqs, [(aq, budget)])
                else:
                    msgs, hint = await aq.claim(min(budget, 100), w.id)
            except Exception as exc:
                if is_unavailable(exc):
                    raise
                wait = w.paused.failed(q.name)
                report_error(w, exc, wait, lane="aio", queue=q.name)
                hints.append(wait)
                continue
            finally:
                first = False
            w.paused.ok(q.name, proved=bool(msgs))
            if msgs:
                return q, msgs, hints
            if hint is not None:
                hints.append(hint)
        return None, [], hints
