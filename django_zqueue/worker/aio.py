"""The event-loop lane of a worker: ``async def`` tasks, many at once on one thread.

Beside the consumer threads, a worker started with ``async_concurrency`` N > 0
(``zqueue_worker --async-concurrency``, by default 100 when a registered ``async def``
task uses one of its queues, else none; ``Worker(async_concurrency=0)`` by default)
runs an asyncio loop in a thread of its own. The lane claims from the same queues
(redis-py's asyncio client, the same scripts), up to its free slots at a time, and runs
each job as an asyncio task, so N jobs that await I/O wait together. It keeps the
worker's rules, through the worker's own parts:

- leases: every job it claims is held in the worker's :class:`~.leases.Leases`, so the
  heartbeat thread extends its lease and a stop gives it back;
- timeouts: ``asyncio.timeout(task.timeout)`` around the run, which interrupts any await
  (the thread lane's async exception cannot reach a coroutine), reported as
  ``django_zqueue.worker.JobTimeout`` like a thread's;
- retries, dead letters, results, ``on_failure``, signals, ``current_job()``,
  OpenTelemetry spans: the same :class:`~django_zqueue.worker.outcome.Outcome`, sent in one
  round trip with the next claim and acted on by the consumer's own code
  (:meth:`.consumer.Consumer.outcomes_sent`);
- cancellation: each run is an asyncio task; :meth:`AioLane.cancel` cancels it (the job
  ends dead with ``JobCancelled``), the one call a cancel of a running job needs.

A sync job the lane claims runs in one of ``concurrency`` threads of the lane's own (the
thread lane's runner and timeouts apply there; so a worker with a lane runs up to twice
``concurrency`` sync jobs at once); an async job a consumer thread claims is handed to the lane
(:meth:`AioLane.submit`), or, without a lane, run by that thread on a loop of its own
(:func:`.coro.run_blocking`). Django's async ORM works inside a task: its queries go to
asgiref's thread-sensitive executor, whose connections the lane checks (Django's
``close_old_connections``) after a failed job and at most once a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from .. import signals
from ..engine.redis.outages import is_unavailable
from ..engine.scripts import Calls
from ..events import kv, log, send
from ..exceptions import JobCancelled, JobTimeout, Parked
from ..queue import Message, Queue
from ..queue.aio import AsyncQueue
from ..tasks import tracing
from ..tasks.callcheck import misfit
from ..tasks.context import JobContext, set_current_job
from ..tasks.django_tasks.backend import MARKER
from ..tasks.serializer import MalformedPayload, ModelInstanceMissing, decode_call
from ..tasks.task import Task, registered
from . import taskstats
from .consumer import (
    RETRY_RESET_AFTER,
    Consumer,
    Finished,
    Host,
    Reply,
    add_outcomes,
    report_error,
)
from .coro import bounded, span_ended
from .leases import HeldKey, held_key
from .outcome import Failure, Outcome, ParkedRun, describe, failed, parked, released
from .runner import flow_of, job_line, received, succeeded


class LaneHost(Host, Protocol):
    """What the lane uses of its worker (:class:`~.worker.Worker` is one)."""

    grace: float
    concurrency: int


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


class AioLane:
    """The event-loop lane of ``worker``: at most ``slots`` jobs at once (:meth:`run`)."""

    def __init__(self, worker: LaneHost, slots: int) -> None:
        if slots < 1:
            raise ValueError("async_concurrency must be >= 1")
        self.worker = worker
        self.slots = slots
        #: the outcomes not sent yet
        self.done: list[Finished] = []
        #: a consumer's queue order (weights)
        self.reporter = Consumer(worker)
        self.loop: asyncio.AbstractEventLoop | None = None
        #: the runs, by delivery (queue, tag, token: a tag handed back and claimed again
        #: is another delivery, never mistaken for the old one)
        self._tasks: dict[HeldKey, asyncio.Task[None]] = {}
        self._cancelled: set[HeldKey] = set()
        self._sync: set[HeldKey] = set()  # running in an executor thread
        self._closed = False
        self._ready = threading.Event()  # set once the loop runs (or the lane is done)
        self._lock = threading.Lock()
        #: slots taken: jobs spawned or on their way to the loop (under ``_lock``); a
        #: consumer thread waits on ``_room`` for one (:meth:`submit`)
        self._taken = 0
        self._room = threading.Condition(self._lock)
        self._freed: asyncio.Event | None = None
        self._finished: asyncio.Event | None = None
        self._next_db_check = 0.0
        #: whether runs get OpenTelemetry spans (asked once a second without a provider)
        self.spans = tracing.Switch()
        self._stop_flusher = False
        self._flushing = 0  # outcomes on their way (burst: not done before their replies)
        #: sync jobs the lane claims run here, at most ``concurrency`` at once
        self._executor = ThreadPoolExecutor(
            worker.concurrency, thread_name_prefix="zqueue-aio-sync"
        )

    # ------------------------------------------------------------------ other threads

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

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        """The lane thread: run the loop until the worker stops (or, with ``burst``, the
        queues have nothing ready and nothing runs)."""
        try:
            asyncio.run(self._main())
        finally:
            with self._room:
                self._closed = True
                self._room.notify_all()
            self._ready.set()

    async def _main(self) -> None:
        w = self.worker
        self._freed, self._finished = asyncio.Event(), asyncio.Event()
        with self._lock:
            self.loop = asyncio.get_running_loop()
        self._ready.set()
        aqs = {q.name: AsyncQueue(q) for q in w.queues}
        flusher = asyncio.create_task(self._flusher(aqs))
        try:
            await self._claim_loop(aqs)
        finally:
            with self._room:
                self._closed = True
                self._room.notify_all()
            await self._drain()
            self._stop_flusher = True  # (a cancel could be swallowed by an await in redis-py)
            assert self._finished is not None
            self._finished.set()
            _, late = await asyncio.wait({flusher}, timeout=5.0)
            for t in late:
                t.cancel()
            with contextlib.suppress(Exception):
                await self._flush(aqs, [])
            await self._check_db(force=True)
            self._executor.shutdown(wait=False)

    async def _claim_loop(self, aqs: dict[str, AsyncQueue]) -> None:
        w = self.worker
        assert self._freed is not None
        errors, failed_at = 0, 0.0
        while not w.stopping.is_set():
            free = self._reserve()
            if free <= 0:
                if w.max_jobs is not None and w.leases.claimed >= w.max_jobs and not self._tasks:
                    w.stopping.set()
                    return
                await self._wait_freed(0.1)
                continue
            try:
                queue, msgs, hints = await self._claim(aqs, free)
                if msgs or time.monotonic() - failed_at > RETRY_RESET_AFTER:
                    errors = 0  # (see RETRY_RESET_AFTER)
                w.outage.ok()
            except Exception as exc:
                self._release(free)
                errors += 1
                failed_at = time.monotonic()
                wait = min(5.0, 0.1 * 2**errors)
                if is_unavailable(exc):
                    w.outage.failed(exc)
                else:
                    report_error(w, exc, wait, lane="aio")
                await asyncio.sleep(wait)
                continue
            started = 0
            if queue is not None:
                w.leases.hold(queue, msgs)
                for msg in msgs:
                    if w.leases.start(queue, msg):
                        started += 1
                        self._spawn(queue, msg)
            self._release(free - started)
            if queue is not None:
                continue
            if w.burst and not any(h == 0 for h in hints):
                with self._lock:  # nothing running, and no job on its way from a thread
                    idle = self._taken == 0
                if idle and not self._tasks and not self.done and not self._flushing:
                    return
                await self._wait_freed(0.1)
                continue
            wait = min([*hints, 1.0])
            if wait > 0:
                if self._tasks:  # a job may end meanwhile: do not block for long
                    wait = min(wait, 0.05)
                try:
                    await aqs[w.queues[0].name].engine.wait_on(w.wakeups.groups, wait)
                except Exception as exc:  # Redis gone while idle: ridden out, never the end
                    errors += 1
                    failed_at = time.monotonic()
                    pause = min(5.0, 0.1 * 2**errors)
                    if is_unavailable(exc):
                        w.outage.failed(exc)
                    else:
                        report_error(w, exc, pause, lane="aio", call="blpop")
                    await asyncio.sleep(pause)

    def _reserve(self) -> int:
        """Take the free slots for one claim of the loop's own (a consumer thread's
        :meth:`submit` takes one at a time, so the two never overrun ``slots``); how
        many. Those the claim does not fill go back with :meth:`_release`."""
        w = self.worker
        with self._lock:
            free = self.slots - self._taken
            if w.max_jobs is not None:
                free = min(free, w.max_jobs - w.leases.claimed)
            free = max(free, 0)
            self._taken += free
        return free

    def _release(self, n: int) -> None:
        if n > 0:
            with self._room:
                self._taken -= n
                self._room.notify(n)

    async def _wait_freed(self, seconds: float) -> None:
        assert self._freed is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._freed.wait()
        self._freed.clear()

    async def _claim(
        self, aqs: dict[str, AsyncQueue], budget: int
    ) -> tuple[Queue | None, list[Message], list[float]]:
        """Claim up to ``budget`` jobs from the first queue in order that has some; the
        pending outcomes go in the first claim's round trip. A queue whose claim fails
        for an error of its own, not an outage (a key of the wrong type), is logged and
        left alone for a growing while (``worker.paused``, shared with the consumer
        threads); an outage raises."""
        w = self.worker
        hints: list[float] = []
        first = True
        for q in self.reporter.order():
            paused = w.paused.wait(q.name)
            if paused > 0:
                hints.append(paused)
                continue
            aq = aqs[q.name]
            try:
                if first and self.done:
                    msgs, hint = await self._flush(aqs, [(aq, budget)])
                else:
                    msgs, hint = await aq.claim(min(budget, 100), w.id)
            except Exception as exc:
                if is_unavailable(exc):
                    raise
                wait = w.paused.failed(q.name)
                report_error(w, exc, wait, lane="aio", queue=q.name)
                hints.append(wait)
                continue
            finally:
                first = False
            w.paused.ok(q.name, proved=bool(msgs))
            if msgs:
                return q, msgs, hints
            if hint is not None:
                hints.append(hint)
        return None, [], hints

    async def _flush(
        self, aqs: dict[str, AsyncQueue], claim: list[tuple[AsyncQueue, int]]
    ) -> tuple[list[Message], float | None]:
        """Send the pending outcomes (and a claim of ``claim`` on an unpartitioned
        queue) in one round trip; act on the replies as a consumer thread does."""
        done, self.done = self.done, []
        self._flushing += 1
        try:
            return await self._send_outcomes(aqs, done, claim)
        finally:
            self._flushing -= 1

    async def _send_outcomes(
        self,
        aqs: dict[str, AsyncQueue],
        done: list[Finished],
        claim: list[tuple[AsyncQueue, int]],
    ) -> tuple[list[Message], float | None]:
        if not done:
            return await claim[0][0].claim(claim[0][1], self.worker.id) if claim else ([], None)
        # as a consumer thread's flush: the acks in one ack_many call per shard, a nack each
        outcomes = Calls()
        pending = add_outcomes(outcomes, done)
        # an unpartitioned queue's claim goes in the same round trip (the engine's plan)
        plan = claim[0][0].engine.plan_claim(claim[0][1], self.worker.id) if claim else None
        claimed = outcomes.add(plan.call) if plan is not None else None
        try:
            await aqs[done[0].queue.name].engine.send_calls(outcomes)
        except BaseException:
            self.done[:0] = done  # kept, sent again with the next flush
            raise
        # the consumer's own handling of the replies, in a thread: on_failure hooks and
        # Django task records are sync code (the ORM refuses to run on a loop)
        reporter = Consumer(self.worker)
        reporter.done = done
        await asyncio.to_thread(_report, reporter, pending, list(done))
        self.done[:0] = reporter.done  # refused by an outage: sent again
        if plan is not None and claimed is not None:
            return await claim[0][0].engine.claim_rest(plan, claimed.result())
        if claim:
            return await claim[0][0].claim(claim[0][1], self.worker.id)
        return [], None

    async def _flusher(self, aqs: dict[str, AsyncQueue]) -> None:
        """Send outcomes that wait while the claim loop blocks (slots full, or idle)."""
        assert self._finished is not None
        while True:
            await self._finished.wait()
            self._finished.clear()
            if self._stop_flusher:
                return
            await asyncio.sleep(0.005)  # let a burst of finishing jobs join one round trip
            if self.done:
                try:
                    await self._flush(aqs, [])
                except Exception as exc:  # kept; sent again with the next flush
                    if not is_unavailable(exc):
                        report_error(self.worker, exc, 0.1, lane="aio", call="outcomes")
                    await asyncio.sleep(0.1)
                    self._finished.set()

    async def _drain(self) -> None:
        """Stopping: let the running jobs finish within the worker's grace period, then
        cancel the rest (the worker gives their leases back)."""
        if not self._tasks:
            return
        pending = set(self._tasks.values())
        _, late = await asyncio.wait(pending, timeout=max(0.0, self.worker.grace))
        for t in late:
            t.cancel()
        if late:
            await asyncio.wait(late, timeout=5.0)

    # ------------------------------------------------------------------ one job

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


def _report(reporter: Consumer, pending: Sequence[Reply], done: list[Finished]) -> None:
    """In a thread, after the lane sent its outcomes: the consumer's handling of the
    replies, then the per-task statistics of these jobs (one round trip; a consumer
    thread sends them with its acks). Statistics that cannot be written are only logged."""
    reporter.outcomes_sent(pending)
    q = done[0].queue
    stats = q.engine.batch()
    taskstats.add_to(stats, done)
    try:
        q.engine.send(stats)
    except Exception as exc:
        log.warning(kv(event="task_stats_not_written", queue=q.name, error=str(exc)))


def lane_for(worker: LaneHost, async_concurrency: int) -> AioLane | None:
    """The lane of ``worker`` with ``async_concurrency`` slots; None for 0 (a consumer
    thread then runs an async task on a loop of its own, one at a time)."""
    n = async_concurrency
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError("async_concurrency must be an int >= 0")
    return AioLane(worker, n) if n else None
