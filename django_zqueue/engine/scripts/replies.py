"""What the scripts answer, by name: the one table of their integer replies.

Each script's header (``lua/<name>.lua``, "Returns:") gives the same numbers; the
builders of :mod:`django_zqueue.engine.scripts` turn a reply into one of these enums, so no code
above them reads a bare integer. ``tests/test_scripts.py`` checks every member against
the script's header.
"""

from __future__ import annotations

from enum import IntEnum


class AckReply(IntEnum):
    """``ack.lua``."""

    STALE = 0  # the delivery is no longer this consumer's: nothing done
    ACKED = 1
    ACKED_FLOW = 2  # acked, and its end went to the workflow outbox


class AckManyCode(IntEnum):
    """``ack_many.lua``, per job."""

    STALE = 0
    ACKED = 1
    TO_ACK_LUA = 2  # a record with fields only ack.lua handles: nothing done, ack it there


class NackReply(IntEnum):
    """``nack.lua``."""

    STALE = 0
    RETRIED = 1
    DEAD = 2
    DEAD_FLOW = 3  # dead, and its end went to the workflow outbox


class DeleteReply(IntEnum):
    """``delete.lua``."""

    ELSEWHERE = -2  # not in the state asked for (``only``): left alone
    IN_FLIGHT = -1  # left alone (or dead, with waiting_only)
    MISSING = 0
    DELETED = 1


class CancelReply(IntEnum):
    """``cancel.lua``."""

    ELSEWHERE = -2  # not in the state asked for (``only``): left alone
    DEAD = -1  # refused: delete a dead letter instead
    MISSING = 0
    WAITING = 1  # cancelled while ready, delayed or waiting for its parents
    RUNNING = 2  # cancelled while leased: the worker is told at its next heartbeat


class MoveReply(IntEnum):
    """``run_now.lua`` and ``set_priority.lua``."""

    NOT_WAITING = -1  # in flight, dead, waiting for its parents, or unusable
    MISSING = 0
    MOVED = 1


class RequeueReply(IntEnum):
    """``requeue_dead.lua``."""

    CORRUPT = -2  # a corrupt record: left dead
    NOT_DEAD = 0
    REQUEUED = 1
    REQUEUED_FLOW = 2  # requeued, and its revival recorded for its dependents


class TouchReply(IntEnum):
    """``touch.lua``'s answers other than a new lease deadline (ms)."""

    CANCELLED = -1  # the job was cancelled (cancel.lua): stop it
    STALE = 0


class StepReply(IntEnum):
    """``step.lua``."""

    STALE = 0  # the delivery is no longer this worker's: nothing recorded
    RECORDED = 1
    ALREADY = 2  # a record of that name stands: nothing changed


class ParkReply(IntEnum):
    """``park.lua`` (the first element of its reply)."""

    STALE = 0
    PARKED = 1
    SIGNALLED = 2  # the event waited for is there: not parked (its payload follows)
    DUE = 3  # the wake time has passed: not parked


class SignalReply(IntEnum):
    """``signal.lua``."""

    TIMED_OUT = -2  # the job's wait for this event timed out: nothing changed
    ALREADY = -1  # this event was delivered already: nothing changed
    NO_JOB = 0  # no such job (gone or ended): nothing changed
    KEPT = 1  # delivered, kept for the job's wait_for
    WOKEN = 2  # delivered, and the job, parked for it, is due at once
