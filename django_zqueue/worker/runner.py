"""Running one claimed job in the calling consumer thread, to an
:class:`~django_zqueue.worker.outcome.Outcome`.

A job of a registered ``@task`` runs here: its arguments decoded, ``job_started`` /
``job_finished`` / ``job_failed`` sent, :func:`~django_zqueue.current_job` set, database
connections checked before and after (:mod:`~django_zqueue.worker.dbconn`, as Django does around
a request). A job of Django's Tasks framework runs in :mod:`django_zqueue.worker.django_tasks`.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import Any

from .. import signals
from ..engine.records.links import MAX_PASSED_BYTES, summary
from ..engine.redis.outages import is_unavailable
from ..events import kv, log, send
from ..exceptions import IterationPaused, JobCancelled, Parked
from ..queue import NO_RESULT, Message, Queue, encode_body, passed_ends
from ..tasks import tracing
from ..tasks.callcheck import misfit
from ..tasks.context import JobContext, set_current_job
from ..tasks.django_tasks.backend import MARKER
from ..tasks.serializer import MalformedPayload, ModelInstanceMissing, decode_call
from ..tasks.task import Task, registered
from . import dbconn
from . import django_tasks as backend_runner
from .coro import run_blocking, span_ended
from .isolation import run_isolated
from .leases import Leases
from .outcome import Failure, Outcome, Released, Success, describe, failed, parked, released


class Runner:
    """Runs jobs for worker ``worker_id``; a task's timeout is set on its lease in
    ``leases`` (the heartbeat enforces it)."""

    def __init__(
        self,
        worker_id: str,
        leases: Leases,
        pool: str = "thread",
        stopping: threading.Event | None = None,
    ) -> None:
        self.worker_id = worker_id
        #: the worker's stop, which a running job sees (``JobContext.stop_requested``)
        self.stopping = stopping
        self.leases = leases
        #: "process": every task runs in a child process (else only isolation="process")
        self.pool = pool
        #: whether runs get OpenTelemetry spans (asked once a second without a provider)
        self.spans = tracing.Switch()

    def run(self, queue: Queue, msg: Message) -> Outcome:
        """Run a job; a failure of the machinery around it (not of the task) still ends
        in a Failure (a nack), so the job is never left leased by a live worker."""
        try:
            return self._run(queue, msg)
        except Exception as exc:
            log.exception(kv(event="job_machinery_error", queue=queue.name, job=msg.tag))
            ctx = JobContext(msg, queue, "")
            error = f"worker error around the job: {type(exc).__name__}: {exc}\n"
            return failed(ctx, None, error + traceback.format_exc(), exc, dead=False)

    def _run(self, queue: Queue, msg: Message) -> Outcome:
        body = msg.body
        name = body.get("task") if isinstance(body, dict) else None
        if isinstance(body, dict) and MARKER in body and isinstance(name, str):
            return backend_runner.run(queue, msg, body, name, self.worker_id)
        task = registered(name) if isinstance(name, str) else None
        ctx = JobContext(msg, queue, name or "", stopping=self.stopping)
        if task is None:
            reason = (
                f"unknown task {name!r}: no task of that name is registered in this worker "
                "(a worker imports the tasks module of each installed app, <app>.tasks: a "
                "task defined in another module must be imported from its app's tasks.py)"
                if isinstance(name, str)
                else f"corrupt record: body is not a task call (undecodable payload: "
                f"{msg.raw_body[:200]!r})"
            )
            return failed(ctx, None, reason, None, dead=True)
        isolated = (task.isolation or self.pool) == "process"
        # the heartbeat interrupts a thread past its task's timeout; an isolated job's child
        # is killed instead (run_isolated), and an async task's timeout is asyncio.timeout's
        # (coro.run_blocking)
        no_limit = isolated or task.is_async
        self.leases.attach(queue, msg, ctx, None if no_limit else task.timeout)
        if not self.spans.live(ctx.started):  # no tracer provider (the usual): no span
            return self._execute(task, ctx, isolated)
        with tracing.process(ctx) as span:
            outcome = self._execute(task, ctx, isolated)
            span_ended(span, outcome)
        return outcome

    def _execute(self, task: Task[..., Any], ctx: JobContext, isolated: bool) -> Outcome:
        if isolated:  # the child is killed, not interrupted
            return run_isolated(ctx, task, lambda: self._call(task, ctx), task.timeout)
        return self._call(task, ctx)

    def _call(self, task: Task[..., Any], ctx: JobContext) -> Outcome:
        """Call the task's function with the job's arguments."""
        dbconn.before_job()
        set_current_job(ctx)
        t0 = time.perf_counter()
        flow = flow_of(ctx.message.body)
        call: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        try:
            args, kwargs = decode_call(ctx.message.body)
            if flow.get("in"):
                try:
                    passed = received(ctx, flow)
                except Exception as exc:  # an outage before the call is not an attempt
                    if is_unavailable(exc):
                        return released(ctx, exc)
                    raise
                args = (*passed, *args)
            call = (args, kwargs)
            if signals.job_started.receivers:  # (none connected: not even the call)
                send(signals.job_started, sender=task, job=ctx)
            if log.isEnabledFor(logging.DEBUG):
                log.debug(job_line("job_start", ctx))
            result = task.func(*args, **kwargs)
            if task.is_async:  # no event-loop lane in this worker: a loop of its own
                result = run_blocking(result, task.timeout)
        except BaseException as exc:  # SystemExit from a task is a failure of that job too
            if isinstance(exc, JobCancelled):  # not a failure: its outcome is not sent
                return Failure(describe(exc), 0.0, True, ctx, exc)
            if isinstance(exc, Parked):  # durable sleep or wait: park.lua moved the job
                return parked(ctx, exc)
            if isinstance(exc, IterationPaused):  # durable.iterate: back at its place
                return paused(ctx, exc)
            corrupt = "corrupt record: body: " if isinstance(exc, MalformedPayload) else ""
            error = f"{corrupt}{describe(exc)}\n{traceback.format_exc()}"
            # a rerun cannot help these
            permanent = isinstance(exc, ModelInstanceMissing | MalformedPayload)
            if isinstance(exc, TypeError) and call is not None:
                reason = misfit(task.name, task.func, *call)
                if reason is not None:  # the call never entered the task
                    error, permanent = f"{reason}\n{error}", True
            return failed(ctx, task, error, exc, dead=permanent)
        finally:
            set_current_job(None)
            dbconn.after_job()
        return succeeded(task, ctx, result, time.perf_counter() - t0, flow)


def flow_of(body: Any) -> dict[str, Any]:
    """How a job takes part in a workflow (its body's ``flow``; {} for other jobs)."""
    flow = body.get("flow") if isinstance(body, dict) else None
    return flow if isinstance(flow, dict) else {}


def received(ctx: JobContext, flow: dict[str, Any]) -> tuple[Any, ...]:
    """What a workflow job gets first from its parents: the one result (a chain), the
    list of them (a chord's callback; None for an optional parent that failed) or the
    summary of how they ended (a batch's callback)."""
    if flow.get("in") == "batch":
        return (summary(passed_ends(ctx.queue, ctx.message.tag)),)
    results = ctx.queue.passed_results(ctx.message.tag)
    return (results,) if flow.get("in") == "list" else (results[0] if results else None,)


def passed_on(ctx: JobContext, task: Task[..., Any], result: Any) -> str | Failure:
    """The JSON a workflow job hands its dependents, or the Failure (dead: a rerun would
    repeat the task's side effects) when it cannot be passed on."""
    try:
        data = encode_body(result)
    except (TypeError, ValueError) as exc:
        error = f"return value of {ctx.task_name} cannot be passed on as JSON: {exc}"
        return failed(ctx, task, error, exc, dead=True)
    if len(data) > MAX_PASSED_BYTES:
        error = (
            f"return value of {ctx.task_name} is {len(data)} bytes as JSON, more than the "
            f"{MAX_PASSED_BYTES} a workflow job may pass on: return a reference instead"
        )
        return failed(ctx, task, error, None, dead=True)
    return data.decode("utf-8")


def succeeded(
    task: Task[..., Any], ctx: JobContext, result: Any, duration: float, flow: dict[str, Any]
) -> Success | Failure:
    """The Success of a run that returned ``result``; a Failure (dead) when the result is
    to be kept or passed on and cannot be."""
    passed = ""
    if flow.get("out"):
        got = passed_on(ctx, task, result)
        if isinstance(got, Failure):
            return got
        passed = got
    keep = task.store_result or bool(flow.get("keep"))
    if keep:
        try:
            encode_body(result)
        except (TypeError, ValueError) as exc:
            # dead, not retried: a rerun would repeat the task's side effects
            error = f"return value of {ctx.task_name} cannot be stored as JSON: {exc}"
            return failed(ctx, task, error, exc, dead=True)
    if signals.job_finished.receivers:
        send(signals.job_finished, sender=task, job=ctx, result=result, duration=duration)
    if log.isEnabledFor(logging.DEBUG):  # one line per job: DEBUG (-v 2), not INFO
        log.debug(job_line("job_done", ctx, ms=round(duration * 1000, 2)))
    run_ms, end = int(duration * 1000), time.monotonic()
    if keep:
        return Success(task.result_ttl, run_ms, end, result, None, passed)
    # positional (a NamedTuple made with a keyword costs twice as much)
    return Success(task.result_ttl, run_ms, end, NO_RESULT, None, passed)


def job_line(event: str, ctx: JobContext, **more: Any) -> str:
    """One ``key=value`` line about a run (``job_start`` at ``-v 2``)."""
    msg = ctx.message
    return kv(
        event=event,
        queue=ctx.queue.name,
        job=msg.tag,
        task=ctx.task_name,
        attempt=msg.attempt,
        **more,
    )


def paused(ctx: JobContext, exc: IterationPaused) -> Released:
    """A ``durable.iterate`` run that stopped between items, its cursor recorded: given
    back (``release.lua``: its place in line, no attempt used); one line."""
    log.info(
        kv(
            event="iteration_paused",
            queue=ctx.queue.name,
            job=ctx.message.tag,
            task=ctx.task_name,
            name=exc.name,
            position=exc.position,
        )
    )
    return Released(str(exc), ctx)
