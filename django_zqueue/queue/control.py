"""Control of jobs and of the queue by an operator: cancel a job (waiting or running),
run a waiting job now, change its priority, pause and resume the queue.

Each job operation is one script call (``cancel.lua``, ``run_now.lua``,
``set_priority.lua``); pausing writes one small key per shard, which ``claim.lua`` reads.
The Redis side is the engine's (:mod:`django_zqueue.engine.control`, ``engine.control``);
this module validates and shapes the answers.
"""

from __future__ import annotations

from typing import Literal

from ..conf.bounds import MAX_DELAY
from ..engine.control import CancelledJob, read_cancelled
from ..engine.records import validate
from ..engine.scripts.replies import CancelReply
from ..exceptions import InvalidArgument
from .base import QueueBase

__all__ = ["CANCELLED_TTL", "CancelResult", "CancelledJob", "Control", "read_cancelled"]

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
        return _CANCEL[self.engine.control.cancel(validate.tag(tag), ms)]

    def cancel(self, tag: str) -> bool:
        """Cancel a job that waits or runs (:meth:`cancel_job`). False when there is no
        such job, or it is dead."""
        return self.cancel_job(tag) in ("waiting", "running")

    def cancelled(self, tag: str) -> CancelledJob | None:
        """The record of a cancelled job while it is kept; None otherwise."""
        return self.engine.control.cancelled(validate.tag(tag))

    def run_now(self, tag: str) -> bool:
        """Move a waiting job (ready or delayed) to the front of the line
        (``run_now.lua``): claimed next. On a partitioned queue it goes ahead of the
        heads of the other partitions as read just before the call (one more round
        trip). False when the job is not waiting in line (in flight, dead, waiting for
        its parents in a workflow, or no such job)."""
        return self.engine.control.run_now(validate.tag(tag))

    def set_priority(self, tag: str, priority: int) -> bool:
        """Change a waiting job's priority (``set_priority.lua``): a ready job moves to
        its new priority's place in line, keeping its FIFO order among the jobs of that
        priority (in a fair queue: a head start of that many of its group's turns); a
        delayed job takes it when due. False when the job is not waiting in line (in
        flight, dead, waiting for its parents, or no such job)."""
        p = validate.priority(priority)
        return self.engine.control.set_priority(validate.tag(tag), p)

    # ----------------------------------------------------------------- the whole queue

    def pause(self) -> None:
        """Pause the queue: it still takes enqueues, but every claim (``claim.lua``, on
        every worker at once) hands out nothing until :meth:`resume`. Jobs in flight
        run on. The pause is kept in Redis: it survives worker restarts."""
        self.engine.control.pause()

    def resume(self) -> None:
        """Resume a paused queue, and wake the workers waiting on it. Raises when the
        queue could not be resumed; once it is, a wake-up Redis refuses (at maxmemory)
        is only logged (``resume_wake_failed``): idle workers look again within a second."""
        self.engine.control.resume()

    def is_paused(self) -> bool:
        """Whether the queue is paused (any of its shards, should a pause be half done)."""
        return self.engine.control.is_paused()
