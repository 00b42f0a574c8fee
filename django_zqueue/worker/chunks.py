"""Chunk tasks in a consumer thread: the jobs of a chunk task it claims are held (their
leases extended by the heartbeat) until ``size`` of them are held or ``wait`` seconds
have passed since it took the first; then the handler is called once with
their items, and each job gets its own outcome (``tasks/chunk.py``)."""

from __future__ import annotations

import logging
import time
import traceback
from typing import TYPE_CHECKING, Any

from .. import signals
from ..events import send
from ..exceptions import ZQueueError
from ..queue import Message, Queue
from ..tasks.chunk import ChunkFailed, set_current_chunk
from ..tasks.context import JobContext
from ..tasks.serializer import decode_call
from ..tasks.task import Task, registered
from . import dbconn
from .outcome import Outcome, describe, failed
from .runner import flow_of, succeeded

if TYPE_CHECKING:
    from .leases import Leases
    from .runner import Runner

log = logging.getLogger("django_zqueue.worker")

#: a chunk task's jobs held by one consumer thread: (queue, task name) -> their messages
Key = tuple[Queue, str]


def chunk_task(msg: Message) -> Task[..., Any] | None:
    """The chunk task job ``msg`` is of, or None (any other job)."""
    body = msg.body
    name = body.get("task") if isinstance(body, dict) else None
    task = registered(name) if isinstance(name, str) else None
    return task if task is not None and task.chunk is not None else None


class ChunkBuffers:
    """The jobs of chunk tasks one consumer thread holds until their chunk is due."""

    def __init__(self) -> None:
        self._held: dict[Key, list[Message]] = {}
        self._tasks: dict[Key, Task[..., Any]] = {}
        self._due_at: dict[Key, float] = {}  # monotonic time the oldest has waited enough

    def __bool__(self) -> bool:
        return bool(self._held)

    def take(self, queue: Queue, msg: Message) -> bool:
        """Hold ``msg`` when it is a chunk task's job (True); else False (run it now)."""
        task = chunk_task(msg)
        if task is None:
            return False
        key = (queue, task.name)
        self._tasks[key] = task
        msgs = self._held.setdefault(key, [])
        msgs.append(msg)
        if len(msgs) == 1:
            self._due_at[key] = _due_at(task)
        return True

    def due(
        self, now: float, everything: bool = False
    ) -> list[tuple[Queue, Task[..., Any], list[Message]]]:
        """The chunks to call now: every full ``size``, and the rest of a task's jobs once
        the oldest has waited ``wait`` (``everything``: all, as a burst run ends)."""
        out: list[tuple[Queue, Task[..., Any], list[Message]]] = []
        for key, msgs in list(self._held.items()):
            task = self._tasks[key]
            assert task.chunk is not None  # (take holds only chunk tasks' jobs)
            size, cut = task.chunk.size, False
            while len(msgs) >= size:
                out.append((key[0], task, msgs[:size]))
                msgs, cut = msgs[size:], True
            if msgs and (everything or now >= self._due_at[key]):
                out.append((key[0], task, msgs))
                msgs = []
            if msgs:
                self._held[key] = msgs
                if cut:  # what is left of a full chunk begins the next one
                    self._due_at[key] = _due_at(task)
            else:
                del self._held[key], self._due_at[key]
        return out

    def seconds_left(self, now: float) -> float | None:
        """Seconds until the next chunk is due (None: none held)."""
        if not self._due_at:
            return None
        return max(0.0, min(self._due_at.values()) - now)

    def give_back(self, leases: Leases) -> None:
        """Release every job held here unrun (the worker is stopping)."""
        for (queue, _), msgs in self._held.items():
            for msg in msgs:
                leases.give_back(queue, msg)
        self._held.clear()
        self._due_at.clear()


def _due_at(task: Task[..., Any]) -> float:
    """When a chunk begun now is due: its task's ``wait`` from now (a backlog fills a
    chunk in claims long before; a trickle waits that long for more)."""
    assert task.chunk is not None
    return time.monotonic() + task.chunk.wait


def run_chunk(
    runner: Runner, queue: Queue, task: Task[..., Any], msgs: list[Message]
) -> list[Outcome]:
    """Call chunk task ``task`` once with the items of ``msgs`` (started jobs); one
    outcome per job, in order."""
    ctxs = [JobContext(m, queue, task.name, stopping=runner.stopping) for m in msgs]
    outcomes: list[Outcome | None] = [None] * len(msgs)
    items: list[Any] = []
    members: list[int] = []  # the jobs whose item the handler gets
    for i, ctx in enumerate(ctxs):
        try:
            args, kwargs = decode_call(ctx.message.body)
            if len(args) != 1 or kwargs:
                raise TypeError(f"{task.name} is a chunk task: a job holds one item")
        except Exception as exc:  # a rerun cannot help: dead at once
            error = f"corrupt record: body: {describe(exc)}"
            outcomes[i] = failed(ctx, task, error, exc, dead=True)
            continue
        items.append(args[0])
        members.append(i)
    if members:
        got = _call(runner, queue, task, [ctxs[i] for i in members], items)
        for i, outcome in zip(members, got, strict=True):
            outcomes[i] = outcome
    return [o for o in outcomes if o is not None]


def _call(
    runner: Runner, queue: Queue, task: Task[..., Any], ctxs: list[JobContext], items: list[Any]
) -> list[Outcome]:
    for ctx in ctxs:  # a cancel reaches each; the timeout interrupts the call
        runner.leases.attach(queue, ctx.message, ctx, task.timeout)
        if signals.job_started.receivers:
            send(signals.job_started, sender=task, job=ctx)
    _record_call(queue, ctxs)
    dbconn.before_job()
    set_current_chunk(ctxs)
    t0 = time.perf_counter()
    try:
        results = task.func(items)
    except ChunkFailed as exc:
        return _partly(task, ctxs, exc, time.perf_counter() - t0)
    except BaseException as exc:  # every job of the call failed with it
        error = f"{describe(exc)}\n{traceback.format_exc()}"
        return [failed(ctx, task, error, exc, dead=False) for ctx in ctxs]
    finally:
        set_current_chunk(None)
        dbconn.after_job()
    duration = (time.perf_counter() - t0) / len(ctxs)
    if results is None:
        results = [None] * len(ctxs)
    if not isinstance(results, list) or len(results) != len(ctxs):
        error = (
            f"chunk task {task.name} returned {type(results).__name__}"
            f"{f' of {len(results)}' if isinstance(results, list) else ''}: it must return "
            f"None or a list of one result per item ({len(ctxs)})"
        )
        return [failed(ctx, task, error, None, dead=True) for ctx in ctxs]
    return [
        succeeded(task, ctx, r, duration, flow_of(ctx.message.body))
        for ctx, r in zip(ctxs, results, strict=True)
    ]


def _record_call(queue: Queue, ctxs: list[JobContext]) -> None:
    """Record which jobs this call runs together, for the admin's job page (one round
    trip); a failure to record is logged, never the call's."""
    try:
        queue.engine.chunkcalls.record(ctxs[0].message.token, [c.id for c in ctxs])
    except ZQueueError as exc:
        log.warning("chunk call of %d jobs not recorded: %s", len(ctxs), exc)


def _partly(
    task: Task[..., Any], ctxs: list[JobContext], exc: ChunkFailed, took: float
) -> list[Outcome]:
    """The outcomes of a call that raised ChunkFailed: the items it names failed (by
    index or tag), the others succeeded with ``exc.results`` (or no result)."""
    tags = {ctx.id: i for i, ctx in enumerate(ctxs)}
    failures: dict[int, BaseException] = {}
    for key, error in exc.failures.items():
        i = tags.get(key) if isinstance(key, str) else key
        if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(ctxs):
            failures[i] = error
    results = (
        exc.results if isinstance(exc.results, list) and len(exc.results) == len(ctxs) else None
    )
    out: list[Outcome] = []
    for i, ctx in enumerate(ctxs):
        if i in failures:
            e = failures[i]
            tb = "".join(traceback.format_exception(e))
            out.append(failed(ctx, task, f"{describe(e)}\n{tb}", e, dead=False))
        elif not failures:  # it named no item of this call: every job failed with it
            out.append(failed(ctx, task, describe(exc), exc, dead=False))
        else:
            result = None if results is None else results[i]
            out.append(succeeded(task, ctx, result, took / len(ctxs), flow_of(ctx.message.body)))
    return out


__all__ = ["ChunkBuffers", "chunk_task", "run_chunk"]
