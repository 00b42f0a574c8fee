"""Durable tasks: a task that resumes where it stopped (docs/durable.md).

Inside a task::

    from django_zqueue import durable

    charge = durable.step("charge", charge_card, order_id)  # runs once, result recorded
    durable.sleep("cool-off", timedelta(hours=1))  # ends the run; runs again in an hour
    answer = durable.wait_for("approved", timeout=86400)  # ends the run until signalled
    for row in durable.iterate("rows", queryset, checkpoint_every=100):  # a cursor
        ...

Each run of a job (a retry, a recovery after its worker died, a requeue from the dead
letters, a wake-up) runs the task from the start: a step recorded by an earlier run
returns its recorded result without calling its function, a sleep that has passed
returns at once, an event delivered returns its payload. ``sleep`` and ``wait_for`` end
the run without using an attempt and without holding a worker thread.

A long loop resumes where it stopped::

    for row in durable.iterate("backfill", Order.objects.filter(...), checkpoint_every=100):
        fill(row)  # after a deploy, the next run goes on after the last row done

An ``async def`` task uses ``await durable.astep(...)``, ``await durable.asleep(...)``
and ``await durable.await_for(...)``.

A run reads all its job's records once, at its first durable call (one round trip);
each step recorded is one more round trip, fenced by the delivery token.
"""

from __future__ import annotations

import inspect
import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from ..conf.bounds import MAX_DELAY
from ..engine.records import validate
from ..engine.scripts import Call
from ..engine.scripts.replies import ParkReply, StepReply
from ..exceptions import (
    IterationPaused,
    JobCancelled,
    Parked,
    SignalRefused,
    StaleDelivery,
    StepError,
    TimedOut,
)
from ..queue.durable_calls import MAX_STEPS, ParkedFor, Records, check_name, encode
from .context import JobContext, current_job
from .django_tasks.backend import MARKER

__all__ = [
    "IterationPaused",
    "ParkedFor",
    "SignalRefused",
    "StaleDelivery",
    "StepError",
    "TimedOut",
    "asleep",
    "astep",
    "await_for",
    "iterate",
    "sleep",
    "step",
    "wait_for",
]

T = TypeVar("T")


@dataclass
class Run:
    """One run's view of its job's records (read once, then kept up to date)."""

    now_ms: int
    fields: dict[str, str]
    used: set[str] = field(default_factory=set)

    def use(self, name: Any, what: str) -> str:
        """``name``, checked and marked as used in this run (a repeated name raises)."""
        check_name(name, what)
        if name in self.used:
            raise StepError(
                f"durable name {name!r} used twice in one run: names are unique within a "
                "run (in a loop, name each one, e.g. f'send:{i}')"
            )
        self.used.add(name)
        return str(name)


def _context(what: str) -> JobContext:
    ctx = current_job()
    if ctx is None:
        raise StepError(f"durable.{what} is called outside a job (only inside a running task)")
    body = ctx.message.body
    if isinstance(body, dict) and MARKER in body:
        raise StepError(f"durable.{what}: a task of Django's Tasks framework cannot be durable")
    return ctx


def _run_of(ctx: JobContext, records: Records) -> Run:
    if not records.leased:
        raise StaleDelivery(f"job {ctx.id}: this run's lease is no longer the job's")
    return Run(records.now_ms, records.fields)


def _read_call(ctx: JobContext) -> Call[Records]:
    return ctx.queue.engine.durable.run_call(ctx.message)


def _sync_run(ctx: JobContext) -> Run:
    if ctx.records is None:
        ctx.records = _run_of(ctx, ctx.queue.engine.durable.run_records(ctx.message))
    run: Run = ctx.records
    return run


async def _async_run(ctx: JobContext) -> Run:
    if ctx.records is None:
        from ..queue.aio import get_async_queue

        records = await get_async_queue(ctx.queue.name).engine.run(_read_call(ctx))
        ctx.records = _run_of(ctx, records)
    run: Run = ctx.records
    return run


def _room(run: Run) -> None:
    if len(run.fields) >= MAX_STEPS:
        raise StepError(f"the job already holds {MAX_STEPS} durable records, the most allowed")


def _recorded(ctx: JobContext, reply: StepReply, name: str) -> None:
    if reply is StepReply.STALE:
        raise StaleDelivery(f"job {ctx.id}: step {name!r} not recorded, the lease is gone")


def _duration_ms(value: Any, what: str) -> int:
    seconds = validate.seconds(value, what)
    if not 0 <= seconds <= MAX_DELAY:
        raise StepError(f"{what} must be in [0, {MAX_DELAY}] seconds, got {value!r}")
    return int(seconds * 1000)


# ------------------------------------------------------------------ step


def _step_begin(run: Run, name: Any) -> tuple[str, str | None]:
    key = "s:" + run.use(name, "step")
    return key, run.fields.get(key)


def step(name: str, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> Any:
    """Run ``func(*args, **kwargs)`` once for this job and record its result (JSON) as
    step ``name``; a later run of the job returns the recorded result (as JSON gives it
    back: a tuple comes back a list) without calling ``func``. A step whose function
    raises is not recorded (the exception goes on, and the task's retry rules apply)."""
    ctx = _context("step")
    run = _sync_run(ctx)
    key, seen = _step_begin(run, name)
    if seen is not None:
        return json.loads(seen)
    _room(run)
    data = encode(func(*args, **kwargs), f"result of step {name!r}")
    reply = ctx.queue.engine.durable.step(ctx.message, key, data)
    _recorded(ctx, reply, name)
    run.fields[key] = data
    return json.loads(data)


async def astep(name: str, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """:func:`step` from an ``async def`` task; ``func`` may be a coroutine function."""
    from ..queue.aio import get_async_queue

    ctx = _context("astep")
    run = await _async_run(ctx)
    key, seen = _step_begin(run, name)
    if seen is not None:
        return json.loads(seen)
    _room(run)
    value = func(*args, **kwargs)
    if inspect.isawaitable(value):
        value = await value
    data = encode(value, f"result of step {name!r}")
    q = ctx.queue
    call = q.engine.durable.step_call(ctx.message, key, data)
    _recorded(ctx, await get_async_queue(q.name).engine.run(call), name)
    run.fields[key] = data
    return json.loads(data)


# ------------------------------------------------------------------ sleep and wait


def _park(ctx: JobContext, key: str, ms: int) -> Call[tuple[ParkReply, str]]:
    return ctx.queue.engine.durable.park_call(ctx.message, key, ms)


def _sleep_begin(run: Run, name: Any, duration: Any) -> tuple[str, int] | None:
    """The sleep's field and length when it is to be parked; None: it has passed."""
    key = "z:" + run.use(name, "sleep")
    ms = _duration_ms(duration, f"sleep {name!r}")
    wake = run.fields.get(key)
    if wake is not None and int(wake) <= run.now_ms:
        return None
    if wake is None:
        _room(run)
    return key, ms


def _slept(ctx: JobContext, run: Run, key: str, reply: tuple[ParkReply, str]) -> None:
    code, wake = reply
    if code is ParkReply.STALE:
        raise StaleDelivery(f"job {ctx.id}: not parked, the lease is gone")
    run.fields[key] = wake
    if code is ParkReply.PARKED:
        raise Parked(key, int(wake))


def sleep(name: str, duration: float | timedelta) -> None:
    """Durable sleep: end this run (no attempt used, no thread held); the job runs again
    once ``duration`` (seconds or a timedelta, from the first time this sleep is
    reached) has passed, and this call then returns at once."""
    ctx = _context("sleep")
    run = _sync_run(ctx)
    todo = _sleep_begin(run, name, duration)
    if todo is not None:
        _slept(ctx, run, todo[0], ctx.queue.engine.durable.park(ctx.message, *todo))


async def asleep(name: str, duration: float | timedelta) -> None:
    """:func:`sleep` from an ``async def`` task."""
    from ..queue.aio import get_async_queue

    ctx = _context("asleep")
    run = await _async_run(ctx)
    todo = _sleep_begin(run, name, duration)
    if todo is not None:
        reply = await get_async_queue(ctx.queue.name).engine.run(_park(ctx, *todo))
        _slept(ctx, run, todo[0], reply)


_NOTHING: Any = object()


def _wait_begin(run: Run, name: Any, timeout: Any) -> tuple[str, int] | Any:
    """The payload when the event is there; else the wait's field and length to park."""
    run.use(name, "event")
    payload = run.fields.get("g:" + name)
    if payload is not None:
        return json.loads(payload)
    ms = MAX_DELAY * 1000 if timeout is None else _duration_ms(timeout, "timeout")
    key = "w:" + name
    deadline = run.fields.get(key)
    if deadline is not None and int(deadline) <= run.now_ms:
        raise TimedOut(f"no event {name!r} came before the wait's timeout")
    if deadline is None:
        _room(run)
    return key, ms


def _waited(ctx: JobContext, run: Run, key: str, reply: tuple[ParkReply, str]) -> Any:
    code, value = reply
    if code is ParkReply.STALE:
        raise StaleDelivery(f"job {ctx.id}: not parked, the lease is gone")
    if code is ParkReply.SIGNALLED:
        run.fields["g:" + key[2:]] = value
        return json.loads(value)
    run.fields[key] = value
    if code is ParkReply.DUE:
        raise TimedOut(f"no event {key[2:]!r} came before the wait's timeout")
    raise Parked(key, int(value))


def wait_for(name: str, timeout: float | timedelta | None = None) -> Any:
    """Wait for event ``name`` (``Job.signal(name, payload)``): return its payload, or
    end this run (no attempt used, no thread held) until it comes; the job then runs
    again and this call returns the payload. After ``timeout`` (seconds or a timedelta,
    from the first time this wait is reached; None: the 3650-day horizon) without the
    event, the job runs again and this call raises :class:`TimedOut`. An event sent
    before the job gets here is kept for it."""
    ctx = _context("wait_for")
    run = _sync_run(ctx)
    todo = _wait_begin(run, name, timeout)
    if not isinstance(todo, tuple):
        return todo
    return _waited(ctx, run, todo[0], ctx.queue.engine.durable.park(ctx.message, *todo))


async def await_for(name: str, timeout: float | timedelta | None = None) -> Any:
    """:func:`wait_for` from an ``async def`` task."""
    from ..queue.aio import get_async_queue

    ctx = _context("await_for")
    run = await _async_run(ctx)
    todo = _wait_begin(run, name, timeout)
    if not isinstance(todo, tuple):
        return todo
    reply = await get_async_queue(ctx.queue.name).engine.run(_park(ctx, *todo))
    return _waited(ctx, run, todo[0], reply)


# ------------------------------------------------------------------ iterate

#: rows a queryset is read by, per query, when :func:`iterate` walks it
QUERYSET_CHUNK = 500


def iterate(
    name: str,
    items: Iterable[T],
    *,
    checkpoint_every: int = 100,
    checkpoint_seconds: float = 10.0,
    max_runtime: float | None = None,
    total: int | None = None,
) -> Iterator[T]:
    """Walk ``items`` with a cursor recorded as durable record ``name``: every
    ``checkpoint_every`` items or ``checkpoint_seconds``, whichever comes first, and when
    the run ends between two items. A later run of the job (after a deploy, a crash, a
    retry) resumes after the last item recorded as done; once the walk has ended, a
    later run gets no item from it.

    Between two items the run ends, its cursor recorded, and the job goes back to its
    place in line without using an attempt (``IterationPaused``), when the worker is
    stopping (SIGTERM, a recycle) or when this run has walked for ``max_runtime``
    seconds. A job cancelled while it walks stops between two items
    (``JobCancelled``).

    A Django ``QuerySet`` is walked in primary-key order, ``QUERYSET_CHUNK`` rows per
    query, resumed with ``pk > <last pk done>`` (rows added behind the cursor are
    seen, rows deleted are skipped); any other iterable must give the same items in the
    same order at every run, and is resumed by skipping the items done. Progress (the
    job's ``progress``) is ``done / total`` when ``total`` is given or ``items`` has a
    length. Items done after the last checkpoint run again after a crash (a SIGKILL);
    a stop by SIGTERM loses none. For a sync task (an ``async def`` task would block
    its event loop at each checkpoint)."""
    ctx = _context("iterate")
    every = checkpoint_every
    if isinstance(every, bool) or not isinstance(every, int) or not 1 <= every <= 1_000_000:
        raise StepError(f"checkpoint_every must be an int in [1, 1000000], got {every!r}")
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total < 0):
        raise StepError(f"total must be an int >= 0 or None, got {total!r}")
    seconds = validate.seconds(checkpoint_seconds, "checkpoint_seconds")
    if seconds <= 0:
        raise StepError(f"checkpoint_seconds must be > 0, got {checkpoint_seconds!r}")
    runtime = None if max_runtime is None else validate.seconds(max_runtime, "max_runtime")
    if runtime is not None and runtime < 0:
        raise StepError(f"max_runtime must be >= 0 seconds or None, got {max_runtime!r}")
    if total is None and hasattr(items, "__len__") and not _is_queryset(items):
        total = len(items)  # type: ignore[arg-type]
    run = _sync_run(ctx)
    key = "i:" + run.use(name, "iterate")
    seen = run.fields.get(key)
    state: dict[str, Any] = json.loads(seen) if seen is not None else {"n": 0, "c": None}
    if seen is None:
        _room(run)
    walk = _Walk(ctx, run, key, str(name), int(state["n"]), state["c"], total)
    if state.get("end"):
        return iter(())
    return walk.walk(_pairs(items, walk.done, walk.cursor), every, seconds, runtime)


def _is_queryset(items: Any) -> bool:
    from django.db.models import QuerySet

    return isinstance(items, QuerySet)


def _pairs(items: Iterable[Any], done: int, cursor: Any) -> Iterator[tuple[Any, Any]]:
    """(item, the cursor after it) from where the walk stopped."""
    if _is_queryset(items):
        return _rows(items, cursor)
    rest = itertools.islice(iter(items), done, None)
    return ((item, done + i) for i, item in enumerate(rest, 1))


def _rows(qs: Any, after: Any) -> Iterator[tuple[Any, Any]]:
    qs = qs.order_by("pk")
    while True:
        page = list((qs if after is None else qs.filter(pk__gt=after))[:QUERYSET_CHUNK])
        if not page:
            return
        for row in page:
            pk = row.pk if isinstance(row.pk, int | str) else str(row.pk)
            yield row, pk
        after = page[-1].pk if isinstance(page[-1].pk, int | str) else str(page[-1].pk)


@dataclass
class _Walk:
    """One run's walk of an :func:`iterate`: items done (all runs) and the cursor."""

    ctx: JobContext
    run: Run
    key: str
    name: str
    done: int
    cursor: Any
    total: int | None

    def walk(
        self, pairs: Iterator[tuple[Any, Any]], every: int, seconds: float, runtime: float | None
    ) -> Iterator[Any]:
        ctx, started = self.ctx, time.monotonic()
        last, since, first = started, 0, True
        for item, after in pairs:
            if not first:  # between two items: stop here?
                if ctx.cancel_requested:
                    self.save(False)
                    raise JobCancelled(f"job {ctx.id} cancelled after {self.done} items")
                why = "stopping" if ctx.stop_requested else None
                if why is None and runtime is not None and time.monotonic() - started >= runtime:
                    why = "max_runtime"
                if why is not None:
                    self.save(False)
                    raise IterationPaused(self.name, self.done, why)
            first = False
            yield item
            self.done, self.cursor, since = self.done + 1, after, since + 1
            now = time.monotonic()
            if since >= every or now - last >= seconds:
                self.save(False)
                since, last = 0, now
        self.save(True)

    def save(self, end: bool) -> None:
        """Record the cursor (``end``: the walk is over), then the job's progress."""
        state: dict[str, Any] = {"n": self.done, "c": self.cursor}
        if end:
            state["end"] = True
        data = encode(state, f"cursor of iterate {self.name!r}")
        if self.run.fields.get(self.key) == data:
            return
        ctx = self.ctx
        reply = ctx.queue.engine.durable.step(ctx.message, self.key, data, replace=True)
        _recorded(ctx, reply, self.name)
        self.run.fields[self.key] = data
        fraction = min(1.0, self.done / self.total) if self.total else 0.0
        ctx.progress(1.0 if end else fraction, f"{self.name}: {self.done} done")
