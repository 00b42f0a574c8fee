"""The event-loop lane's outcomes (:class:`LaneOutcomes`): the ends of the jobs it ran,
sent as a consumer thread sends them (the acks in ``ack_many`` calls, a nack each, in
one round trip, with the next claim of an unpartitioned queue), then acted on by the
consumer's own code in a thread; a flusher sends those that wait while the claim loop
blocks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..engine.redis.outages import is_unavailable
from ..engine.scripts import Calls
from ..events import kv, log
from ..queue import Message
from ..queue.aio import AsyncQueue
from . import taskstats
from .consumer import Consumer, Finished, Reply, add_outcomes, report_error
from .lane_base import LaneBase


class LaneOutcomes(LaneBase):
    """The sending of the lane's outcomes."""

    async def _flush(
        self, aqs: dict[str, AsyncQueue], claim: list[tuple[AsyncQueue, int]]
    ) -> tuple[list[Message], float | None]:
        """Send the pending outcomes (and a claim of ``claim`` on an unpartitioned
        queue) in one round trip; act on the replies as a consumer thread does."""
        done, self.done = self.done, []
        self._flushing += 1
        try:
            return await self._send_outcomes(aqs, done, claim)
        finally:
            self._flushing -= 1
            self._flushes += 1

    async def _send_outcomes(
        self,
        aqs: dict[str, AsyncQueue],
        done: list[Finished],
        claim: list[tuple[AsyncQueue, int]],
    ) -> tuple[list[Message], float | None]:
        if not done:
            return await claim[0][0].claim(claim[0][1], self.worker.id) if claim else ([], None)
        # as a consumer thread's flush: the acks in one ack_many call per shard, a nack each
        outcomes = Calls()
        pending = add_outcomes(outcomes, done)
        # an unpartitioned queue's claim goes in the same round trip (the engine's plan)
        plan = claim[0][0].engine.plan_claim(claim[0][1], self.worker.id) if claim else None
        claimed = outcomes.add(plan.call) if plan is not None else None
        try:
            await aqs[done[0].queue.name].engine.send_calls(outcomes)
        except BaseException:
            self.done[:0] = done  # kept, sent again with the next flush
            raise
        # the consumer's own handling of the replies, in a thread: on_failure hooks and
        # Django task records are sync code (the ORM refuses to run on a loop)
        reporter = Consumer(self.worker)
        reporter.done = done
        await asyncio.to_thread(_report, reporter, pending, list(done))
        self.done[:0] = reporter.done  # refused by an outage: sent again
        if plan is not None and claimed is not None:
            return await claim[0][0].engine.claim_rest(plan, claimed.result())
        if claim:
            return await claim[0][0].claim(claim[0][1], self.worker.id)
        return [], None

    async def _flusher(self, aqs: dict[str, AsyncQueue]) -> None:
        """Send outcomes that wait while the claim loop blocks (slots full, or idle)."""
        assert self._finished is not None
        while True:
            await self._finished.wait()
            self._finished.clear()
            if self._stop_flusher:
                return
            await asyncio.sleep(0.005)  # let a burst of finishing jobs join one round trip
            if self.done:
                try:
                    await self._flush(aqs, [])
                except Exception as exc:  # kept; sent again with the next flush
                    if not is_unavailable(exc):
                        report_error(self.worker, exc, 0.1, lane="aio", call="outcomes")
                    await asyncio.sleep(0.1)
                    self._finished.set()


def _report(reporter: Consumer, pending: Sequence[Reply], done: list[Finished]) -> None:
    """In a thread, after the lane sent its outcomes: the consumer's handling of the
    replies, then the per-task statistics of these jobs (one round trip; a consumer
    thread sends them with its acks). Statistics that cannot be written are only logged."""
    reporter.outcomes_sent(pending)
    q = done[0].queue
    stats = q.engine.batch()
    taskstats.add_to(stats, done)
    try:
        q.engine.send(stats)
    except Exception as exc:
        log.warning(kv(event="task_stats_not_written", queue=q.name, error=str(exc)))
