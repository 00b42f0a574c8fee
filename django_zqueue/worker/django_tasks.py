"""Running a job of Django's Tasks framework (enqueued through
:class:`~django_zqueue.backends.ZQueueBackend`), in a worker thread.

:func:`run` runs the task and returns its :class:`~django_zqueue.worker.outcome.Outcome`; the
worker sends it (ack or nack) with its other outcomes, then calls :func:`outcome_sent`,
which finishes the task's result record: on success the record was written by the ack
itself (it is the ack's result), so only ``task_finished`` is sent; after a failure the
record says READY (retried) or FAILED (dead).
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Mapping
from typing import Any

from ..engine.redis.outages import is_unavailable
from ..events import kv, log
from ..queue import Message, Queue
from ..tasks.context import JobContext, set_current_job
from ..tasks.django_tasks import backend as backends
from ..tasks.django_tasks.compat import AnyResult, AnyTask, normalize_json
from . import dbconn
from .outcome import Failure, Outcome, Success, TaskRecord, describe, failed, released


def run(queue: Queue, msg: Message, body: Mapping[str, Any], name: str, worker_id: str) -> Outcome:
    """Run a job enqueued through Django's Tasks framework (ZQueueBackend)."""
    ctx = JobContext(msg, queue, name)
    found = backends.find_for_job(body)  # the job's alias and Django's rule
    if found.task is None or found.backend is None:
        found.record_refusal(queue, msg.tag, body, worker_id)
        return failed(ctx, None, found.reason, None, dead=True)
    task, backend = found.task, found.backend
    try:
        record = backends.start_record(queue, msg.tag, body, worker_id, backend.result_ttl)
    except Exception as exc:  # an outage before the call is not an attempt
        if is_unavailable(exc):
            return released(ctx, exc)
        raise
    return _call(ctx, task, backend, body, TaskRecord(record, backend.result_ttl))


def _call(
    ctx: JobContext,
    task: AnyTask,
    backend: backends.ZQueueBackend,
    body: Mapping[str, Any],
    record: TaskRecord,
) -> Outcome:
    task_result = backends.result_from_record(ctx.id, record.data)
    dbconn.before_job()
    set_current_job(ctx)
    t0 = time.perf_counter()
    permanent = False  # a failure that a rerun cannot fix (and would repeat)
    try:
        backends.send_started(task_result)
        raw = _invoke(task, task_result, body)
        permanent = True  # from here on, the task has run: only its result is checked
        value = normalize_json(raw)
    except BaseException as exc:
        return _failed(ctx, exc, backend, record, permanent=permanent)
    finally:
        set_current_job(None)
        dbconn.after_job()
    duration = time.perf_counter() - t0
    record.data.update(status="SUCCESSFUL", finished_at=backends.now_iso(), return_value=value)
    return Success(
        result=record.data,
        result_ttl=record.ttl,
        run_ms=int(duration * 1000),
        finished=time.monotonic(),
        record=record,
    )


def _invoke(task: AnyTask, task_result: AnyResult, body: Mapping[str, Any]) -> Any:
    args, kwargs = body.get("args", []), body.get("kwargs", {})
    if task.takes_context:
        return task.call(backends.context_for(task_result), *args, **kwargs)
    return task.call(*args, **kwargs)


def _failed(
    ctx: JobContext,
    exc: BaseException,
    backend: backends.ZQueueBackend,
    record: TaskRecord,
    *,
    permanent: bool,
) -> Failure:
    """The failure of a run (called while ``exc`` is handled), with the error added to
    the record; it is final (the nack buries the job) when the task ran and its result
    was refused, or when the alias's ``MAX_RETRIES`` are spent (Django's default: one
    attempt); a final one is signalled at once."""
    tb = traceback.format_exc()
    record.data["errors"].append(backends.error_entry(exc))
    dead = permanent or backend.retries_spent(record.data)
    failure = failed(ctx, None, describe(exc) + "\n" + tb, exc, dead=dead)
    msg = ctx.message
    failure = dataclasses.replace(
        failure, retry_in=backend.retry_delay(msg.attempt, failure.retry_in)
    )
    final = dead or msg.attempt > msg.max_retries
    if final:
        # Signal now, inside the handler, so that receivers see the exception (Django's
        # own logging receiver does).
        record.data["status"] = "FAILED"
        record.data["finished_at"] = backends.now_iso()
        backends.send_finished(msg.tag, record.data)
    return dataclasses.replace(failure, record=dataclasses.replace(record, signalled=final))


def outcome_sent(queue: Queue, msg: Message, outcome: Outcome, *, buried: bool) -> None:
    """After the worker sent the outcome of a Django task (not stale): a success is
    announced (``task_finished``); after a failure the record says READY (retried) or
    FAILED (``buried``: the nack made the job dead), and is stored."""
    record = outcome.record
    assert record is not None
    data = record.data
    if isinstance(outcome, Success):
        backends.send_finished(msg.tag, data)
        return
    if buried:
        data["status"] = "FAILED"
        data["finished_at"] = data.get("finished_at") or backends.now_iso()
    else:
        data["status"] = "READY"
        data["finished_at"] = None
    try:
        backends.store_record(queue, msg.tag, data, record.ttl)
    except Exception:
        log.exception(kv(event="record_failed", queue=queue.name, job=msg.tag))
    if buried and not record.signalled:
        backends.send_finished(msg.tag, data)
