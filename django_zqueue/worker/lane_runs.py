"""The event-loop lane's runs (:class:`LaneRuns`): a job handed over by a consumer thread
(:meth:`~LaneRuns.submit`), one asyncio task per job (an ``async def`` task awaited
within its timeout, a sync one in a thread of the lane's executor), its outcome kept to
be sent (:mod:`.lane_outcomes`), and the cancel of a running job."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from .. import signals
from ..engine.redis.outages import is_unavailable
from ..events import kv, log, send
from ..exceptions import JobCancelled, JobTimeout, Parked
from ..queue import Message, Queue
from ..tasks import tracing
from ..tasks.callcheck import misfit
from ..tasks.context import JobContext, set_current_job
from ..tasks.django_tasks.backend import MARKER
from ..tasks.serializer import MalformedPayload, ModelInstanceMissing, decode_call
from ..tasks.task import Task, registered
from .chunks import chunk_task, run_chunk
from .consumer import Finished
from .coro import bounded, span_ended
from .lane_base import LaneBase
from .leases import HeldKey, held_key
from .outcome import Failure, Outcome, ParkedRun, describe, failed, parked, released
from .runner import flow_of, job_line, received, succeeded

CHECK_DB_EVERY = 1.0  # seconds between checks of the async ORM's connections


def async_task_of(msg: Message) -> Task[..., Any] | None:
    """The registered ``async def`` task a message calls, or None."""
    body = msg.body
    if not isinstance(body, dict) or MARKER in body:
        return None
    name = body.get("task")
    task = registered(name) if isinstance(name, str) else None
    return task if task is not None and task.is_async else None


def _model_refs(msg: Message) -> bool:
    """Whether decoding the call reads the database (model instances by reference)."""
    return b'"__zq__":"model"' in msg.raw_body


class LaneRuns(LaneBase):
    """The runs of the event-loop lane: one asyncio task per job."""

    def submit(self, queue: Queue, msg: Message) -> bool:
        """From a consumer thread: hand over a claimed job of an async task (held and
        started there) to run on the loop, once the lane has a free slot (the thread
        waits for one, so it claims no more meanwhile: ``slots`` caps the process's
        coroutines, whoever claimed them). False (the thread runs it) for a sync job, or
        once the lane has stopped."""
        if async_task_of(msg) is None:
            return False
        self._ready.wait(5.0)  # the lane thread may still be starting its loop
        with self._room:
            while True:
                loop = self.loop
                if loop is None or self._closed:
                    return False
                if self._taken < self.slots:
                    break
                self._room.wait(0.1)
            self._taken += 1
            loop.call_soon_threadsafe(self._spawn, queue, msg)
        return True

    def cancel(self, queue: str, tag: str, token: int | None = None) -> bool:
        """Cancel the running job ``tag`` of ``queue`` (its delivery ``token``; None: any)
        if this lane runs it (from any thread): its run ends at its current await, dead,
        with ``JobCancelled``."""
        with self._lock:
            loop = self.loop
            if loop is None or self._closed:
                return False
            keys = [
                k
                for k in list(self._tasks)
                if k[:2] == (queue, tag) and token in (None, k[2]) and k not in self._sync
            ]
            for key in keys:
                loop.call_soon_threadsafe(self._cancel, key)
        return bool(keys)

    def _cancel(self, key: HeldKey) -> None:
        task = self._tasks.get(key)
        if task is not None:
            self._cancelled.add(key)
            task.cancel()

    def _spawn(self, queue: Queue, msg: Message) -> None:
        key = held_key(queue, msg)
        self._tasks[key] = asyncio.get_running_loop().create_task(
            self._job(queue, msg), name=f"zqueue-job-{msg.tag}"
        )

    async def _job(self, queue: Queue, msg: Message) -> None:
        w, key = self.worker, held_key(queue, msg)
        outcome: Outcome | None = None
        try:
            task = async_task_of(msg)
            if task is None:  # a sync job (or a Django task): a thread of the executor
                self._sync.add(key)
                loop = asyncio.get_running_loop()
                outcome = await loop.run_in_executor(self._executor, self._sync_job, queue, msg)
            else:
                outcome = await self._async_job(task, queue, msg)
        except asyncio.CancelledError:
            if key not in self._cancelled:
                raise  # the lane is stopping: the worker gives the job back
            ctx = JobContext(msg, queue, task.name if task is not None else "")
            exc = JobCancelled("cancelled while running")
            held = w.leases.get(queue, msg)
            if held is not None and held.cancelled:
                # cancelled in Redis: cancel.lua ended it; not a failure (no signal, no
                # on_failure), and nothing is sent (leases.finish says so below)
                outcome = Failure(describe(exc), 0.0, True, ctx, exc)
            else:
                outcome = failed(ctx, task, f"{describe(exc)}\n", exc, dead=True)
        finally:
            self._tasks.pop(key, None)
            self._cancelled.discard(key)
            self._sync.discard(key)
            self._release(1)
            assert self._freed is not None and self._finished is not None
            self._freed.set()
            if isinstance(outcome, ParkedRun):  # park.lua moved the job: nothing to send
                w.count(outcome)
                w.leases.unhold(queue, msg)
            elif outcome is not None and not w.leases.finish(queue, msg):
                # cancel.lua ended it: nothing to send
                log.info(kv(event="job_cancelled", queue=queue.name, job=msg.tag))
            elif outcome is not None:
                w.count(outcome)
                self.done.append(Finished(queue, msg, outcome))
                self._finished.set()

    def _sync_job(self, queue: Queue, msg: Message) -> Outcome | None:
        """A sync job in an executor thread: the thread lane's runner (and its timeout,
        raised in this thread)."""
        w = self.worker
        if not w.leases.start(queue, msg):  # now running in this thread
            return None
        chunked = chunk_task(msg)
        if chunked is not None:  # the lane gathers no chunks: a chunk of one
            return run_chunk(w.runner, queue, chunked, [msg])[0]
        return w.runner.run(queue, msg)

    async def _async_job(self, task: Task[..., Any], queue: Queue, msg: Message) -> Outcome:
        ctx = JobContext(msg, queue, task.name)
        # cancelled in Redis: cancel_requested now, its asyncio task cancelled after the
        # grace (never an exception raised in this thread: it runs the other coroutines)
        self.worker.leases.attach(queue, msg, ctx)
        self.worker.leases.on_cancel(
            queue, msg, lambda: self.cancel(queue.name, msg.tag, msg.token)
        )
        with tracing.process(ctx, self.spans) as span:
            try:
                outcome = await self._call(task, ctx)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the machinery around the job, not the task
                log.exception(kv(event="job_machinery_error", queue=queue.name, job=msg.tag))
                error = f"worker error around the job: {type(exc).__name__}: {exc}\n"
                outcome = failed(ctx, None, error + traceback.format_exc(), exc, dead=False)
            span_ended(span, outcome)
        await self._check_db(force=isinstance(outcome, Failure))
        return outcome

    async def _call(self, task: Task[..., Any], ctx: JobContext) -> Outcome:
        """Await the task's coroutine with the job's arguments, within its timeout."""
        set_current_job(ctx)  # this asyncio task's context only
        t0 = time.perf_counter()
        flow = flow_of(ctx.message.body)
        call: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        try:
            if _model_refs(ctx.message):
                args, kwargs = await sync_to_async(decode_call)(ctx.message.body)
            else:
                args, kwargs = decode_call(ctx.message.body)
            if flow.get("in"):  # a workflow job: its parents' results come first
                try:
                    passed = await asyncio.to_thread(received, ctx, flow)
                except Exception as exc:  # an outage before the call is not an attempt
                    if is_unavailable(exc):
                        return released(ctx, exc)
                    raise
                args = (*passed, *args)
            call = (args, kwargs)
            send(signals.job_started, sender=task, job=ctx)
            if log.isEnabledFor(logging.DEBUG):  # -v 2: as the thread lane does
                log.debug(job_line("job_start", ctx))
            result = await bounded(task.func(*args, **kwargs), task.timeout)
        except asyncio.CancelledError:
            raise
        except Parked as exc:  # durable sleep or wait: park.lua moved the job
            return parked(ctx, exc)
        except BaseException as exc:
            corrupt = "corrupt record: body: " if isinstance(exc, MalformedPayload) else ""
            error = f"{corrupt}{describe(exc)}\n{traceback.format_exc()}"
            permanent = isinstance(exc, ModelInstanceMissing | MalformedPayload)
            if isinstance(exc, TypeError) and call is not None:
                reason = misfit(task.name, task.func, *call)
                if reason is not None:  # the call never entered the task
                    error, permanent = f"{reason}\n{error}", True
            if isinstance(exc, JobTimeout):
                log.warning(
                    kv(event="job_timeout", queue=ctx.queue.name, job=ctx.id, timeout=task.timeout)
                )
            return failed(ctx, task, error, exc, dead=permanent)
        finally:
            set_current_job(None)
        return succeeded(task, ctx, result, time.perf_counter() - t0, flow)

    async def _check_db(self, *, force: bool = False) -> None:
        """Django's ``close_old_connections`` in the async ORM's thread: after a failed job,
        else at most once a second (a check per job would cost two thread hops)."""
        now = time.monotonic()
        if force or now >= self._next_db_check:
            self._next_db_check = now + CHECK_DB_EVERY
            with contextlib.suppress(Exception):
                await sync_to_async(close_old_connections)()
