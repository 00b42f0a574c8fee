"""Consuming: claim jobs (leases), wait for new ones, and finish each delivery with an ack,
a nack or a release; a heartbeat extends a lease. The script calls are the engine's
(:mod:`django_zqueue.engine.consume`: each end of a delivery also has a ``*_call`` form
there, for a caller that sends many in one round trip); a claim and a wait are
``engine.claims``' (:mod:`django_zqueue.engine.claims`)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..engine import MAX_BLOCK, NO_RESULT, AckReply, ClaimPlan
from ..engine.records import Ack, Message, NackResult, encode_body, from_ms
from ..exceptions import InvalidArgument
from .base import QueueBase

__all__ = ["CLAIM_AGAIN_MAX", "MAX_BATCH", "NO_RESULT", "AckReply", "ClaimPlan", "Consuming"]

#: most jobs one claim may lease
MAX_BATCH = 1000
#: most claims in a row that :meth:`Consuming.subscribe` sends at once, past its timeout,
#: while each answers "claim again" (a hint of 0: it ended expired or corrupt jobs at the
#: head, or set jobs aside, and leased nothing): up to 100 expired heads each (claim.lua)
CLAIM_AGAIN_MAX = 100


class Consuming(QueueBase):
    """The consumer side of a queue: leases and their ends."""

    def claim(self, batch: int = 1, consumer: str = "") -> tuple[list[Message], float | None]:
        """Lease up to ``batch`` jobs now, without waiting.

        Returns the messages and, when none could be claimed, a hint: seconds until a
        delayed job is due or the rate limit admits a start (``None``: nothing known,
        wait for new work). Due delayed jobs are promoted first; the queue's global
        ``concurrency`` and ``qps`` limits are enforced inside the script. A partitioned
        queue is claimed round-robin: from the next partition on, while the batch is not
        full.
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise InvalidArgument(f"batch must be an int in [1, {MAX_BATCH}], got {batch!r}")
        return self.engine.claims.claim(batch, consumer)

    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds`` for a wake-up from a publish, retry or ack.

        Returns True when woken. A wait is cut to a share of the socket timeout, so a
        long wait returns early (False) and the caller simply claims again.
        """
        if seconds <= 0:
            return False
        return self.engine.claims.wait(seconds)

    def get(self, timeout: float = 0, consumer: str = "") -> Message | None:
        """Claim one job, waiting up to ``timeout`` seconds for one; None if none came."""
        for msg in self.subscribe(batch_size=1, timeout=timeout, consumer=consumer):
            return msg
        return None

    def subscribe(
        self, batch_size: int = 10, timeout: float | None = None, consumer: str = ""
    ) -> Iterator[Message]:
        """Yield claimed messages as they come, claiming ``batch_size`` at a time.

        Idle, it blocks on the queue's notify list (no polling) and wakes when a job
        is published, a delayed job falls due or, with a concurrency limit, a slot
        frees. Stops after ``timeout`` seconds without a message (None: never); a claim
        that answers "claim again" (it ended expired or corrupt jobs at the head and
        leased nothing) is followed by another at once, up to ``CLAIM_AGAIN_MAX`` in a
        row, even past the timeout. Every yielded message is leased: ack or nack it
        before its lease runs out.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        again = 0  # claims in a row that answered "claim again"
        while True:
            msgs, hint = self.claim(batch_size, consumer)
            if msgs:
                again = 0
                yield from msgs
                if deadline is not None:
                    deadline = time.monotonic() + (timeout or 0)
                continue
            if hint == 0 and again < CLAIM_AGAIN_MAX:
                again += 1
                continue
            remaining = MAX_BLOCK if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return
            if hint is not None:
                remaining = min(remaining, hint)
            if hint != 0:
                self.wait(remaining)

    # ----------------------------------------------------------------- finishing a delivery
    # Each has a ``*_call`` form on the engine that builds the script call without sending
    # it, for a caller that sends many in one round trip (a worker's acks and its claim).

    def ack(
        self,
        msg: Message,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        *,
        passed: Any = None,
    ) -> bool:
        """Finish a delivery: the job and its record are deleted (a copy of the record is
        kept in the history of finished jobs unless the queue's ``keep_finished`` is 0).

        With ``result`` (any JSON value), it is kept for ``result_ttl`` seconds and can be
        read back with :meth:`result`. ``passed`` (JSON) is what a workflow job hands its
        dependents (docs/workflows.md). Returns False, changing nothing, when the delivery
        is stale (its lease was recovered, or the job was handed to another consumer).
        """
        given = "" if passed is None else encode_body(passed).decode("utf-8")
        return self.engine.run(self.engine.consume.ack_call(msg, result, result_ttl, passed=given))

    def ack_many(self, msgs: Sequence[Message]) -> list[bool]:
        """Ack several deliveries in one round trip (one script call per shard and per
        ``ACK_CHUNK`` jobs); each entry as :meth:`ack` would return it."""
        if not msgs:
            return []
        batch = self.engine.batch()
        replies = self.engine.consume.add_acks(batch, [Ack(m) for m in msgs])
        self.engine.send(batch)
        self.engine.consume.settle_acks(replies)
        return [r.result() for r in replies]

    def release(self, msg: Message) -> bool:
        """Give a delivery back unrun: the job is back in line at once (at its place) and
        this attempt does not count. False for a stale delivery."""
        return self.engine.run(self.engine.consume.release_call(msg))

    def nack(
        self,
        msg: Message,
        error: str = "",
        retry_in: float | timedelta | None = None,
        *,
        dead: bool = False,
    ) -> NackResult:
        """A delivery failed. Retry the job, or move it to dead letters.

        ``retry_in``: seconds before the retry (default: the queue's backoff for this
        attempt, with jitter; 0 = back in line now). The job is dead instead when it
        has had ``max_retries`` retries, or at once with ``dead=True``. ``error`` (text,
        e.g. a traceback) is kept on the job record.

        Returns ``"retry"``, ``"dead"``, or None for a stale delivery (nothing changed).
        """
        return self.engine.run(self.engine.consume.nack_call(msg, error, retry_in, dead=dead))

    def touch(
        self,
        msg: Message,
        extend: float | None = None,
        progress: float | None = None,
        note: str = "",
    ) -> datetime | None:
        """Heartbeat: extend the lease by ``extend`` seconds from now (default: the
        job's own visibility timeout, else the queue's) and/or record progress
        (0.0-1.0 and a short note).

        Returns the new lease deadline, or None when the delivery is stale (or was
        cancelled: :meth:`cancel`).
        """
        deadline = self.engine.run(self.engine.consume.touch_call(msg, extend, progress, note))
        return from_ms(deadline) if deadline is not None and deadline > 0 else None
