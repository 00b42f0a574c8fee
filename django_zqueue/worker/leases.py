"""The leases a worker holds, and the heartbeat that keeps them (BullMQ's lock manager).

Every claimed job is *held* from its claim until its outcome was sent or it was given
back: buffered (claimed with others, not started), running in a consumer thread, or
finished and waiting for its ack. The heartbeat thread, every 50 ms, calls
:meth:`Leases.beat`: it interrupts jobs past their task's timeout or their cancel's
grace, hands back the jobs
waiting behind a slow one (adaptive prefetch), extends the leases that are due (a third
of a lease, at most 10 s, apart; a reply of ``touch.lua`` also says a job was
cancelled) and every 10 s records the worker on its queues.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..engine import Engine
from ..engine.records import lenient_text
from ..engine.redis.outages import FullNotice, Throttle, as_error, is_unavailable
from ..engine.scripts import CANCELLED
from ..events import kv, log
from ..exceptions import JobCancelled, JobTimeout, ZQueueError
from ..queue import Message, Queue
from ..tasks.context import JobContext

REGISTER_EVERY = 10.0  # seconds between worker registrations
GIVE_BACK_AFTER = 1.0  # adaptive prefetch: a job this slow hands its thread's waiting ones back
WORKER_FORGOTTEN_MS = 300_000  # a registration older than this is removed


@dataclass(slots=True)
class Held:
    """A job this worker holds a lease on: buffered (thread None), running, or finished
    and waiting for its ack to be sent (finished True)."""

    message: Message
    queue: Queue
    next_beat: float  # monotonic time of its next lease extension
    thread: int | None = None  # ident of the thread running it; None while buffered
    owner: int | None = None  # ident of the consumer thread that claimed it
    started: float = 0.0
    timeout: float | None = None
    timed_out: bool = False
    finished: bool = False
    context: JobContext | None = None  # what the running job sees (cancel_requested)
    cancelled: bool = False  # cancelled in Redis (touch said so): its outcome is not sent
    cancel_at: float = 0.0  # monotonic time JobCancelled is raised, unless it stopped
    cancel_raised: bool = False
    #: stops the job instead of raising in its thread (a coroutine of the event-loop lane:
    #: its thread runs other jobs too)
    stop: Callable[[], object] | None = None


def beat_every(queue: Queue, msg: Message) -> float:
    """Seconds between lease extensions of ``msg``: a third of its lease, at most 10 s."""
    lease_ms = queue.engine.lease_ms(msg)
    return max(0.05, min(lease_ms / 3000, 10.0))


#: a held job's key: one delivery (queue name, tag, token), not one tag: a job handed
#: back unstarted and claimed again by another thread of the same worker is a new
#: delivery, and the old one's message must find nothing held
HeldKey = tuple[str, str, int]


def held_key(queue: Queue, msg: Message) -> HeldKey:
    return (queue.name, msg.tag, msg.token)


class Leases:
    """The jobs worker ``worker_id`` holds, by delivery (queue name, tag, token); safe
    across threads.

    ``claimed`` counts the jobs claimed and not given back (what ``max_jobs`` limits)."""

    def __init__(
        self, worker_id: str, queues: list[Queue], threads: int, cancel_grace: float = 5.0
    ) -> None:
        self.worker_id = worker_id
        #: seconds a cancelled job may take to stop by itself before JobCancelled
        self.cancel_grace = cancel_grace
        self.queues = queues
        self.threads = threads
        self._held: dict[HeldKey, Held] = {}
        self._claimed = 0
        self._lock = threading.Lock()
        self._next_register = 0.0
        self.errors = Throttle(1.0)  # one line a second for extensions refused
        self.started_ms = int(time.time() * 1000)  # shown on the admin's workers page
        #: what the worker does, in its registration: running, quiet or stopping
        self.state = "running"
        #: the writes Redis at maxmemory refuses and the worker goes on without
        self.full = FullNotice(log, worker=worker_id)

    @property
    def claimed(self) -> int:
        with self._lock:
            return self._claimed

    # ------------------------------------------------------------------ the consumers' side

    def hold(self, queue: Queue, msgs: list[Message]) -> None:
        """Hold jobs the calling consumer thread claimed."""
        now = time.monotonic()
        owner = threading.get_ident()
        beats: dict[int | None, float] = {}  # by the job's own lease, if any (most: None)
        with self._lock:
            self._claimed += len(msgs)
            for m in msgs:
                beat = beats.get(m.visibility_timeout_ms)
                if beat is None:
                    beat = beats[m.visibility_timeout_ms] = now + beat_every(queue, m)
                self._held[held_key(queue, m)] = Held(m, queue, beat, owner=owner)

    def get(self, queue: Queue, msg: Message) -> Held | None:
        with self._lock:
            return self._held.get(held_key(queue, msg))

    def start(self, queue: Queue, msg: Message) -> bool:
        """Mark a held job as running in this thread; False if it was given back (this
        delivery: the job may be held again under a newer one, by another thread)."""
        key = held_key(queue, msg)
        with self._lock:
            h = self._held.get(key)
            if h is None or h.cancelled:  # a job cancelled before it started never starts
                self._held.pop(key, None)
                return False
            h.thread = threading.get_ident()
            h.started = time.monotonic()
            return True

    def attach(
        self, queue: Queue, msg: Message, ctx: JobContext, timeout: float | None = None
    ) -> None:
        """The running job's context, told when the job is cancelled, and the ``timeout``
        its task allows it in this thread (None: no limit, as by default; one call per
        job, not two: it is on every job's path)."""
        with self._lock:
            h = self._held.get(held_key(queue, msg))
            if h is not None:
                h.context = ctx
                h.timeout = timeout
                if h.cancelled:
                    ctx.request_cancel()

    def on_cancel(self, queue: Queue, msg: Message, stop: Callable[[], object]) -> None:
        """A job that is stopped by ``stop()``, not by an exception raised in its thread,
        when it was cancelled and is past its grace (an ``async def`` job)."""
        with self._lock:
            h = self._held.get(held_key(queue, msg))
            if h is not None:
                h.stop = stop

    def finish(self, queue: Queue, msg: Message) -> bool:
        """The job ran. True: its outcome is to be sent, and it stays held (its lease
        extended) until then; False: it was cancelled in Redis (``cancel.lua`` ended it),
        nothing is to be sent and it is no longer held."""
        key = held_key(queue, msg)
        with self._lock:
            h = self._held.get(key)
            if h is None:
                return True
            if h.cancelled:
                del self._held[key]
                return False
            h.finished = True
            return True

    def unhold(self, queue: Queue, msg: Message, *, given_back: bool = False) -> None:
        """The job's outcome was sent: its lease is no longer this worker's concern
        (``given_back``: the outcome was a release, the claim is not counted)."""
        with self._lock:
            self._held.pop(held_key(queue, msg), None)
            if given_back:
                self._claimed -= 1

    def give_back(self, queue: Queue, msg: Message) -> None:
        """Release a held job unrun (the attempt is not counted). A delivery no longer
        held (the heartbeat handed it back already) is neither released nor counted
        again."""
        with self._lock:
            if self._held.pop(held_key(queue, msg), None) is None:
                return
            self._claimed -= 1
        queue.release(msg)

    # ------------------------------------------------------------------ the heartbeat

    def beat(self, now: float, *, hand_back: bool) -> bool:
        """One heartbeat's calls to Redis: hand-backs (``hand_back``: adaptive prefetch),
        lease extensions, and the worker's registration when due. True when a call
        reached Redis; raises QueueUnavailable when Redis is down (the leases that were
        due stay due, for the next try)."""
        if hand_back:
            self.hand_back_waiting(now)
        reached = self.extend(now)
        if now >= self._next_register:
            with self.full.refusing("worker_registration"):  # at maxmemory: left out
                self.register()
            self._next_register = now + REGISTER_EVERY
            reached = True
        return reached

    def set_state(self, state: str) -> None:
        """The worker's state changed: registered again at the next beat (the workers
        page shows it within a second, not at the next 10 s registration)."""
        if state != self.state:
            self.state = state
            self._next_register = 0.0

    def enforce_timeouts(self, now: float) -> None:
        """Raise JobTimeout in the thread of each job past its task's timeout, and
        JobCancelled in that of each cancelled job past its grace (once)."""
        with self._lock:
            late = [
                h
                for h in self._held.values()
                if h.thread is not None
                and not h.finished
                and h.timeout is not None
                and not h.timed_out
                and now - h.started > h.timeout
            ]
            stopped = [
                h
                for h in self._held.values()
                if h.cancelled
                and h.thread is not None
                and not h.finished
                and not h.cancel_raised
                and now >= h.cancel_at
            ]
            for h in stopped:
                h.cancel_raised = True
        for h in late:
            h.timed_out = True
            log.warning(
                kv(event="job_timeout", queue=h.queue.name, job=h.message.tag, timeout=h.timeout)
            )
            _raise_in(h.thread or 0, JobTimeout)
        for h in stopped:
            log.warning(kv(event="job_cancel_forced", queue=h.queue.name, job=h.message.tag))
            if h.stop is not None:
                h.stop()
            else:
                _raise_in(h.thread or 0, JobCancelled)

    def hand_back_waiting(self, now: float) -> None:
        """Adaptive prefetch: when a job has run for GIVE_BACK_AFTER seconds, the jobs its
        thread claimed with it and has not started go back in line, at their place, for
        other threads and workers (the attempt is not counted)."""
        with self._lock:
            slow = {
                h.thread
                for h in self._held.values()
                if h.thread is not None and not h.finished and now - h.started > GIVE_BACK_AFTER
            }
            if not slow:
                return
            back = [h for h in self._held.values() if h.thread is None and h.owner in slow]
            for h in back:  # its consumer will not start what is no longer held
                del self._held[held_key(h.queue, h.message)]
            self._claimed -= len(back)
        self._send_releases(back)

    def extend(self, now: float) -> bool:
        """Extend the leases that are due, in one round trip; True if any were. On a
        failure they stay due (retried after the heartbeat's backoff) and it raises."""
        with self._lock:
            due = [h for h in self._held.values() if h.next_beat <= now and not h.cancelled]
            for h in due:
                h.next_beat = now + beat_every(h.queue, h.message)
        if not due:
            return False
        batch = due[0].queue.engine.batch()
        pending = [batch.add(h.queue.engine.consume.touch_call(h.message)) for h in due]
        try:
            due[0].queue.engine.send(batch)
            failed = next((f for p in pending if (f := p.failed) and is_unavailable(f)), None)
            if failed is not None:
                raise as_error(failed) from failed
        except Exception as exc:
            with self._lock:  # due again: retried after the heartbeat's backoff
                for h in due:
                    h.next_beat = now
            if isinstance(exc, ZQueueError):
                raise
            raise as_error(exc) from exc
        refused = [(h, f) for h, p in zip(due, pending, strict=True) if (f := p.failed)]
        if refused:  # an error of the job's queue (a key of the wrong type): the others go on
            self._refused(now, refused)
        done = [(h, p) for h, p in zip(due, pending, strict=True) if p.failed is None]
        self._cancelled([h for h, p in done if p.result() == CANCELLED])
        return True

    def _refused(self, now: float, refused: list[tuple[Held, BaseException]]) -> None:
        """Extensions refused for an error of their queue, not an outage: tried again
        in a second (the other leases are extended as usual), one line a second."""
        with self._lock:
            for h, _ in refused:
                h.next_beat = now + 1.0
        h, exc = refused[0]
        error = as_error(exc)
        held = self.errors.due(f"touch {str(error)[:300]}")
        if held is not None:
            log.error(
                kv(
                    event="heartbeat_error",
                    worker=self.worker_id,
                    queue=h.queue.name,
                    jobs=len(refused),
                    error=str(error)[:300],
                    **({"repeated": held} if held else {}),
                )
            )

    def _cancelled(self, held: list[Held]) -> None:
        """Jobs cancelled in Redis: tell each one, and give it ``cancel_grace`` seconds."""
        if not held:
            return
        now = time.monotonic()
        with self._lock:
            for h in held:
                h.cancelled = True
                h.cancel_at = now + self.cancel_grace
                if h.context is not None:
                    h.context.request_cancel()
        for h in held:
            log.info(kv(event="job_cancel_seen", queue=h.queue.name, job=h.message.tag))

    def release_held(self, *, only_unstarted: bool) -> None:
        """Give back every held job (``only_unstarted``: the buffered ones), in one round
        trip; a consumer will not start what is no longer held."""
        with self._lock:
            held = [h for h in self._held.values() if not only_unstarted or h.thread is None]
            for h in held:
                del self._held[held_key(h.queue, h.message)]
        self._send_releases(held)

    def _send_releases(self, held: list[Held]) -> None:
        if not held:
            return
        try:
            batch = held[0].queue.engine.batch()
            for h in held:
                batch.add(h.queue.engine.consume.release_call(h.message))
            held[0].queue.engine.send(batch)
            log.info(kv(event="released", worker=self.worker_id, jobs=len(held)))
        except Exception:
            log.warning(kv(event="release_failed", worker=self.worker_id, jobs=len(held)))

    # ------------------------------------------------------------------ registration

    def register(self) -> None:
        """Record this worker on each queue; drop entries of workers long gone (a killed
        worker cannot remove its own)."""
        now_ms = int(time.time() * 1000)
        entry = json.dumps(
            {
                "threads": self.threads,
                "seen": now_ms,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started": self.started_ms,
                "state": self.state,
            }
        )
        engine = self.queues[0].engine
        hashes = engine.workers.register([q.engine for q in self.queues], self.worker_id, entry)
        stale: list[tuple[Engine, Any]] = []
        for q, entries in zip(self.queues, hashes, strict=True):
            for wid, raw in entries.items():
                seen = seen_ms(raw)
                if seen is None:  # garbage (a hand edit, a bug): nothing reads it
                    log.warning(
                        kv(
                            event="worker_entry_corrupt",
                            queue=q.name,
                            key=q.engine.workers.key(),
                            field=lenient_text(wid),
                            entry=lenient_text(raw[:200]),
                            fix="removed: a worker's entry is JSON with a number 'seen'",
                        )
                    )
                if seen is None or seen < now_ms - WORKER_FORGOTTEN_MS:
                    stale.append((q.engine, wid))
        if stale:
            engine.workers.forget(stale)

    def unregister(self) -> None:
        """Remove this worker's entries (a clean stop)."""
        try:
            engine = self.queues[0].engine
            engine.workers.forget([(q.engine, self.worker_id) for q in self.queues])
        except Exception:
            log.warning(kv(event="unregister_failed", worker=self.worker_id))


def seen_ms(raw: bytes | str) -> float | None:
    """When a worker's entry in a workers hash says it was last seen (ms); None for an
    entry that is not JSON, not an object, or without a finite number ``seen``."""
    try:
        entry = json.loads(raw)
    except ValueError:  # (bad UTF-8 too)
        return None
    seen = entry.get("seen") if isinstance(entry, dict) else None
    if isinstance(seen, bool) or not isinstance(seen, int | float) or not math.isfinite(seen):
        return None
    return seen


def _raise_in(thread: int, exc: type[BaseException]) -> None:
    """Raise ``exc`` in thread ``thread`` at its next Python bytecode."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exc))
