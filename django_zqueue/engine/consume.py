"""The engine's calls of the consumer side (``engine.consume``): a claim in two steps
(:meth:`Consume.plan_claim`, :meth:`Consume.claim_rest`), and the ``*_call`` form of
each end of a delivery (ack, nack, release, touch) and of one job's lookups, built
without being sent, for a caller that sends many in one round trip (a worker's acks and
its next claim, the asyncio client)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..conf.bounds import MAX_VISIBILITY_TIMEOUT
from ..exceptions import InvalidArgument
from .base import Core
from .layout import Layout
from .records import Ack, Claimed, JobInfo, Message, NackResult, encode_body, validate
from .scripts import Call, Pending, Sink
from .scripts.replies import AckManyCode

#: "no result to keep" for ``Queue.ack``
NO_RESULT: Any = object()
#: longest a kept result may live (10 years), ms
MAX_RESULT_TTL_MS = 10 * 365 * 86_400_000
#: at most this many acks per ``ack_many`` script call
ACK_CHUNK = 100


class AckReply:
    """The reply to one :class:`Ack` sent in an ``ack_many`` call, read like a
    ``Pending[bool]`` once the batch is sent and :meth:`Consume.settle_acks` has run:
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
    batch of its own; :meth:`Consume.claim_rest` finishes the claim from its result."""

    start: int
    batch: int
    consumer: str
    call: Call[Claimed]


def _now_ms() -> int:
    return int(time.time() * 1000)


def min_hint(got: Sequence[Claimed]) -> int:
    """The smallest known wait hint of some claims' results (-1: none known)."""
    known = [c.hint_ms for c in got if c.hint_ms >= 0]
    return min(known) if known else -1


class Consume:
    """Claims, the ends of a delivery and one job's lookups, as script calls
    (``engine.consume``)."""

    __slots__ = ("_engine", "_layout")

    def __init__(self, engine: Core) -> None:
        self._engine = engine
        self._layout = Layout(engine)

    # ----------------------------------------------------------------- claims

    def plan_claim(self, batch: int, consumer: str) -> ClaimPlan:
        """The first call of a claim of ``batch`` jobs (at most ``claim_chunk`` in it), on
        the next shard round-robin, for the caller to send (in a batch of its own)."""
        e = self._engine
        self._layout.ensure()
        start = e._next_shard()
        call = e._shards[start].claim(min(batch, e.claim_chunk), consumer)
        return ClaimPlan(start, batch, consumer, call)

    def claim_rest(self, plan: ClaimPlan, first: Claimed) -> tuple[list[Message], float | None]:
        """Finish a claim from its first call's result: on a partitioned queue go on to the
        following shards while the batch is not full (one call each); then the messages,
        and the wait hint when there are none (see ``Queue.claim``)."""
        e = self._engine
        msgs = list(first.messages)
        got = [first]
        for i in range(1, e.partitions):
            if len(msgs) >= plan.batch:
                break
            shard = e._shards[(plan.start + i) % e.partitions]
            more = e.run(shard.claim(min(e.claim_chunk, plan.batch - len(msgs)), plan.consumer))
            msgs.extend(more.messages)
            got.append(more)
        hint = min_hint(got)
        return msgs, (None if msgs or hint < 0 else hint / 1000)

    # ----------------------------------------------------------------- ends of a delivery

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
        return self._engine._shard_for(msg.tag).ack(
            msg, a.result, a.result_ttl_ms, a.run_ms, passed
        )

    def add_acks(self, batch: Sink, acks: Sequence[Ack]) -> list[AckReply]:
        """Queue ``acks`` in ``batch`` as ``ack_many`` calls (one per shard and per
        ``ACK_CHUNK`` jobs); one reply per ack, in order, to read once ``batch`` is sent
        and :meth:`settle_acks` has run."""
        by_shard: dict[int, list[int]] = {}
        for i, a in enumerate(acks):
            by_shard.setdefault(self._engine._shard_for(a.msg.tag).index, []).append(i)
        replies: list[AckReply | None] = [None] * len(acks)
        for index, members in by_shard.items():
            shard = self._engine._shards[index]
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
        e = self._engine
        batch = e.batch()
        for r in later:
            a = r.ack
            r.redo = batch.add(
                e._shard_for(a.msg.tag).ack(a.msg, a.result, a.result_ttl_ms, a.run_ms)
            )
        e.send(batch)

    def release_call(self, msg: Message) -> Call[bool]:
        return self._engine._shard_for(msg.tag).release(msg)

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
            retry_s = self._engine.options.retry_backoff.delay(msg.attempt)
        else:
            retry_s = validate.horizon(max(0.0, validate.seconds(retry_in, "retry_in")), "retry_in")
        return self._engine._shard_for(msg.tag).nack(msg, error[:65536], int(retry_s * 1000), dead)

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
        return self._engine._shard_for(msg.tag).touch(msg, ext, prog)

    # ----------------------------------------------------------------- one job

    def state_call(self, tag: str) -> Call[str | None]:
        return self._engine._shard_for(validate.tag(tag)).state(tag)

    def info_call(self, tag: str, *, with_body: bool = True) -> Call[JobInfo | None]:
        """The info script call of one job (rank within its shard: see ``Queue.info``)."""
        return self._engine._shard_for(validate.tag(tag)).info(tag, with_body)
