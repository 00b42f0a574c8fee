"""The capture of ``logging`` records into the log of the job that emits them
(``ZQUEUE["JOB_LOGS"]["LEVEL"]``, docs/admin.md, "Job logs").

With a level set, a worker installs one :class:`JobLogHandler` on the root logger while
it runs (:func:`capture`): a record of any logger, at that level or above, emitted in a
thread (or asyncio task) running a job, goes to that job's log, with its attempt
(``current_job().log``). Records emitted outside a job, and the package's own
(``django_zqueue.*``: the worker's lines about the job), are left to the other handlers.
Without a level no handler is installed: a record costs nothing more."""

from __future__ import annotations

import logging
import threading
from contextvars import ContextVar

from .context import current_job

#: a line being written: a record emitted meanwhile (by the write) is not captured
_writing: ContextVar[bool] = ContextVar("zqueue_job_log_writing", default=False)
_lock = threading.Lock()
_installed: list[JobLogHandler] = []  # the one installed handler, while any worker runs
_users = [0]  # how many running workers asked for it


class JobLogHandler(logging.Handler):
    """Sends the records emitted inside a running job to its log."""

    def emit(self, record: logging.LogRecord) -> None:
        job = current_job()
        if job is None or _writing.get() or record.name.startswith("django_zqueue"):
            return
        token = _writing.set(True)
        try:
            message = record.getMessage()
            if record.exc_info:
                message = f"{message}\n{logging.Formatter().formatException(record.exc_info)}"
            job.log(message, record.levelname)
        except Exception:  # a log line must never fail the job
            self.handleError(record)
        finally:
            _writing.reset(token)


def capture(level: int | None) -> bool:
    """Install the handler on the root logger at ``level`` (once for all the workers
    of the process); None: nothing. True when this call counts as a user of it (give
    it back with :func:`release`)."""
    if level is None:
        return False
    with _lock:
        if not _installed:
            handler = JobLogHandler(level)
            logging.getLogger().addHandler(handler)
            _installed.append(handler)
        _users[0] += 1
    return True


def release() -> None:
    """One user of the handler less; the last one removes it."""
    with _lock:
        _users[0] = max(0, _users[0] - 1)
        if _users[0] == 0 and _installed:
            logging.getLogger().removeHandler(_installed.pop())


def installed() -> bool:
    """Whether the handler is installed (for the tests and the doctor)."""
    return bool(_installed)
