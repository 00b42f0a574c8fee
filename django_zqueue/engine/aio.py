"""The engine's verbs on redis-py's asyncio client: :class:`AsyncEngine`, the engine
of :class:`~django_zqueue.queue.aio.AsyncQueue` and of the worker's event-loop lane.

Each verb builds its script calls with the queue's engine (``sync``: the same calls, keys
and reading of replies as the sync side) and sends them by the second transport
(:class:`~.aiotransport.AsyncTransport`, which owns the asyncio client). Verbs take and
return typed values; connection errors are :class:`~django_zqueue.exceptions.QueueUnavailable`."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ..exceptions import InvalidArgument, QueueUnavailable
from .ahead import queue_ahead
from .aiotransport import AsyncClient, AsyncTransport, wait_any
from .consume import NO_RESULT, ClaimPlan, min_hint
from .control import CancelledJob, read_cancelled
from .flow import PUBLISH_CHUNK, cut_calls
from .keys import partition_of
from .order import read_rank
from .reads.lookup import decode_result
from .records import Claimed, JobInfo, Message, NackResult, NewJob, encode_body, from_ms, validate
from .redis.connection import UNAVAILABLE_ERRORS
from .scripts import Calls
from .scripts.replies import CancelReply, SignalReply

__all__ = ["AsyncClient", "AsyncEngine", "AsyncTransport", "wait_any"]


def _body(job: NewJob) -> bytes:
    return job.body


class AsyncEngine(AsyncTransport):
    """A queue's engine (``sync``) on an asyncio client (``AsyncQueue.engine``): every
    verb is a coroutine. The checks of the arguments are the caller's (the queue's), as
    on the sync side."""

    # ------------------------------------------------------------------ publishing

    def fits_one_call(self, jobs: Sequence[NewJob]) -> bool:
        """Whether ``jobs`` go in one ``publish`` script call (``cut_calls`` leaves them
        whole: at most ``PUBLISH_CHUNK`` jobs and ``PUBLISH_CALL_BYTES`` of bodies, or one
        job; all of one partition): what :meth:`publish` sends."""
        e = self.sync
        if len(jobs) > PUBLISH_CHUNK or len(cut_calls(jobs, _body)) > 1:
            return False
        return e.partitions == 1 or len({partition_of(j.tag, e.partitions) for j in jobs}) <= 1

    async def publish(self, jobs: Sequence[NewJob]) -> list[tuple[str, str]]:
        """Add ``jobs`` (:meth:`fits_one_call`) in one script call, all or nothing: the
        clashing ``(tag, state)`` pairs, empty when all were written."""
        if not jobs or not self.fits_one_call(jobs):
            raise InvalidArgument(
                "publish takes the jobs of one call (cut_calls), of one partition"
            )
        e = self.sync
        e.layout.ensure()  # I/O only once per queue object, on a partitioned queue
        return await self.run(e._shard_for(jobs[0].tag).publish(jobs))

    # ------------------------------------------------------------------ one job

    async def rank(self, tag: str) -> int | None:
        """The exact rank of ready job ``tag`` (the sync engine's rule), None unless ready."""
        e = self.sync
        shard = e._shard_for(tag)
        try:
            if e.partitions == 1:
                r: Any = await self.client.zrank(shard.keys.ready, tag)
                return None if r is None else int(r)
            pipe: Any = self.client.pipeline(transaction=False)
            pipe.zscore(shard.keys.ready, tag)
            pipe.zrank(shard.keys.ready, tag)
            score, own = await pipe.execute()
            if score is None or own is None:
                return None
            pipe = self.client.pipeline(transaction=False)
            queue_ahead(pipe, e._shards, float(score), shard.index)
            return int(own) + sum(int(c) for c in await pipe.execute())
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc

    async def ahead(self, score: float, index: int) -> int:
        """Jobs of the other shards ahead of ``score`` in shard ``index``."""
        try:
            pipe: Any = self.client.pipeline(transaction=False)
            queue_ahead(pipe, self.sync._shards, score, index)  # the tie rule of the sync side
            return sum(int(c) for c in await pipe.execute())
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc

    async def score(self, tag: str) -> float | None:
        """The ready score of job ``tag``, None unless ready."""
        try:
            s = await self.client.zscore(self.sync._keys_for(tag).ready, tag)
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
        return None if s is None else float(s)

    async def rank_within_key(self, tag: str) -> int | None:
        """:meth:`Ordering.rank <django_zqueue.engine.order.Ordering.rank>`: job ``tag``'s
        place among the waiting jobs of its ordering key."""
        tag = validate.tag(tag)
        return read_rank(tag, await self.run(self.sync.order.rank_call(tag)))

    async def state(self, tag: str) -> str | None:
        """ready, delayed, waiting, leased, dead, or None."""
        return await self.run(self.sync.consume.state_call(tag))

    async def info(self, tag: str, *, with_body: bool = True) -> JobInfo | None:
        """Everything known about one job, read atomically; its rank across the queue."""
        e = self.sync
        info = await self.run(e.consume.info_call(tag, with_body=with_body))
        if info is not None and info.rank is not None and e.partitions > 1:
            assert info.score is not None
            ahead = await self.ahead(info.score, e._shard_for(tag).index)
            info = dataclasses.replace(info, rank=info.rank + ahead)
        return info

    async def result(self, tag: str) -> Any:
        """The result kept for job ``tag``: ``LookupError`` when none is kept,
        :class:`CorruptResult` when it is not JSON (:func:`.reads.lookup.decode_result`)."""
        key = self.sync._keys_for(tag).result(tag)
        raw = await self._get(key)
        if raw is None:
            raise LookupError(f"no result kept for job {tag!r} in queue {self.sync.name!r}")
        return decode_result(raw, key)

    async def cancelled(self, tag: str) -> CancelledJob | None:
        """The record of cancelled job ``tag`` while it is kept; None otherwise."""
        return read_cancelled(tag, await self._get(self.sync._keys_for(tag).cancelled(tag)))

    async def cancel(self, tag: str, ttl_ms: int) -> bool:
        """Cancel a job that waits or runs (``cancel.lua``, its record kept ``ttl_ms``);
        False when there is no such job, or it is dead. A workflow job's end goes to its
        dependents at once (the sync engine's ``settle_ends``, in a thread)."""
        e = self.sync
        reply = await self.run(e._shard_for(tag).cancel(tag, ttl_ms))
        done = reply in (CancelReply.WAITING, CancelReply.RUNNING)
        if done:
            await asyncio.to_thread(e.flow.settle_ends, [tag])
        return done

    async def signal(self, tag: str, name: str, payload: str) -> SignalReply:
        """Deliver event ``name`` (its ``payload``, JSON) to job ``tag``: the call the
        sync engine makes (``engine.durable.signal_call``), sent on the event loop."""
        return await self.run(self.sync.durable.signal_call(tag, name, payload))

    # ------------------------------------------------------------------ consuming

    async def claim(self, batch: int, consumer: str) -> tuple[list[Message], float | None]:
        """Lease up to ``batch`` jobs now, round-robin over the partitions (one round trip
        per shard, in calls of at most ``claim_chunk``); the messages, and the wait hint
        in seconds when none came."""
        e = self.sync
        e.layout.ensure()  # I/O only once per queue object, on a partitioned queue
        start = e._next_shard()
        msgs: list[Message] = []
        got: list[Claimed] = []
        for i in range(e.partitions):
            if len(msgs) >= batch:
                break
            shard = e._shards[(start + i) % e.partitions]
            want = batch - len(msgs)
            chunk = e.claim_chunk
            sizes = [min(chunk, want - j) for j in range(0, want, chunk)]
            for c in await self.run_all([shard.claim(n, consumer) for n in sizes]):
                msgs.extend(c.messages)
                got.append(c)
        hint = min_hint(got)
        return msgs, (None if msgs or hint < 0 else hint / 1000)

    def plan_claim(self, batch: int, consumer: str) -> ClaimPlan | None:
        """The first call of a claim of ``batch`` jobs (the sync engine's plan: at most
        ``claim_chunk``), for a caller that sends it with calls of its own
        (:meth:`send_calls`), on an unpartitioned queue; None on a partitioned one, whose
        claim is :meth:`claim`."""
        return self.sync.consume.plan_claim(batch, consumer) if self.sync.partitions == 1 else None

    async def claim_rest(
        self, plan: ClaimPlan, first: Claimed
    ) -> tuple[list[Message], float | None]:
        """Finish a claim from its first call's result (the sync engine's ``claim_rest``,
        on the asyncio client): the messages, and the wait hint when there are none."""
        e = self.sync
        msgs = list(first.messages)
        got = [first]
        for i in range(1, e.partitions):
            if len(msgs) >= plan.batch:
                break
            shard = e._shards[(plan.start + i) % e.partitions]
            more = await self.run(
                shard.claim(min(e.claim_chunk, plan.batch - len(msgs)), plan.consumer)
            )
            msgs.extend(more.messages)
            got.append(more)
        hint = min_hint(got)
        return msgs, (None if msgs or hint < 0 else hint / 1000)

    async def send_calls(self, calls: Calls) -> None:
        """Send the script calls collected in ``calls`` (the ends of some deliveries, a
        claim's first call) in one round trip; each of their ``Pending`` holds its reply."""
        calls.settle(await self.send(calls.calls))

    async def ack(
        self,
        msg: Message,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        *,
        passed: Any = None,
    ) -> bool:
        """End a delivery done (``result`` kept ``result_ttl`` seconds; ``passed``, JSON,
        handed to a workflow job's dependents); False for a stale delivery."""
        given = "" if passed is None else encode_body(passed).decode("utf-8")
        return await self.run(self.sync.consume.ack_call(msg, result, result_ttl, passed=given))

    async def nack(
        self,
        msg: Message,
        error: str = "",
        retry_in: float | timedelta | None = None,
        *,
        dead: bool = False,
    ) -> NackResult:
        """End a delivery failed: ``"retry"``, ``"dead"``, or None for a stale delivery."""
        return await self.run(self.sync.consume.nack_call(msg, error, retry_in, dead=dead))

    async def release(self, msg: Message) -> bool:
        """A delivery back in line unrun, the attempt not counted; False when stale."""
        return await self.run(self.sync.consume.release_call(msg))

    async def touch(
        self,
        msg: Message,
        extend: float | None = None,
        progress: float | None = None,
        note: str = "",
    ) -> datetime | None:
        """Extend a delivery's lease, record its progress: the new lease deadline, None
        for a stale delivery."""
        deadline = await self.run(self.sync.consume.touch_call(msg, extend, progress, note))
        return from_ms(deadline) if deadline else None

    # ------------------------------------------------------------------ plain commands

    async def _get(self, key: str) -> Any:
        try:
            return await self.client.get(key)
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
