"""What a running job knows about itself: :class:`JobContext`, and :func:`current_job`
in the thread that runs it.

Below the worker and the Django Tasks runner (both set it while a job runs), so that
``django_zqueue`` exports ``current_job`` without importing the worker.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from .queue import Message, Queue

_current = threading.local()


@dataclass
class JobContext:
    """What a running job knows about itself (``django_zqueue.current_job()``)."""

    message: Message
    queue: Queue
    task_name: str
    started: float = field(default_factory=time.monotonic)
    #: set by the worker when the job was cancelled (``Queue.cancel``) while it runs
    cancel_event: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def cancel_requested(self) -> bool:
        """True once the job was cancelled: stop cleanly (return) before the worker's
        grace period ends and it raises ``JobCancelled`` in the job."""
        return self.cancel_event.is_set()

    @property
    def id(self) -> str:
        return self.message.tag

    @property
    def attempt(self) -> int:
        return self.message.attempt

    def progress(self, value: float, note: str = "") -> None:
        """Record progress (0.0-1.0 and a short note) on the job record; extends the lease."""
        self.queue.touch(self.message, progress=value, note=note)


def current_job() -> JobContext | None:
    """The job running in this thread, or None outside a job."""
    job: JobContext | None = getattr(_current, "job", None)
    return job


def set_current_job(job: JobContext | None) -> None:
    """Make ``job`` the one running in this thread (None: no job); for the runners."""
    _current.job = job
