"""Exceptions raised by django_zqueue.

Every error the package raises derives from :class:`ZQueueError`. Errors about bad input
also derive from the matching builtin (``ValueError``, ``TypeError``, ``LookupError``) so
callers that already catch those keep working.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ImproperlyConfigured


class ZQueueError(Exception):
    """Base class of every django_zqueue error.

    An error that stopped a publish of many jobs cut into several script calls
    (``publish_many``, ``enqueue_many``, ``Queue.publish_prepared``) tells what it wrote:
    ``published``, the tags written (in the order given); ``unconfirmed``, the tags sent
    in a round trip that got no answer (written or not). Both are empty otherwise."""

    published: Sequence[str] = ()
    unconfirmed: Sequence[str] = ()


class ConfigurationError(ZQueueError, ImproperlyConfigured):
    """``settings.ZQUEUE`` is invalid. ``manage.py check`` reports the same problems."""


class UnknownQueue(ZQueueError, LookupError):
    """A queue name that is not configured in ``ZQUEUE["QUEUES"]``."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(
            f"unknown queue {name!r}; configured queues: {', '.join(sorted(known)) or '(none)'}"
        )


class InvalidArgument(ZQueueError, ValueError):
    """An argument is out of range or malformed. Nothing was written to Redis."""


class PayloadTooLarge(InvalidArgument):
    """The encoded body is larger than the queue's ``max_payload_bytes``."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"encoded payload is {size} bytes; the queue allows {limit}")


class DuplicateJob(ZQueueError):
    """A job with this tag already exists (waiting, delayed, in flight or dead).

    Nothing was overwritten. ``tags`` lists every clashing tag; ``published`` lists tags
    of the same ``publish_many`` call that *were* written (only possible when another
    client published a clashing tag concurrently, between the check and the write of a
    later chunk).
    """

    def __init__(
        self, tags: list[str], states: list[str], published: list[str] | None = None
    ) -> None:
        self.tags = tags
        self.states = states
        self.published = published or []
        shown = ", ".join(f"{t!r} ({s})" for t, s in zip(tags[:5], states[:5], strict=False))
        more = f" and {len(tags) - 5} more" if len(tags) > 5 else ""
        super().__init__(f"job tag already in use: {shown}{more}")

    @property
    def tag(self) -> str:
        return self.tags[0]


class QueueFull(ZQueueError):
    """The queue already holds its ``max_length`` waiting jobs (ready and delayed), or a
    job's group in a fair queue its ``group_max_length`` (the message names the group),
    so the publish was refused and wrote nothing: retry later, or raise the limit.
    ``published`` lists the tags of the same ``publish_many`` call that *were* written
    (only possible when the call spans several script calls and other clients filled
    the queue between its check and a later chunk)."""

    code = "ZQ_QUEUE_FULL"

    def __init__(self, message: str, published: list[str] | None = None) -> None:
        self.published = published or []
        super().__init__(message)


class QueueUnavailable(ZQueueError):
    """Redis could not be reached (connection refused, timed out, or dropped).

    The original redis-py exception is chained as ``__cause__``.
    """


class RedisFull(ZQueueError):
    """Redis refused a write: its memory is at ``maxmemory`` (an ``OOM`` reply). The
    message says how to fix it; the redis-py exception is the ``__cause__``."""


class PartitionMismatch(ConfigurationError):
    """The queue's ``partitions`` option differs from the layout its jobs were written with.

    Drain the queue (or ``Queue.clear()`` it) before changing ``partitions``."""

    def __init__(self, queue: str, recorded: int | None, configured: int) -> None:
        self.queue = queue
        self.recorded = recorded
        self.configured = configured
        super().__init__(
            f"queue {queue!r} is configured with partitions={configured} but its jobs in "
            f"Redis use partitions={recorded}; drain or clear the queue before changing "
            "'partitions' (nothing was written)"
        )


class CorruptResult(ZQueueError, ValueError):
    """A job's kept result in Redis is not JSON (a hand edit, a bug, another program
    writing the key): it cannot be read; the message names the key."""


class ScriptError(ZQueueError):
    """A script refused a call or failed: a bug, not an outage (``code``: the script's
    ``ZQ_*`` error, see ``scripts.ERRORS``).

    Every script checks its arguments and records before its first write, so such a
    failure has written nothing. The worker and the scanner report it as what it is and
    retry with backoff."""

    code = "ZQ_SCRIPT"


class SequenceExhausted(ScriptError):
    """The queue (or partition) has used all 2^42 sequence numbers of strict priority
    mode. Switch the queue to ``priority_mode: "aging"`` or clear it."""

    code = "ZQ_SEQUENCE_EXHAUSTED"


class CorruptKey(ScriptError):
    """A key of the queue holds another type than its name says, or a counter that is not
    a number: the script refused the call before writing anything. The message names the
    key; ``manage.py zqueue_doctor --repair`` says what it can repair."""

    code = "ZQ_CORRUPT_KEY"


class ProtocolError(ScriptError):
    """A function of the wire protocol (docs/protocol.md) refused a call before writing
    anything (``ZQ_PROTOCOL``): another protocol version, keys that are not one queue's,
    or a queue not set up for producers (``manage.py zqueue_protocol``)."""

    code = "ZQ_PROTOCOL"


class ScriptArgumentError(ScriptError, InvalidArgument):
    """A script refused an argument out of its bounds (``ZQ_BAD_ARGUMENT``); the Python
    side checks the same bounds first, so this means a caller went around it."""

    code = "ZQ_BAD_ARGUMENT"


class JobTimeout(ZQueueError):
    """Raised inside a job that ran past its task's ``timeout``."""


class JobCancelled(ZQueueError):
    """Raised inside a job that was cancelled while it ran (``job.cancel()``) and had not
    stopped by itself within the worker's ``cancel_grace``; on the event-loop lane, the
    reason its coroutine was cancelled."""


# Their documented names, as a job's last error shows them ("django_zqueue.worker.JobTimeout"):
# django_zqueue.worker exports both.
JobTimeout.__module__ = "django_zqueue.worker"
JobCancelled.__module__ = "django_zqueue.worker"


class StepError(InvalidArgument):
    """A durable step, sleep or wait (``django_zqueue.tasks.durable``) that cannot be recorded:
    called outside a job, a name used twice in one run, a result that is not JSON or too
    big, too many records for one job. Nothing was written."""


class StaleDelivery(ZQueueError):
    """A durable record refused: this run's lease is no longer the job's (it ran out and
    the job was handed to another worker, or it was cancelled). The run should stop; its
    outcome is refused as stale too."""


class TimedOut(ZQueueError):
    """``durable.wait_for``: the event did not come before the wait's timeout."""


class SignalRefused(ZQueueError, LookupError):
    """``Queue.signal``: no such job (gone, or ended), or the event was already delivered
    to it, or its wait for the event timed out. Nothing was written."""


class JobEnded(ZQueueError, LookupError):
    """``Job.wait``, ``Job.await_result``, ``Workflow.wait``: the job ended with no result to
    wait for: ``state`` is ``dead``, ``expired``, ``cancelled``, or ``succeeded`` (or
    ``gone``: no longer in the queue) when it kept none (its task has no
    ``store_result=True``). ``last_error`` is its last attempt's error (None when it has
    none); the message gives its first line. A ``LookupError``, as the wait raised
    before."""

    def __init__(
        self, queue: str, tag: str, state: str, last_error: str | None, message: str
    ) -> None:
        self.queue = queue
        self.tag = tag
        self.state = state
        self.last_error = last_error
        super().__init__(message)


class IterationPaused(BaseException):
    """Ends a run between two items of ``durable.iterate``, its cursor recorded: the
    worker is stopping, or the run passed the iteration's ``max_runtime``. The worker
    gives the job back to its place in line (no attempt used) and the next run resumes
    after the last item done. A ``BaseException``, so that a task's ``except Exception``
    does not stop it."""

    def __init__(self, name: str, done: int, why: str) -> None:
        super().__init__(name, done, why)
        self.name = name
        self.done = done  # items done by the job so far (all runs)
        self.why = why  # "stopping" or "max_runtime"


class Parked(BaseException):
    """Ends a run parked by ``durable.sleep`` or ``durable.wait_for``: the job waits in
    Redis (no attempt used) and its worker sends nothing. A ``BaseException``, so that a
    task's ``except Exception`` does not stop it."""

    def __init__(self, field: str, wake_ms: int) -> None:
        super().__init__(field, wake_ms)
        self.field = field
        self.wake_ms = wake_ms
