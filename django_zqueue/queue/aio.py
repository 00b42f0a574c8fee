"""The queue from asyncio code: :class:`AsyncQueue`, on redis-py's asyncio client.

The same scripts, the same typed calls: an :class:`AsyncQueue` wraps a
:class:`~django_zqueue.queue.Queue`, which validates input, routes each job to its shard
and builds every script call (:class:`~django_zqueue.scripts.Call`, its keys, arguments
and the reading of its reply); only the sending is asynchronous. So a job published from
an async view is the same job a sync caller would publish, in the same queue.

::

    aq = get_async_queue("default")
    tag = await aq.publish({"x": 1})
    await aq.rank(tag); await aq.state(tag); await aq.result(tag)

The asyncio client is the running loop's (:func:`~django_zqueue.aconnection.get_async_client`)
for a queue of the settings; a :class:`Queue` built on a client of its own needs an
asyncio client given with it (``AsyncQueue(queue, client=...)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import redis.asyncio as aredis
from redis.exceptions import NoScriptError, ResponseError

from .. import conf, validate
from ..aconnection import get_async_client
from ..connection import UNAVAILABLE_ERRORS, get_client
from ..exceptions import DuplicateJob, InvalidArgument, QueueUnavailable
from ..keys import partition_of
from ..read.pipeline import queue_ahead
from ..records import Claimed, JobInfo, Message, NackResult, NewJob, encode_body, from_ms
from ..replies import CancelReply, SignalReply
from ..scripts import Call, script_error, source
from .consume import MAX_BATCH, NO_RESULT
from .control import CANCELLED_TTL, CancelledJob, read_cancelled
from .core import Queue
from .lookup import decode_result
from .publish import PUBLISH_CHUNK

T = TypeVar("T")


def _noscript(reply: Any) -> bool:
    return isinstance(reply, NoScriptError) or (
        isinstance(reply, ResponseError) and str(reply).startswith("NOSCRIPT")
    )


class AsyncQueue:
    """``queue`` (a :class:`Queue`) from asyncio code. Every method (but ``ack_call``,
    which only builds a call) is a coroutine and means what the :class:`Queue` method of
    the same name means (same checks, same exceptions, same scripts); connection errors
    are :class:`QueueUnavailable`. The sync methods not mirrored here (``publish``'s
    ``debounce``, ``unique_for`` and ``depends_on``, the operator calls) run on the sync
    client, e.g. in ``asyncio.to_thread``."""

    def __init__(self, queue: Queue, client: aredis.Redis | None = None) -> None:
        self.queue = queue
        self.name = queue.name
        self._client = client
        self._own = client is not None

    def __repr__(self) -> str:
        return f"<AsyncQueue {self.name!r}>"

    @property
    def client(self) -> aredis.Redis:
        """The asyncio client: the one given, else the running loop's for the settings."""
        if self._client is not None:
            return self._client
        config = conf.get_config()
        if self.queue.client is not get_client(config):
            raise InvalidArgument(
                f"queue {self.name!r} was built on a client of its own: give its asyncio "
                "client too, AsyncQueue(queue, client=redis.asyncio.Redis(...))"
            )
        return get_async_client(config)

    # ------------------------------------------------------------------ sending calls

    async def run(self, call: Call[T]) -> T:
        """Send one script call (EVALSHA; after a ``SCRIPT FLUSH``, load and send again)."""
        sha = self.queue.scripts.sha(call.script)
        cmd = ("EVALSHA", sha, len(call.keys), *call.keys, *call.args)
        client: Any = self.client
        try:
            try:
                reply = await client.execute_command(*cmd)
            except NoScriptError:
                await client.script_load(source(call.script))
                reply = await client.execute_command(*cmd)
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
        except ResponseError as exc:
            error = script_error(call.script, exc)
            if error is exc:
                raise
            raise error from exc
        return call.result(reply)

    async def send(
        self, calls: Sequence[Call[Any]], *, blpop: tuple[list[str], float] | None = None
    ) -> list[Any]:
        """Send calls in one round trip (a non-transactional pipeline), after a BLPOP of
        ``blpop`` (keys, seconds) when given; the raw replies in order (errors as
        exception objects: read each with ``call.result``). A call that got NOSCRIPT is
        sent again once the scripts are loaded."""
        pipe = self.client.pipeline(transaction=False)
        if blpop is not None:
            pipe.blpop(blpop[0], timeout=blpop[1])
        shas = self.queue.scripts.shas
        for call in calls:
            pipe.execute_command(
                "EVALSHA", shas[call.script], len(call.keys), *call.keys, *call.args
            )
        try:
            replies = list(await pipe.execute(raise_on_error=False))
            skip = 0 if blpop is None else 1
            missing = [i for i, r in enumerate(replies[skip:]) if _noscript(r)]
            for i in missing:
                call = calls[i]
                await self.client.script_load(source(call.script))
                client: Any = self.client
                replies[skip + i] = await client.execute_command(
                    "EVALSHA", shas[call.script], len(call.keys), *call.keys, *call.args
                )
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
        return replies

    async def run_all(self, calls: Sequence[Call[T]]) -> list[T]:
        """Send calls in one round trip; their results in order (the first failure raises)."""
        if len(calls) == 1:
            return [await self.run(calls[0])]
        replies = await self.send(calls)
        return [c.result(r) for c, r in zip(calls, replies, strict=True)]

    # ------------------------------------------------------------------ publishing

    async def publish(
        self,
        body: Any,
        tag: str | None = None,
        priority: int = 0,
        score: float | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        *,
        max_retries: int | None = None,
        visibility_timeout: float | None = None,
        group: str | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> str:
        """:meth:`Queue.publish`: add one job, return its tag (``debounce``,
        ``unique_for`` and ``depends_on`` are the sync client's: run it in a thread)."""
        job = self.queue.prepare(
            body,
            tag,
            priority,
            score,
            delay,
            run_at,
            max_retries=max_retries,
            visibility_timeout=visibility_timeout,
            group=group,
            expires=expires,
        )
        return (await self.publish_prepared([job]))[0]

    async def publish_prepared(self, jobs: Sequence[NewJob]) -> list[str]:
        """:meth:`Queue.publish_prepared`: jobs made by ``Queue.prepare``. A call of one
        script call (up to 100 jobs of one partition) is sent here; a longer one, whose
        tags are checked for clashes first, is sent by the sync client in a thread."""
        if not jobs:
            return []
        q = self.queue
        if len(jobs) > PUBLISH_CHUNK or (
            q.partitions > 1 and len({partition_of(j.tag, q.partitions) for j in jobs}) > 1
        ):
            return await asyncio.to_thread(q.publish_prepared, jobs)
        q.ensure_layout()  # I/O only once per queue object, on a partitioned queue
        found = await self.run(q.shard_for(jobs[0].tag).publish(jobs))
        if found:  # one script call: all or nothing
            raise DuplicateJob([t for t, _ in found], [s for _, s in found])
        return [j.tag for j in jobs]

    # ------------------------------------------------------------------ one job

    async def rank(self, tag: str) -> int | None:
        """:meth:`Queue.rank`: position in line (0 = next), None unless ready."""
        q = self.queue
        shard = q.shard_for(_tag(tag))
        try:
            if q.partitions == 1:
                r: Any = await self.client.zrank(shard.keys.ready, tag)
                return None if r is None else int(r)
            pipe = self.client.pipeline(transaction=False)
            pipe.zscore(shard.keys.ready, tag)
            pipe.zrank(shard.keys.ready, tag)
            score, own = await pipe.execute()
            if score is None or own is None:
                return None
            return int(own) + await self._ahead(float(score), shard.index)
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc

    async def _ahead(self, score: float, index: int) -> int:
        pipe: Any = self.client.pipeline(transaction=False)
        queue_ahead(pipe, self.queue.shards, score, index)  # the tie rule of the sync side
        return sum(int(c) for c in await pipe.execute())

    async def score(self, tag: str) -> float | None:
        """:meth:`Queue.score`: the ready score, None unless ready."""
        try:
            s = await self.client.zscore(self.queue.keys_for(_tag(tag)).ready, tag)
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
        return None if s is None else float(s)

    async def state(self, tag: str) -> str | None:
        """:meth:`Queue.state`: ready, delayed, leased, dead, or None."""
        return await self.run(self.queue.state_call(tag))

    async def exists(self, tag: str) -> bool:
        """:meth:`Queue.exists`: ready, delayed, waiting for its parents or in flight."""
        return await self.state(tag) in ("ready", "delayed", "waiting", "leased")

    async def info(self, tag: str, *, with_body: bool = True) -> JobInfo | None:
        """:meth:`Queue.info`: everything known about one job, read atomically."""
        info = await self.run(self.queue.info_call(tag, with_body=with_body))
        if info is not None and info.rank is not None and self.queue.partitions > 1:
            assert info.score is not None
            ahead = await self._ahead(info.score, self.queue.shard_for(tag).index)
            info = JobInfo(**{**_fields(info), "rank": info.rank + ahead})
        return info

    async def result(self, tag: str) -> Any:
        """:meth:`Queue.result`: the kept result; ``LookupError`` when none is kept."""
        try:
            raw = await self.client.get(self.queue.keys_for(_tag(tag)).result(tag))
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
        if raw is None:
            raise LookupError(f"no result kept for job {tag!r} in queue {self.name!r}")
        return decode_result(raw, self.queue.keys_for(tag).result(tag))

    async def cancel(self, tag: str) -> bool:
        """:meth:`Queue.cancel`: cancel a job that waits or runs (``cancel.lua``); False
        when there is no such job, or it is dead."""
        ttl_ms = int(CANCELLED_TTL * 1000)
        reply = await self.run(self.queue.shard_for(_tag(tag)).cancel(tag, ttl_ms))
        done = reply in (CancelReply.WAITING, CancelReply.RUNNING)
        if done:  # a workflow job's end goes to its dependents now, as the sync cancel does
            await asyncio.to_thread(self.queue.settle_ends, [tag])
        return done

    async def signal(self, tag: str, name: str, payload: Any = None) -> bool:
        """:meth:`Queue.signal`: deliver event ``name`` to job ``tag`` (docs/durable.md)."""
        from .durable_calls import keep_ms, refused, signal_args, signal_call

        tag, name, data = signal_args(tag, name, payload)
        q = self.queue
        reply = await self.run(signal_call(q.shard_for(tag), tag, name, data, keep_ms(q)))
        refused(reply, q.name, tag, name)
        return reply is SignalReply.WOKEN

    async def cancelled(self, tag: str) -> CancelledJob | None:
        """:meth:`Queue.cancelled`: the record of a cancelled job while it is kept."""
        try:
            raw = await self.client.get(self.queue.keys_for(_tag(tag)).cancelled(tag))
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
        return read_cancelled(tag, raw)

    # ------------------------------------------------------------------ consuming

    async def claim(self, batch: int = 1, consumer: str = "") -> tuple[list[Message], float | None]:
        """:meth:`Queue.claim`: lease up to ``batch`` jobs now (round-robin over
        partitions), and the wait hint when none came."""
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise InvalidArgument(f"batch must be an int in [1, {MAX_BATCH}], got {batch!r}")
        q = self.queue
        q.ensure_layout()  # I/O only once per queue object, on a partitioned queue
        start = q.next_shard()
        msgs: list[Message] = []
        hints: list[int] = []
        for i in range(q.partitions):
            if len(msgs) >= batch:
                break
            shard = q.shards[(start + i) % q.partitions]
            want = batch - len(msgs)
            chunk = q.claim_chunk
            sizes = [min(chunk, want - j) for j in range(0, want, chunk)]
            got: list[Claimed] = await self.run_all([shard.claim(n, consumer) for n in sizes])
            for c in got:
                msgs.extend(c.messages)
                if c.hint_ms >= 0:
                    hints.append(c.hint_ms)
        return msgs, (None if msgs or not hints else min(hints) / 1000)

    async def ack(
        self,
        msg: Message,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        *,
        passed: Any = None,
    ) -> bool:
        """:meth:`Queue.ack`; False for a stale delivery. ``passed`` (JSON) is what a
        workflow job hands its dependents (docs/workflows.md)."""
        given = "" if passed is None else encode_body(passed).decode("utf-8")
        return await self.run(self.queue.ack_call(msg, result, result_ttl, passed=given))

    async def nack(
        self,
        msg: Message,
        error: str = "",
        retry_in: float | timedelta | None = None,
        *,
        dead: bool = False,
    ) -> NackResult:
        """:meth:`Queue.nack`: ``"retry"``, ``"dead"``, or None for a stale delivery."""
        return await self.run(self.queue.nack_call(msg, error, retry_in, dead=dead))

    async def release(self, msg: Message) -> bool:
        """:meth:`Queue.release`: back in line unrun, the attempt not counted."""
        return await self.run(self.queue.release_call(msg))

    async def touch(
        self,
        msg: Message,
        extend: float | None = None,
        progress: float | None = None,
        note: str = "",
    ) -> datetime | None:
        """:meth:`Queue.touch`: the new lease deadline, None for a stale delivery."""
        deadline = await self.run(self.queue.touch_call(msg, extend, progress, note))
        return from_ms(deadline) if deadline else None

    async def wait(self, seconds: float) -> bool:
        """:meth:`Queue.wait`: block up to ``seconds`` for a wake-up token."""
        return await wait_any(
            self.client, self.queue.notify_groups, min(seconds, self.queue.max_block)
        )


async def wait_any(client: aredis.Redis, groups: list[list[str]], seconds: float) -> bool:
    """Take a wake-up token from any list of ``groups`` (keys grouped by cluster slot),
    blocking up to ``seconds`` in all; True if one came."""
    if seconds <= 0:
        return False
    try:
        for group in groups:
            got = await client.blpop(group, timeout=max(0.01, seconds / len(groups)))
            if got is not None:
                return True
    except UNAVAILABLE_ERRORS as exc:
        raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
    return False


def _tag(tag: str) -> str:
    return validate.tag(tag)


def _fields(info: JobInfo) -> dict[str, Any]:
    return {f: getattr(info, f) for f in JobInfo.__dataclass_fields__}


_async_queues: dict[tuple[str, int], AsyncQueue] = {}


def get_async_queue(name: str = "default") -> AsyncQueue:
    """The configured queue ``name`` for asyncio code (on the running loop's client)."""
    from . import get_queue

    q = get_queue(name)
    key = (name, id(q))
    aq = _async_queues.get(key)
    if aq is None or aq.queue is not q:
        if len(_async_queues) > 256:  # queues of settings long gone
            _async_queues.clear()
        aq = _async_queues[key] = AsyncQueue(q)
    return aq


conf.on_reset(_async_queues.clear)
