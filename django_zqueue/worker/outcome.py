"""How one run of a job ended, as the worker reports it to Redis: a :class:`Success` is
acked (``ack.lua``, keeping its result), a :class:`Failure` nacked (``nack.lua``: retried
after ``retry_in`` seconds, or dead), a :class:`Released` (the job never ran: an outage
before its function was called) given back (``release.lua``, no attempt used).

Both runners return one: the worker's for registered tasks
(:mod:`django_zqueue.worker.runner`) and the Django Tasks runner
(:mod:`django_zqueue.worker.django_tasks`). The worker sends the outcomes of finished jobs in
one round trip with its next claim, then acts on the replies: a failure hook for a job
the nack buried, the record of a Django task (:class:`TaskRecord`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from .. import signals
from ..events import kv, log, send
from ..exceptions import IterationPaused, Parked
from ..queue import NO_RESULT
from ..tasks.context import JobContext

if TYPE_CHECKING:
    from ..tasks.task import Task

#: a task's ``on_failure``, called as ``on_failure(job, exc)`` once the job is dead
FailureHook: TypeAlias = Callable[[JobContext, BaseException | None], object]


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """The result record of a Django task's run (see :mod:`~django_zqueue.worker.django_tasks`),
    stored or announced once the outcome was sent."""

    data: dict[str, Any]
    ttl: float  # seconds the record is kept (the backend's RESULT_TTL)
    signalled: bool = False  # task_finished already sent (a failure known to be final)


class Success(NamedTuple):
    """The job ran: ack it, keeping ``result`` for ``result_ttl`` seconds. (A NamedTuple:
    one is made per job on the worker's hot path, at a fraction of a dataclass's cost.)"""

    result_ttl: float
    run_ms: int  # the run's duration, added to the queue's run_ms counter
    finished: float  # monotonic end of the run
    result: Any = NO_RESULT  # NO_RESULT: nothing is kept
    record: TaskRecord | None = None  # a Django task's record (the result itself)
    passed: str = ""  # a workflow job's result for its dependents (JSON; '' = null)


@dataclass(frozen=True, slots=True)
class Failure:
    """The job failed: nack it, retried in ``retry_in`` seconds while attempts are left,
    or dead at once with ``dead`` (a rerun cannot help)."""

    error: str  # kept as the job's last error (the traceback)
    retry_in: float
    dead: bool
    context: JobContext
    exception: BaseException | None = None  # None: the job never ran (unknown task...)
    on_failure: FailureHook | None = None  # called when the nack buried the job
    finished: float = field(default_factory=time.monotonic)
    record: TaskRecord | None = None  # a Django task's record, stored after the nack


@dataclass(frozen=True, slots=True)
class Released:
    """The job did not run: what its function needs first (a workflow job's passed
    results) could not be read for an outage. It is given back (``release.lua``): back
    in line at its place, the attempt not counted, run once Redis answers again."""

    error: str  # why, for the log line
    context: JobContext
    finished: float = field(default_factory=time.monotonic)
    record: TaskRecord | None = None  # (never one: a released job has no result)


@dataclass(frozen=True, slots=True)
class ParkedRun:
    """The run ended parked (``durable.sleep``, ``durable.wait_for``): ``park.lua`` put
    the job in delayed already, without using an attempt. Nothing is to be sent."""

    on: str  # what it waits for: "z:<name>" (a sleep) or "w:<name>" (an event)
    wake_ms: int  # when it runs again at the latest, ms on Redis TIME
    context: JobContext
    finished: float = field(default_factory=time.monotonic)
    record: TaskRecord | None = None  # (never one)


Outcome: TypeAlias = Success | Failure | Released | ParkedRun


def parked(ctx: JobContext, exc: Parked) -> ParkedRun:
    """The outcome of a run that ``exc`` ended parked; logged (``job_parked``)."""
    log.info(
        kv(event="job_parked", queue=ctx.queue.name, job=ctx.id, on=exc.field, wake=exc.wake_ms)
    )
    return ParkedRun(exc.field, exc.wake_ms, ctx)


def paused(ctx: JobContext, exc: IterationPaused) -> Released:
    """The outcome of a run ``durable.iterate`` ended between two items (its cursor
    recorded): given back to its place in line, the attempt not counted; logged
    (``job_paused``)."""
    log.info(
        kv(
            event="job_paused",
            queue=ctx.queue.name,
            job=ctx.id,
            at=exc.name,
            done=exc.done,
            why=exc.why,
        )
    )
    return Released(f"paused after {exc.done} items of {exc.name!r} ({exc.why})", ctx)


def released(ctx: JobContext, exc: BaseException) -> Released:
    """The job ``ctx``, not run because of the outage ``exc``, to be given back; logged
    (``job_released``), no signal (the job did not fail)."""
    msg = ctx.message
    error = describe(exc)
    log.warning(
        kv(
            event="job_released",
            queue=ctx.queue.name,
            job=msg.tag,
            task=ctx.task_name,
            attempt=msg.attempt,
            error=error.splitlines()[0][:200] if error else "",
        )
    )
    return Released(error, ctx)


def failed(
    ctx: JobContext,
    task: Task[..., Any] | None,
    error: str,
    exc: BaseException | None,
    *,
    dead: bool,
) -> Failure:
    """The Failure of a run, announced: ``job_failed`` signal and a ``job_failed`` log
    line. Its retry delay is the task's backoff, else the queue's, for this attempt."""
    queue, msg = ctx.queue, ctx.message
    will_retry = not dead and msg.attempt <= msg.max_retries
    backoff = (task.retry_backoff if task is not None else None) or queue.options.retry_backoff
    send(
        signals.job_failed,
        sender=task,
        job=ctx,
        exception=exc,
        traceback=error,
        will_retry=will_retry,
    )
    # a final failure (dead) at ERROR, which alerting keys on; a failure to retry at WARNING
    log.log(
        logging.WARNING if will_retry else logging.ERROR,
        kv(
            event="job_failed",
            queue=queue.name,
            job=msg.tag,
            task=ctx.task_name,
            attempt=msg.attempt,
            retry=will_retry,
            error=error.splitlines()[0][:200],
        ),
    )
    return Failure(
        error=error,
        retry_in=backoff.delay(msg.attempt),
        dead=dead,
        context=ctx,
        exception=exc,
        on_failure=task.on_failure if task is not None else None,
    )


def describe(exc: BaseException) -> str:
    """``module.Class: message`` of an exception, as a job's error starts."""
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
