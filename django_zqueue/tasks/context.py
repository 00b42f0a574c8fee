"""What a running job knows about itself: :class:`JobContext`, and :func:`current_job`
in the thread (or, for an ``async def`` task, the asyncio task) that runs it.

Below the worker and the Django Tasks runner (both set it while a job runs), so that
``django_zqueue`` exports ``current_job`` without importing the worker.
"""

from __future__ import annotations

import logging
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .. import conf
from ..events import kv
from ..exceptions import InvalidArgument
from ..queue import Message, Queue

# a context variable: each thread has its own context, and so has each asyncio task (a
# copy of its creator's), so concurrent coroutines on one loop each see their own job
_current: ContextVar[JobContext | None] = ContextVar("zqueue_current_job", default=None)

log = logging.getLogger("django_zqueue.worker")

#: a job's log lines are written in batches (:meth:`JobContext.log`): a line said after
#: this long without a write goes at once, the others with the next such line, at most
#: this many lines at a time, with :meth:`JobContext.progress`, and at the job's end
LOG_FLUSH_SECONDS = 1.0
LOG_FLUSH_LINES = 100


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
    #: the worker's stop event (set on SIGTERM or a recycle), when the worker gives one
    stopping: threading.Event | None = field(default=None, repr=False)
    #: log lines said and not yet written: (attempt, ms, level, text)
    _log_lines: list[tuple[int, int, str, str]] = field(default_factory=list, repr=False)
    #: time.monotonic() of the last write of log lines (0: none yet)
    _log_flushed: float = field(default=0.0, repr=False)

    @property
    def stop_requested(self) -> bool:
        """True once the worker running the job is stopping: a long job may end its run
        between two units of work (``durable.iterate`` does) and be given back."""
        return self.stopping is not None and self.stopping.is_set()

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
        """Record progress (0.0-1.0 and a short note) on the job record; extends the
        lease. Log lines said before it are written first."""
        self.flush_log()
        self.queue.touch(self.message, progress=value, note=note)

    def log(self, text: str, level: str = "INFO") -> None:
        """Add a line to this job's log, kept with this attempt (``Queue.read.log(tag)``,
        the admin's job page). Lines are written in batches: a line said after a quiet
        second at once (one round trip), the ones right after it with the next line a
        second later, with :meth:`progress`, or when the job ends (before its outcome is
        recorded): no write for a job that says nothing. Bounded by
        ``ZQUEUE["JOB_LOGS"]``: a line past ``MAX_LINE_BYTES`` is cut, the oldest lines
        past ``MAX_LINES`` are dropped, each with a marker."""
        if not isinstance(text, str) or not isinstance(level, str) or not level:
            raise InvalidArgument("log takes a str text and a level name")
        now = time.monotonic()
        self._log_lines.append((self.attempt, int(time.time() * 1000), level[:20], text))
        if now - self._log_flushed >= LOG_FLUSH_SECONDS or len(self._log_lines) >= LOG_FLUSH_LINES:
            self.flush_log()

    def flush_log(self) -> None:
        """Write the log lines said and not yet written (one round trip; nothing when
        there are none). A failed write is logged, and its lines are lost: a log line
        never fails the job."""
        lines = self._log_lines
        if not lines:
            return
        self._log_lines = []
        self._log_flushed = time.monotonic()
        o = conf.get_config().job_logs
        try:
            self.queue.engine.joblogs.append(
                self.message.tag, lines, max_lines=o.max_lines, max_line_bytes=o.max_line_bytes
            )
        except Exception as exc:
            log.warning(
                kv(event="job_log_not_written", job=self.id, lines=len(lines), error=str(exc)[:200])
            )

    async def alog(self, text: str, level: str = "INFO") -> None:
        """:meth:`log` from an ``async def`` task: its round trip runs in a thread, so
        the loop goes on meanwhile."""
        import asyncio

        await asyncio.to_thread(self.log, text, level)

    def stream(self, chunk: str) -> str:
        """Stream a chunk of output to the person waiting on this job (``Job.stream``,
        the position endpoint's stream): a non-empty str of at most 64 KiB, kept in
        order with the others (at most 10,000, the oldest dropped past it) for an hour
        after the last. Its id. One round trip."""
        return self.queue.engine.jobstreams.append(self.message.tag, chunk)

    async def astream(self, chunk: str) -> str:
        """:meth:`stream` from an ``async def`` task (the round trip in a thread)."""
        import asyncio

        return await asyncio.to_thread(self.stream, chunk)

    async def aprogress(self, value: float, note: str = "") -> None:
        """:meth:`progress` from an ``async def`` task (without blocking its loop)."""
        from ..queue.aio import get_async_queue

        await get_async_queue(self.queue.name).touch(self.message, progress=value, note=note)


def current_job() -> JobContext | None:
    """The job running in this thread (or asyncio task), or None outside a job."""
    return _current.get()


def set_current_job(job: JobContext | None) -> None:
    """Make ``job`` the one running in this thread (None: no job); for the runners. The
    job it replaces writes its log lines not yet written (:meth:`JobContext.flush_log`):
    a runner clears the job when it ends, before its outcome is recorded."""
    before = _current.get()
    if before is not None and before is not job and before._log_lines:
        before.flush_log()
    _current.set(job)
