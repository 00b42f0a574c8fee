"""What a running job knows about itself: :class:`JobContext`, and :func:`current_job`
in the thread (or, for an ``async def`` task, the asyncio task) that runs it.

Below the worker and the Django Tasks runner (both set it while a job runs), so that
``django_zqueue`` exports ``current_job`` without importing the worker.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..queue import Message, Queue

# a context variable: each thread has its own context, and so has each asyncio task (a
# copy of its creator's), so concurrent coroutines on one loop each see their own job
_current: ContextVar[JobContext | None] = ContextVar("zqueue_current_job", default=None)


@dataclass
class JobContext:
    """What a running job knows about itself (``django_zqueue.current_job()``)."""

    message: Message
    queue: Queue
    task_name: str
    started: float = field(default_factory=time.monotonic)
    #: set by the worker when the job was cancelled (``Queue.cancel``) while it runs (a
    #: plain flag, read by the job's thread: no lock or event to make per job)
    cancelled: bool = field(default=False, repr=False)
    #: the run's durable records (``django_zqueue.tasks.durable``), read at its first durable call
    records: Any = field(default=None, repr=False)
    #: the worker's stop (a ``threading.Event``), set on SIGTERM: ``durable.iterate``
    #: stops between items (None outside a worker's thread)
    stopping: Any = field(default=None, repr=False)

    @property
    def stop_requested(self) -> bool:
        """True once the worker running the job is stopping (SIGTERM, a recycle)."""
        return self.stopping is not None and bool(self.stopping.is_set())

    @property
    def cancel_requested(self) -> bool:
        """True once the job was cancelled: stop cleanly (return) before the worker's
        grace period ends and it raises ``JobCancelled`` in the job."""
        return self.cancelled

    def request_cancel(self) -> None:
        """Tell the running job it was cancelled (:attr:`cancel_requested`)."""
        self.cancelled = True

    @property
    def id(self) -> str:
        return self.message.tag

    @property
    def attempt(self) -> int:
        return self.message.attempt

    def progress(self, value: float, note: str = "") -> None:
        """Record progress (0.0-1.0 and a short note) on the job record; extends the lease."""
        self.queue.touch(self.message, progress=value, note=note)

    async def aprogress(self, value: float, note: str = "") -> None:
        """:meth:`progress` from an ``async def`` task (without blocking its loop)."""
        from ..queue.aio import get_async_queue

        await get_async_queue(self.queue.name).touch(self.message, progress=value, note=note)


def current_job() -> JobContext | None:
    """The job running in this thread (or asyncio task), or None outside a job."""
    return _current.get()


def set_current_job(job: JobContext | None) -> None:
    """Make ``job`` the one running in this thread (None: no job); for the runners."""
    _current.set(job)
