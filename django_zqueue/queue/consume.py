"""Consuming: claim jobs (leases), wait for new ones, and finish each delivery with an ack,
a nack or a release; a heartbeat extends a lease. Each finishing call has a ``*_call``
form that builds the script call without sending it, for a caller that sends many in one
round trip (a worker's acks and its next claim)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .. import validate
from ..bounds import MAX_VISIBILITY_TIMEOUT
from ..connection import unavailable_as_error, wait_any
from ..exceptions import InvalidArgument
from ..records import Ack, Claimed, Message, NackResult, encode_body, from_ms
from ..replies import AckManyCode
from ..scripts import Call, Pending, Sink
from .base import MAX_BLOCK, QueueBase

#: most jobs one claim may lease
MAX_BATCH = 1000
#: "no result to keep" for :meth:`Consuming.ack`
NO_RESULT: Any = object()
#: longest a kept result may live (10 years), ms
MAX_RESULT_TTL_MS = 10 * 365 * 86_400_000
#: at most this many acks per ``ack_many`` script call
ACK_CHUNK = 100


class AckReply:
    """The reply to one :class:`Ack` sent in an ``ack_many`` call, read like a
    ``Pending[bool]`` once the batch is sent and :meth:`Consuming.settle_acks` has run:
    True acked, False stale. ``redo`` is the ``ack.lua`` call that finished a job
    ``ack_many`` left to it."""

    __slots__ = ("ack", "index", "pending", "redo")

    def __init__(self, ack: Ack, pending: Pending[list[AckManyCode]], index: int) -> None:
        self.ack = ack
        self.pending = pending
        self.index = index
        self.redo: Pending[bool] | None = None

    def code(self) -> AckManyCode:
        """``ack_many``'s code for this job."""
        return self.pending.result()[self.index]

    def result(self) -> bool:
        if self.redo is not None:
            return self.redo.result()
        return self.code() is AckManyCode.ACKED

    @property
    def failed(self) -> BaseException | None:
        return (self.redo or self.pending).failed


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """The first call of a claim (on shard ``start``), for a caller that sends it in a
    batch of its own; :meth:`Consuming.claim_rest` finishes the claim from its result."""

    start: int
    batch: int
    consumer: str
    call: Call[Claimed]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _min_hint(got: Sequence[Claimed]) -> int:
    known = [c.hint_ms for c in got if c.hint_ms >= 0]
    return min(known) if known else -1


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
        plan = self.plan_claim(batch, consumer)
        chunk = self.claim_chunk
        if batch <= chunk:
            return self.claim_rest(plan, self.run(plan.call))
        # one short script call per chunk on the start shard, all in one round trip
        shard = self.shards[plan.start]
        sizes = [min(chunk, batch - i) for i in range(0, batch, chunk)]
        b = self.batch()
        pending = [b.add(plan.call)] + [b.add(shard.claim(n, consumer)) for n in sizes[1:]]
        self.send(b)
        got = [p.result() for p in pending]
        first = Claimed([m for c in got for m in c.messages], _min_hint(got))
        return self.claim_rest(plan, first)

    def plan_claim(self, batch: int, consumer: str) -> ClaimPlan:
        """The first call of a claim of ``batch`` jobs (at most ``claim_chunk`` in it), on
        the next shard round-robin, for the caller to send (in a batch of its own)."""
        self.ensure_layout()
        start = self.next_shard()
        call = self.shards[start].claim(min(batch, self.claim_chunk), consumer)
        return ClaimPlan(start, batch, consumer, call)

    def claim_rest(self, plan: ClaimPlan, first: Claimed) -> tuple[list[Message], float | None]:
        """Finish a claim from its first call's result: on a partitioned queue go on to the
        following shards while the batch is not full (one call each); then the messages,
        and the wait hint when there are none (see :meth:`claim`)."""
        msgs = list(first.messages)
        got = [first]
        for i in range(1, self.partitions):
            if len(msgs) >= plan.batch:
                break
            shard = self.shards[(plan.start + i) % self.partitions]
            more = self.run(
                shard.claim(min(self.claim_chunk, plan.batch - len(msgs)), plan.consumer)
            )
            msgs.extend(more.messages)
            got.append(more)
        hint = _min_hint(got)
        return msgs, (None if msgs or hint < 0 else hint / 1000)

    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds`` for a wake-up from a publish, retry or ack.

        Returns True when woken. A wait is cut to a share of the socket timeout, so a
        long wait returns early (False) and the caller simply claims again.
        """
        if seconds <= 0:
            return False
        seconds = min(seconds, self.max_block)
        with unavailable_as_error():
            return wait_any(self.client, self.notify_groups, max(seconds, 0.001), self.wait_turn)

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
        frees. Stops after ``timeout`` seconds without a message (None: never).
        Every yielded message is leased: ack or nack it before its lease runs out.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            msgs, hint = self.claim(batch_size, consumer)
            if msgs:
                yield from msgs
                if deadline is not None:
                    deadline = time.monotonic() + (timeout or 0)
                continue
            remaining = MAX_BLOCK if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return
            if hint is not None:
                remaining = min(remaining, hint)
            if hint != 0:
                self.wait(remaining)

    # ----------------------------------------------------------------- finishing a delivery
    # Each has a ``*_call`` form that builds the script call without sending it, for a
    # caller that sends many in one round trip (a worker's batch of acks and its claim).

    def ack_call(
        self,
        msg: Message,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        run_ms: int | None = None,
        passed: str = "",
    ) -> Call[bool]:
        """``passed``: the result a workflow job hands to its dependents (JSON, '' = null)."""
        a = self.make_ack(msg, result, result_ttl, run_ms)
        return self.shard_for(msg.tag).ack(msg, a.result, a.result_ttl_ms, a.run_ms, passed)

    def ack(
        self,
        msg: Message,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        *,
        passed: Any = None,
    ) -> bool:
        """Finish a delivery: the job and its record are deleted.

        With ``result`` (any JSON value), it is kept for ``result_ttl`` seconds and can be
        read back with :meth:`result`. ``passed`` (JSON) is what a workflow job hands its
        dependents (docs/workflows.md). Returns False, changing nothing, when the delivery
        is stale (its lease was recovered, or the job was handed to another consumer).
        """
        given = "" if passed is None else encode_body(passed).decode("utf-8")
        return self.run(self.ack_call(msg, result, result_ttl, passed=given))

    def ack_many(self, msgs: Sequence[Message]) -> list[bool]:
        """Ack several deliveries in one round trip (one script call per shard and per
        ``ACK_CHUNK`` jobs); each entry as :meth:`ack` would return it."""
        if not msgs:
            return []
        batch = self.batch()
        replies = self.add_acks(batch, [Ack(m) for m in msgs])
        self.send(batch)
        self.settle_acks(replies)
        return [r.result() for r in replies]

    def make_ack(
        self,
        msg: Message,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        run_ms: int | None = None,
    ) -> Ack:
        """The :class:`Ack` of a delivery, its result (any JSON value) encoded;
        ``InvalidArgument`` for a result that is not JSON or a TTL not in [1 ms, 10 years]."""
        if result is NO_RESULT:
            return Ack(msg, "", 86_400_000, run_ms)
        ttl_ms = validate.seconds(result_ttl, "result_ttl") * 1000
        if not 1 <= ttl_ms <= MAX_RESULT_TTL_MS:
            raise InvalidArgument(
                f"result_ttl must be in [0.001, {MAX_RESULT_TTL_MS // 1000}] s, got {result_ttl!r}"
            )
        return Ack(msg, encode_body(result).decode("utf-8"), int(ttl_ms), run_ms)

    def add_acks(self, batch: Sink, acks: Sequence[Ack]) -> list[AckReply]:
        """Queue ``acks`` in ``batch`` as ``ack_many`` calls (one per shard and per
        ``ACK_CHUNK`` jobs); one reply per ack, in order, to read once ``batch`` is sent
        and :meth:`settle_acks` has run."""
        by_shard: dict[int, list[int]] = {}
        for i, a in enumerate(acks):
            by_shard.setdefault(self.shard_for(a.msg.tag).index, []).append(i)
        replies: list[AckReply | None] = [None] * len(acks)
        for index, members in by_shard.items():
            shard = self.shards[index]
            for start in range(0, len(members), ACK_CHUNK):
                chunk = members[start : start + ACK_CHUNK]
                pending = batch.add(shard.ack_many([acks[i] for i in chunk]))
                for j, i in enumerate(chunk):
                    replies[i] = AckReply(acks[i], pending, j)
        return [r for r in replies if r is not None]

    def settle_acks(self, replies: Sequence[AckReply]) -> None:
        """After the batch of :meth:`add_acks` was sent: ack with ``ack.lua`` each job
        ``ack_many`` left to it (a record with fields only ``ack.lua`` handles), in one
        more round trip, only when there are any."""
        later = [
            r for r in replies if r.pending.failed is None and r.code() is AckManyCode.TO_ACK_LUA
        ]
        if not later:
            return
        batch = self.batch()
        for r in later:
            a = r.ack
            r.redo = batch.add(
                self.shard_for(a.msg.tag).ack(a.msg, a.result, a.result_ttl_ms, a.run_ms)
            )
        self.send(batch)

    def release_call(self, msg: Message) -> Call[bool]:
        return self.shard_for(msg.tag).release(msg)

    def release(self, msg: Message) -> bool:
        """Give a delivery back unrun: the job is back in line at once (at its place) and
        this attempt does not count. False for a stale delivery."""
        return self.run(self.release_call(msg))

    def nack_call(
        self,
        msg: Message,
        error: str = "",
        retry_in: float | timedelta | None = None,
        *,
        dead: bool = False,
    ) -> Call[NackResult]:
        if not isinstance(error, str):
            raise InvalidArgument(f"error must be a str, got {type(error).__name__}")
        if retry_in is None:
            retry_s = self.options.retry_backoff.delay(msg.attempt)
        else:
            retry_s = validate.horizon(max(0.0, validate.seconds(retry_in, "retry_in")), "retry_in")
        return self.shard_for(msg.tag).nack(msg, error[:65536], int(retry_s * 1000), dead)

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
        return self.run(self.nack_call(msg, error, retry_in, dead=dead))

    def touch_call(
        self,
        msg: Message,
        extend: float | None = None,
        progress: float | None = None,
        note: str = "",
    ) -> Call[int | None]:
        ext = -1 if extend is None else int(validate.seconds(extend, "extend") * 1000)
        if not -1 <= ext <= MAX_VISIBILITY_TIMEOUT * 1000:
            raise InvalidArgument(f"extend must be in [0, {MAX_VISIBILITY_TIMEOUT}] seconds")
        if extend is not None and ext < 0:
            raise InvalidArgument("extend must be >= 0 seconds")
        prog = ""
        if progress is not None:
            value = validate.seconds(progress, "progress")
            if not 0 <= value <= 1:
                raise InvalidArgument(f"progress must be in [0, 1], got {progress!r}")
            prog = json.dumps({"v": value, "n": str(note)[:200], "t": _now_ms()})
        return self.shard_for(msg.tag).touch(msg, ext, prog)

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
        deadline = self.run(self.touch_call(msg, extend, progress, note))
        return from_ms(deadline) if deadline is not None and deadline > 0 else None
