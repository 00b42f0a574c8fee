"""The event-loop lane's state (:class:`LaneBase`): its slots, its runs, the outcomes not
sent yet, and the loop's events; the parts of :class:`~.aio.AioLane` build on it
(:mod:`.lane_runs` running jobs, :mod:`.lane_outcomes` sending their ends,
:mod:`.lane_claims` claiming)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from ..tasks import tracing
from .consumer import Consumer, Finished, Host
from .leases import HeldKey


class LaneHost(Host, Protocol):
    """What the lane uses of its worker (:class:`~.worker.Worker` is one)."""

    grace: float
    concurrency: int


class LaneBase:
    """The state of the event-loop lane of ``worker`` (at most ``slots`` jobs at once),
    and its slots: taken for a claim (:meth:`_reserve`), given back (:meth:`_release`)."""

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
        self._flushes = 0  # outcome round trips ended (burst: claim again after one)
        #: sync jobs the lane claims run here, at most ``concurrency`` at once
        self._executor = ThreadPoolExecutor(
            worker.concurrency, thread_name_prefix="zqueue-aio-sync"
        )

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
