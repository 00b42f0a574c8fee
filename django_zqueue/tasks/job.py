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
from typing import TYPE_CHECKING, Any

from ..engine.jobstreams import Chunk
from ..exceptions import JobEnded
from ..queue import JobInfo, Queue, get_queue
from ..queue.control import CancelledJob
from ..queue.durable_calls import ParkedFor
from ..queue.durable_calls import parked as queued_for
from . import registry
from .watch import DEFAULT_MAX_AGE, position_url

if TYPE_CHECKING:
    from ..queue.aio import AsyncQueue


#: the ends no result follows, as ``info`` names them
_NO_RESULT_ENDS = ("dead", "expired", "cancelled")
#: a pending result: the job has not ended yet (or its end is not known yet)
PENDING: Any = object()


def _first_line(text: str | None) -> str:
    return next((line for line in (text or "").splitlines() if line.strip()), "")


def _keeps_no_result(task_name: str) -> bool:
    """True when ``task_name`` is a registered task without ``store_result=True``."""
    found = registry.get(task_name) if task_name else None
    return found is not None and getattr(found, "store_result", None) is False


def no_result_coming(
    job: Job, info: JobInfo | None, cancelled: CancelledJob | None
) -> JobEnded | None:
    """Why no result can come for ``job`` (its :class:`JobEnded`), from what was read after
    its result was found missing: its ``info`` (None: not in the queue nor its history)
    and, when it is gone, its cancel record; None while one may still come."""
    what = f"job {job.id!r}" + (f" ({job.task_name})" if job.task_name else "")
    where = f"{what} in queue {job.queue_name!r}"
    if info is not None:
        if info.state in _NO_RESULT_ENDS:
            error = _first_line(info.last_error)
            why = f": {error}" if error else ""
            message = f"{where} ended {info.state}{why}; no result will come"
            return JobEnded(job.queue_name, job.id, info.state, info.last_error, message)
        if info.state == "succeeded" and not info.result_kept:
            message = (
                f"{where} succeeded but kept no result: a task keeps its return value only "
                "with @task(store_result=True) (for result_ttl seconds)"
            )
            return JobEnded(job.queue_name, job.id, "succeeded", info.last_error, message)
        return None
    if cancelled is not None:
        message = f"{where} was cancelled; no result will come"
        return JobEnded(job.queue_name, job.id, "cancelled", None, message)
    if _keeps_no_result(job.task_name):
        message = (
            f"{where} is not in the queue and kept no result: its task has no "
            "store_result=True, so a job of it that finished leaves none to wait for (or "
            "it was never published: its transaction rolled back)"
        )
        return JobEnded(job.queue_name, job.id, "gone", None, message)
    return None


@dataclasses.dataclass(frozen=True)
class Job:
    """A handle on one enqueued call: ``id`` (its tag in the queue) and ``queue``."""

    id: str
    queue_name: str
    task_name: str = ""

    @property
    def queue(self) -> Queue:
        return get_queue(self.queue_name)

    def rank(self, *, within_key: bool = False) -> int | None:
        """Position in line (0 = next); None unless waiting ready. ``within_key=True``:
        the place among the waiting jobs of its own ordering key, in the order they will
        run (:meth:`Queue.rank <django_zqueue.queue.Queue.rank>`)."""
        return self.queue.rank(self.id, within_key=within_key)

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

    def stream(self, after: str = "0", limit: int = 1000) -> list[Chunk]:
        """The chunks the job streamed (``current_job().stream``) after the cursor
        ``after`` ("0": from the start; else the ``id`` of the last chunk read), oldest
        first, at most ``limit`` (1 to 1,000): pass the last one's ``id`` to go on, with
        no gap and no duplicate. One round trip; empty when it streamed nothing (or its
        stream expired: an hour after its last chunk)."""
        return self.queue.engine.jobstreams.read(self.id, after, limit)

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
        from ..queue.aio import get_async_queue

        return get_async_queue(self.queue_name)

    async def arank(self, *, within_key: bool = False) -> int | None:
        """:meth:`rank` from asyncio code."""
        return await self.aqueue.rank(self.id, within_key=within_key)

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

    def settled(self) -> Any:
        """Its result when one is kept, :data:`PENDING` while one may still come;
        :class:`~django_zqueue.exceptions.JobEnded` when none can (it ended dead, expired
        or cancelled, or kept none). One round trip while a result is kept, up to three
        otherwise."""
        q = self.queue
        try:
            return q.result(self.id)
        except LookupError:
            pass
        info = q.info(self.id, with_body=False)
        cancelled = q.cancelled(self.id) if info is None else None
        ended = no_result_coming(self, info, cancelled)
        if ended is not None:
            raise ended
        return PENDING

    async def asettled(self) -> Any:
        """:meth:`settled` from asyncio code."""
        aq = self.aqueue
        try:
            return await aq.result(self.id)
        except LookupError:
            pass
        info = await aq.info(self.id, with_body=False)
        cancelled = await aq.cancelled(self.id) if info is None else None
        ended = await asyncio.to_thread(no_result_coming, self, info, cancelled)
        if ended is not None:
            raise ended
        return PENDING

    async def await_result(self, timeout: float = 10.0, interval: float = 0.05) -> Any:
        """:meth:`wait` from asyncio code: poll for the result without blocking the loop."""
        deadline = time.monotonic() + timeout
        while True:
            found = await self.asettled()
            if found is not PENDING:
                return found
            if time.monotonic() > deadline:
                return await self.aresult()  # its LookupError, or a result just kept
            await asyncio.sleep(interval)

    def wait(self, timeout: float = 10.0, interval: float = 0.05) -> Any:
        """Poll for the result for up to ``timeout`` seconds (for scripts and tests); then
        ``LookupError``. Raises :class:`~django_zqueue.exceptions.JobEnded` (a
        ``LookupError``) at once when no result can come: the job ended dead, expired or
        cancelled (the message gives the first line of its last error), or it finished
        keeping none (its task has no ``store_result=True``)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.settled()
            if found is not PENDING:
                return found
            if time.monotonic() > deadline:
                return self.result()  # its LookupError, or a result just kept
            time.sleep(interval)
