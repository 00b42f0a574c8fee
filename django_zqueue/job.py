""":class:`Job`: a handle on one enqueued call (what ``Task.enqueue`` returns), to follow
it: its rank and score while it waits, its status, an ETA, its result, a cancel, the URL
of its position for the person waiting on it; each also from asyncio code (``arank`` ...).

::

    job = send_welcome.enqueue(user)
    job.rank(); job.score(); job.status(); job.eta()
    job.cancel(); job.wait(timeout=5)
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .queue import JobInfo, Queue, get_queue
from .queue.durable_calls import ParkedFor
from .queue.durable_calls import parked as queued_for
from .watch import DEFAULT_MAX_AGE, position_url

if TYPE_CHECKING:
    from .queue.aio import AsyncQueue


T = TypeVar("T")


def poll(read: Callable[[], T], timeout: float, interval: float) -> T:
    """``read()`` until it stops raising ``LookupError`` (a result not there yet), for up to
    ``timeout`` seconds, sleeping ``interval`` between tries; then its last error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return read()
        except LookupError:
            if time.monotonic() > deadline:
                raise
            time.sleep(interval)


@dataclasses.dataclass(frozen=True)
class Job:
    """A handle on one enqueued call: ``id`` (its tag in the queue) and ``queue``."""

    id: str
    queue_name: str
    task_name: str = ""

    @property
    def queue(self) -> Queue:
        return get_queue(self.queue_name)

    def rank(self) -> int | None:
        """Position in line (0 = next); None unless waiting ready."""
        return self.queue.rank(self.id)

    def score(self) -> float | None:
        return self.queue.score(self.id)

    def exists(self) -> bool:
        """True while ready, delayed, waiting for its parents (a workflow) or running."""
        return self.queue.exists(self.id)

    def info(self) -> JobInfo | None:
        return self.queue.info(self.id)

    def status(self) -> str:
        """``ready``, ``waiting`` (for its parents: a workflow), ``delayed``, ``sleeping``
        (a durable sleep), ``waiting_for_event`` (a durable wait: :meth:`parked` says until
        when), ``running``,
        ``dead``, ``expired`` (not started before its expiry), ``finished`` (a result is
        kept), ``cancelled`` (its cancel record is kept), or ``unknown`` (finished without
        a kept result, or never published: e.g. its transaction rolled back)."""
        state = self.queue.state(self.id)
        if state == "leased":
            return "running"
        if state == "delayed":
            parked = queued_for(self.queue, self.id)
            return parked.status if parked is not None else state
        if state is not None:
            return state
        try:
            self.queue.result(self.id)
        except LookupError:
            return "cancelled" if self.queue.cancelled(self.id) is not None else "unknown"
        return "finished"

    def eta(self) -> float | None:
        """Estimated seconds until this job finishes: (rank + 1) x mean run time / live
        worker threads, from the queue's counters. An estimate, not a promise; None when the
        job is not waiting ready or nothing has run yet to measure."""
        rank = self.rank()
        if rank is None:
            return None
        q = self.queue
        stats = q.stats()
        done, run_ms = stats.get("acked", 0), stats.get("run_ms", 0)
        if not done:
            return None
        threads = max(1, q.live_threads())
        return (rank + 1) * (run_ms / done / 1000) / threads

    def position_url(self, *, user: Any = None, max_age: int = DEFAULT_MAX_AGE) -> str:
        """The URL of this job's position for the person waiting on it (JSON, long-poll):
        a signed token valid ``max_age`` seconds, for ``user`` only when given. Needs
        ``django_zqueue.urls`` in the site's URLconf (see docs/position.md)."""
        return position_url(self.queue_name, self.id, user=user, max_age=max_age)

    def cancel(self) -> bool:
        """Cancel the job while it waits or runs (:meth:`Queue.cancel_job
        <django_zqueue.queue.Queue.cancel_job>`); False when it is dead or gone."""
        return self.queue.cancel(self.id)

    def signal(self, name: str, payload: Any = None) -> bool:
        """Deliver event ``name`` (with ``payload``, JSON) to this job's
        ``durable.wait_for(name)`` (:meth:`Queue.signal
        <django_zqueue.queue.Queue.signal>`): True when it woke the job, False when the
        event is kept until the job gets there; ``SignalRefused`` when the job is gone or
        ended, the event was delivered already, or the wait timed out."""
        return self.queue.signal(self.id, name, payload)

    def parked(self) -> ParkedFor | None:
        """What the job is parked for (a durable sleep, or a wait for an event, and until
        when), None when it is not parked."""
        return queued_for(self.queue, self.id)

    async def asignal(self, name: str, payload: Any = None) -> bool:
        """:meth:`signal` from asyncio code."""
        return await self.aqueue.signal(self.id, name, payload)

    def result(self) -> Any:
        """The return value, when the task has ``store_result=True`` and has finished;
        ``LookupError`` otherwise."""
        return self.queue.result(self.id)

    # ------------------------------------------------------------------ from asyncio code

    @property
    def aqueue(self) -> AsyncQueue:
        from .queue.aio import get_async_queue

        return get_async_queue(self.queue_name)

    async def arank(self) -> int | None:
        """:meth:`rank` from asyncio code."""
        return await self.aqueue.rank(self.id)

    async def ascore(self) -> float | None:
        """:meth:`score` from asyncio code."""
        return await self.aqueue.score(self.id)

    async def aexists(self) -> bool:
        """:meth:`exists` from asyncio code."""
        return await self.aqueue.exists(self.id)

    async def ainfo(self) -> JobInfo | None:
        """:meth:`info` from asyncio code."""
        return await self.aqueue.info(self.id)

    async def astatus(self) -> str:
        """:meth:`status` from asyncio code."""
        aq = self.aqueue
        state = await aq.state(self.id)
        if state == "delayed":
            parked = await asyncio.to_thread(queued_for, self.queue, self.id)
            return parked.status if parked is not None else state
        if state is not None:
            return "running" if state == "leased" else state
        try:
            await aq.result(self.id)
        except LookupError:
            return "cancelled" if await aq.cancelled(self.id) is not None else "unknown"
        return "finished"

    async def acancel(self) -> bool:
        """:meth:`cancel` from asyncio code."""
        return await self.aqueue.cancel(self.id)

    async def aresult(self) -> Any:
        """:meth:`result` from asyncio code."""
        return await self.aqueue.result(self.id)

    async def await_result(self, timeout: float = 10.0, interval: float = 0.05) -> Any:
        """:meth:`wait` from asyncio code: poll for the result without blocking the loop."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return await self.aresult()
            except LookupError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(interval)

    def wait(self, timeout: float = 10.0, interval: float = 0.05) -> Any:
        """Poll for the result for up to ``timeout`` seconds (for scripts and tests)."""
        return poll(self.result, timeout, interval)
