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


def _resume_at(run: Run, prefix: str) -> tuple[int, int]:
    """The position recorded last under ``prefix`` (0: none) and how many checkpoints."""
    marks = [int(json.loads(v)) for k, v in run.fields.items() if k.startswith(prefix)]
    return max(marks, default=0), len(marks)


def _rest(iterable: Iterable[T], start: int) -> Iterator[T]:
    """``iterable`` from item ``start`` on: a slice for a sequence or a queryset (an
    OFFSET: give it a stable ``order_by``), else the first items read and dropped."""
    if start and hasattr(iterable, "__getitem__") and hasattr(iterable, "__len__"):
        return iter(iterable[start:])
    return itertools.islice(iterable, start, None)


def iterate(
    name: str,
    iterable: Iterable[T],
    *,
    checkpoint_every: int = 100,
    max_runtime: float | timedelta | None = None,
) -> Iterator[T]:
    """Walk ``iterable`` with a cursor that survives a deploy: the position is recorded
    (a durable record of the job, ``s:<name>#<n>``) every ``checkpoint_every`` items, and
    a later run of the job starts after the last position recorded.

    Between two items: once the worker is stopping (SIGTERM) or the run has taken
    ``max_runtime``, the position is recorded and the job is given back to its place in
    line without using an attempt (it resumes there); a cancel ends the job. A run that
    dies without a stop (SIGKILL) resumes from the last checkpoint: the items since
    then come again. Progress (``Job.progress()``) follows the cursor when the iterable
    has a length. Each checkpoint is one durable record: at most about 1,000 per job."""
    ctx = _context("iterate")
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int):
        raise StepError("checkpoint_every must be an int >= 1")
    if checkpoint_every < 1:
        raise StepError("checkpoint_every must be an int >= 1")
    limit = None if max_runtime is None else _duration_ms(max_runtime, "max_runtime") / 1000
    run = _sync_run(ctx)
    prefix = "s:" + run.use(name, "iterate") + "#"
    position, marks = _resume_at(run, prefix)
    total = len(iterable) if hasattr(iterable, "__len__") else None  # type: ignore[arg-type]
    saved, began = position, time.monotonic()

    def save() -> None:
        nonlocal saved, marks
        if position == saved:
            return
        _room(run)
        key, data = f"{prefix}{marks + 1}", json.dumps(position)
        _recorded(ctx, ctx.queue.engine.durable.step(ctx.message, key, data), name)
        run.fields[key] = data
        saved, marks = position, marks + 1
        if total:
            ctx.progress(min(1.0, position / total), f"{name}: {position}/{total}")

    for item in _rest(iterable, position):
        yield item
        position += 1
        if ctx.cancel_requested:
            raise JobCancelled(f"job {ctx.id} cancelled during {name!r} at {position}")
        stop = ctx.stop_requested or (limit is not None and time.monotonic() - began >= limit)
        if stop or position - saved >= checkpoint_every:
            save()
        if stop:
            raise IterationPaused(name, position)
    save()
