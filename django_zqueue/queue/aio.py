"""The queue from asyncio code: :class:`AsyncQueue`, on redis-py's asyncio client.

The same scripts, the same typed calls: an :class:`AsyncQueue` wraps a
:class:`~django_zqueue.queue.Queue`, which validates input, and its engine, which routes
each job to its shard and builds every script call (:class:`~django_zqueue.engine.scripts.Call`,
its keys, arguments and the reading of its reply); only the sending is asynchronous, by
the engine's second transport (:class:`~django_zqueue.engine.aio.AsyncEngine`). So a job
published from an async view is the same job a sync caller would publish, in the same
queue.

::

    aq = get_async_queue("default")
    tag = await aq.publish({"x": 1})
    await aq.rank(tag); await aq.state(tag); await aq.result(tag)

The asyncio client is the running loop's
(:func:`~django_zqueue.engine.redis.aconnection.get_async_client`) for a queue of the
settings; a :class:`Queue` built on a client of its own needs an
asyncio client given with it (``AsyncQueue(queue, client=...)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .. import conf
from ..engine import NO_RESULT
from ..engine.aio import AsyncClient, AsyncEngine
from ..engine.records import JobInfo, Message, NackResult, NewJob, validate
from ..engine.scripts.replies import SignalReply
from ..exceptions import DuplicateJob, InvalidArgument
from .consume import MAX_BATCH
from .control import CANCELLED_TTL, CancelledJob
from .core import Queue

T = TypeVar("T")


class AsyncQueue:
    """``queue`` (a :class:`Queue`) from asyncio code. Every method is a coroutine and
    means what the :class:`Queue` method of the same name means (same checks, same
    exceptions, same scripts); connection errors are :class:`QueueUnavailable`. The
    script calls are the queue's engine's; ``engine`` (an
    :class:`~django_zqueue.engine.aio.AsyncEngine`) sends them on the asyncio client. The
    sync methods not mirrored here (``publish``'s ``debounce``, ``unique_for`` and
    ``depends_on``, the operator calls) run on the sync client, e.g. in
    ``asyncio.to_thread``."""

    def __init__(self, queue: Queue, client: AsyncClient | None = None) -> None:
        self.queue = queue
        self.name = queue.name
        #: the queue's engine on the asyncio client
        self.engine = AsyncEngine(queue.engine, client)

    def __repr__(self) -> str:
        return f"<AsyncQueue {self.name!r}>"

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
        if not self.engine.fits_one_call(jobs):
            return await asyncio.to_thread(self.queue.publish_prepared, jobs)
        found = await self.engine.publish(jobs)
        if found:  # one script call: all or nothing
            raise DuplicateJob([t for t, _ in found], [s for _, s in found])
        return [j.tag for j in jobs]

    # ------------------------------------------------------------------ one job

    async def rank(self, tag: str, *, within_key: bool = False) -> int | None:
        """:meth:`Queue.rank`: position in line (0 = next), None unless ready;
        ``within_key=True``: the place among the waiting jobs of its ordering key."""
        if within_key:
            return await self.engine.rank_within_key(_tag(tag))
        return await self.engine.rank(_tag(tag))

    async def score(self, tag: str) -> float | None:
        """:meth:`Queue.score`: the ready score, None unless ready."""
        return await self.engine.score(_tag(tag))

    async def state(self, tag: str) -> str | None:
        """:meth:`Queue.state`: ready, delayed, leased, dead, or None."""
        return await self.engine.state(_tag(tag))

    async def exists(self, tag: str) -> bool:
        """:meth:`Queue.exists`: ready, delayed, waiting for its parents or in flight."""
        return await self.state(tag) in ("ready", "delayed", "waiting", "leased")

    async def info(self, tag: str, *, with_body: bool = True) -> JobInfo | None:
        """:meth:`Queue.info`: everything known about one job, read atomically."""
        return await self.engine.info(_tag(tag), with_body=with_body)

    async def result(self, tag: str) -> Any:
        """:meth:`Queue.result`: the kept result; ``LookupError`` when none is kept."""
        return await self.engine.result(_tag(tag))

    async def cancel(self, tag: str) -> bool:
        """:meth:`Queue.cancel`: cancel a job that waits or runs (``cancel.lua``); False
        when there is no such job, or it is dead."""
        # a workflow job's end goes to its dependents now, as the sync cancel does
        return await self.engine.cancel(_tag(tag), int(CANCELLED_TTL * 1000))

    async def signal(self, tag: str, name: str, payload: Any = None) -> bool:
        """:meth:`Queue.signal`: deliver event ``name`` to job ``tag`` (docs/durable.md)."""
        from .durable_calls import refused, signal_args

        tag, name, data = signal_args(tag, name, payload)
        reply = await self.engine.signal(tag, name, data)
        refused(reply, self.queue.name, tag, name)
        return reply is SignalReply.WOKEN

    async def cancelled(self, tag: str) -> CancelledJob | None:
        """:meth:`Queue.cancelled`: the record of a cancelled job while it is kept."""
        return await self.engine.cancelled(_tag(tag))

    # ------------------------------------------------------------------ consuming

    async def claim(self, batch: int = 1, consumer: str = "") -> tuple[list[Message], float | None]:
        """:meth:`Queue.claim`: lease up to ``batch`` jobs now (round-robin over
        partitions), and the wait hint when none came."""
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise InvalidArgument(f"batch must be an int in [1, {MAX_BATCH}], got {batch!r}")
        return await self.engine.claim(batch, consumer)

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
        return await self.engine.ack(msg, result, result_ttl, passed=passed)

    async def nack(
        self,
        msg: Message,
        error: str = "",
        retry_in: float | timedelta | None = None,
        *,
        dead: bool = False,
    ) -> NackResult:
        """:meth:`Queue.nack`: ``"retry"``, ``"dead"``, or None for a stale delivery."""
        return await self.engine.nack(msg, error, retry_in, dead=dead)

    async def release(self, msg: Message) -> bool:
        """:meth:`Queue.release`: back in line unrun, the attempt not counted."""
        return await self.engine.release(msg)

    async def touch(
        self,
        msg: Message,
        extend: float | None = None,
        progress: float | None = None,
        note: str = "",
    ) -> datetime | None:
        """:meth:`Queue.touch`: the new lease deadline, None for a stale delivery."""
        return await self.engine.touch(msg, extend, progress, note)

    async def wait(self, seconds: float) -> bool:
        """:meth:`Queue.wait`: block up to ``seconds`` for a wake-up token."""
        return await self.engine.wait(seconds)


def _tag(tag: str) -> str:
    return validate.tag(tag)


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
