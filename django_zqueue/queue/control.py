"""Control of jobs and of the queue by an operator: cancel a job (waiting or running),
run a waiting job now, change its priority, pause and resume the queue.

Each job operation is one script call (``cancel.lua``, ``run_now.lua``,
``set_priority.lua``); pausing writes one small key per shard, which ``claim.lua`` reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..conf.bounds import MAX_DELAY
from ..engine.records import from_ms, validate
from ..engine.redis.connection import unavailable_as_error
from ..engine.scripts.replies import CancelReply, MoveReply
from ..events import kv, log
from ..exceptions import InvalidArgument
from .base import QueueBase

#: seconds a cancelled job's record is kept (the ``cancelled`` state), by default
CANCELLED_TTL = 86400.0

#: what :meth:`Control.cancel_job` did: cancelled while waiting, while running, or nothing
CancelResult = Literal["waiting", "running", "dead", "missing"]
_CANCEL: dict[CancelReply, CancelResult] = {
    CancelReply.WAITING: "waiting",
    CancelReply.RUNNING: "running",
    CancelReply.DEAD: "dead",
    CancelReply.MISSING: "missing",
}


@dataclass(frozen=True, slots=True)
class CancelledJob:
    """The record a cancel keeps (the terminal state ``cancelled``) for its TTL."""

    tag: str
    cancelled_at_ms: int
    was: str  # ready, delayed, waiting (for its parents) or leased (running)
    attempts: int  # deliveries before the cancel
    consumer: str | None  # the consumer that ran it, for a running job

    @property
    def cancelled_at(self) -> datetime:
        return from_ms(self.cancelled_at_ms)


def read_cancelled(tag: str, raw: bytes | str | None) -> CancelledJob | None:
    """The cancel record of ``tag`` as Redis holds it; None when absent, or not a record
    this version wrote (read as absent)."""
    if raw is None:
        return None
    try:
        rec = json.loads(raw)
        return CancelledJob(
            tag,
            int(rec["at"]),
            str(rec["was"]),
            int(rec.get("a", 0)),
            None if rec.get("c") is None else str(rec["c"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class Control(QueueBase):
    """Operator actions on one job or on the whole queue."""

    # ----------------------------------------------------------------- one job

    def cancel_job(self, tag: str, ttl: float = CANCELLED_TTL) -> CancelResult:
        """Cancel a job that waits or runs (``cancel.lua``), atomically.

        A waiting job (ready or delayed) is removed. A running job loses its lease at
        once: it will never run again (no ack, nack, retry or lease recovery can put it
        back), and the worker running it sees the cancel at its next heartbeat, sets
        ``current_job().cancel_requested`` and, after its grace period, raises
        ``JobCancelled`` in the job. Either way the job ends in the terminal state
        ``cancelled``, kept ``ttl`` seconds (:meth:`cancelled`), and a workflow job's
        dependents are told at once (one more round trip). Returns ``"waiting"``,
        ``"running"``, ``"dead"`` (refused: delete a dead letter instead) or
        ``"missing"`` (no such job)."""
        ms = int(validate.seconds(ttl, "ttl") * 1000)
        if not 1 <= ms <= MAX_DELAY * 1000:
            raise InvalidArgument("ttl must be at least 1 ms and within 3650 days")
        reply = self.engine.run(self.engine.shard_for(validate.tag(tag)).cancel(tag, ms))
        if reply in (CancelReply.WAITING, CancelReply.RUNNING):  # its dependents are told now
            self.engine.settle_ends([tag])
        return _CANCEL[reply]

    def cancel(self, tag: str) -> bool:
        """Cancel a job that waits or runs (:meth:`cancel_job`). False when there is no
        such job, or it is dead."""
        return self.cancel_job(tag) in ("waiting", "running")

    def cancelled(self, tag: str) -> CancelledJob | None:
        """The record of a cancelled job while it is kept; None otherwise."""
        with unavailable_as_error():
            raw = self.engine.client.get(self.engine.keys_for(validate.tag(tag)).cancelled(tag))
        return read_cancelled(tag, raw)

    def run_now(self, tag: str) -> bool:
        """Move a waiting job (ready or delayed) to the front of the line
        (``run_now.lua``): claimed next. On a partitioned queue it goes ahead of the
        heads of the other partitions as read just before the call (one more round
        trip). False when the job is not waiting in line (in flight, dead, waiting for
        its parents in a workflow, or no such job)."""
        shard = self.engine.shard_for(validate.tag(tag))
        below = self.engine.front_of_others(shard)
        return self.engine.run(shard.run_now(tag, below)) is MoveReply.MOVED

    def set_priority(self, tag: str, priority: int) -> bool:
        """Change a waiting job's priority (``set_priority.lua``): a ready job moves to
        its new priority's place in line, keeping its FIFO order among the jobs of that
        priority (in a fair queue: a head start of that many of its group's turns); a
        delayed job takes it when due. False when the job is not waiting in line (in
        flight, dead, waiting for its parents, or no such job)."""
        p = validate.priority(priority)
        return (
            self.engine.run(self.engine.shard_for(validate.tag(tag)).set_priority(tag, p))
            is MoveReply.MOVED
        )

    # ----------------------------------------------------------------- the whole queue

    def pause(self) -> None:
        """Pause the queue: it still takes enqueues, but every claim (``claim.lua``, on
        every worker at once) hands out nothing until :meth:`resume`. Jobs in flight
        run on. The pause is kept in Redis: it survives worker restarts."""
        with unavailable_as_error():
            pipe = self.engine.client.pipeline(transaction=False)
            for s in self.engine.shards:
                pipe.set(s.keys.paused, "1")
            pipe.execute()

    def resume(self) -> None:
        """Resume a paused queue, and wake the workers waiting on it. Raises when the
        queue could not be resumed; once it is, a wake-up Redis refuses (at maxmemory)
        is only logged (``resume_wake_failed``): idle workers look again within a second."""
        n = len(self.engine.shards)
        with unavailable_as_error():
            pipe = self.engine.client.pipeline(transaction=False)
            for s in self.engine.shards:
                pipe.delete(s.keys.paused)
            for s in self.engine.shards:
                pipe.lpush(s.keys.notify, "1")
                pipe.ltrim(s.keys.notify, 0, self.engine.policy.notify_cap - 1)
            replies = pipe.execute(raise_on_error=False)
            failed = next((r for r in replies[:n] if isinstance(r, Exception)), None)
            if failed is not None:
                raise failed
        woken = next((r for r in replies[n:] if isinstance(r, Exception)), None)
        if woken is not None:
            log.warning(kv(event="resume_wake_failed", queue=self.name, error=str(woken)[:200]))

    def is_paused(self) -> bool:
        """Whether the queue is paused (any of its shards, should a pause be half done)."""
        with unavailable_as_error():
            pipe = self.engine.client.pipeline(transaction=False)
            for s in self.engine.shards:
                pipe.exists(s.keys.paused)
            return any(int(n) for n in pipe.execute())
