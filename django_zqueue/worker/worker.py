"""The :class:`Worker`: its threads, and how it starts and stops.

``run()`` starts ``concurrency`` consumer threads (:mod:`.consumer`) and one heartbeat
thread, which keeps the leases (:mod:`.leases`) and runs the embedded scanner step
(:meth:`Worker.scan_once`) every ``scan_interval`` seconds.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import conf
from ..engine.redis.outages import Outage, QueueBackoff, RetryDelay, Throttle, is_unavailable
from ..events import kv, log
from ..exceptions import QueueUnavailable, ZQueueError
from ..queue import get_queue
from ..tasks import joblog, tracing
from .consumer import AUTO_PREFETCH_MAX, Consumer
from .health import DEFAULT_TIMEOUT, Vitals
from .leases import Leases
from .outcome import Failure, Outcome, Released
from .recycle import RECYCLED_COUNTER, Budget, Recycler
from .runner import Runner
from .scanner import Scanner
from .stopsignals import SignalRelay

ORDERS_EVERY = 1.0  # seconds between two reads of the orders left for the worker (quiet, stop)

if TYPE_CHECKING:
    from ..tasks.schedules import Scheduler
    from .aio import AioLane


def _check_options(
    queues: Sequence[str],
    concurrency: int,
    prefetch: int | None,
    weights: Sequence[float] | None,
    cancel_grace: float,
    pool: str,
) -> None:
    """A worker's options, before anything starts: ValueError naming the bad one."""
    if concurrency < 1 or (prefetch is not None and prefetch < 1):
        raise ValueError("concurrency and prefetch must be >= 1")
    if cancel_grace < 0:
        raise ValueError("cancel_grace must be >= 0")
    if pool not in ("thread", "process"):
        raise ValueError("pool must be 'thread' or 'process'")
    if weights is not None and len(weights) != len(queues):
        raise ValueError("give one weight per queue")


class Worker:
    """Runs registered tasks from ``queues``. ``run()`` returns when stopped or, with
    ``burst``, when the queues have nothing ready."""

    def __init__(
        self,
        queues: Sequence[str] = ("default",),
        *,
        concurrency: int = 1,
        prefetch: int | None = None,
        burst: bool = False,
        max_jobs: int | None = None,
        scanner: bool = True,
        scan_interval: float = 2.0,
        weights: Sequence[float] | None = None,
        grace: float = 30.0,
        name: str | None = None,
        cancel_grace: float = 5.0,
        pool: str = "thread",
        async_concurrency: int = 0,
        health_timeout: float = DEFAULT_TIMEOUT,
        max_jobs_per_child: int | None = None,
        max_memory_mb: float | None = None,
    ) -> None:
        _check_options(queues, concurrency, prefetch, weights, cancel_grace, pool)
        self.queues = [get_queue(q) for q in queues]
        self.concurrency = concurrency
        # None: adaptive ("auto"), 1 to AUTO_PREFETCH_MAX jobs per claim (Consumer.next_batch)
        self.auto_prefetch = prefetch is None
        self.prefetch = AUTO_PREFETCH_MAX if prefetch is None else prefetch
        self.burst = burst
        self.max_jobs = max_jobs
        self.scanner = scanner
        self.scan_interval = scan_interval
        self.weights = list(weights) if weights is not None else None
        self.grace = grace
        self.id = name or f"{socket.gethostname()}:{os.getpid()}:{random.randrange(16**4):04x}"
        self.stopping = threading.Event()
        #: set by a ``quiet`` order (manage.py zqueue_worker_ctl, the admin's workers
        #: page): no more claims, the running jobs finish, the worker stays idle
        self.quiet = threading.Event()
        self.processed = 0
        self.failed = 0
        self._count_lock = threading.Lock()
        #: the jobs this worker holds a lease on, and their heartbeat
        self.leases = Leases(self.id, self.queues, concurrency, cancel_grace)
        #: runs one job to its outcome
        self.runner = Runner(self.id, self.leases, pool, self.stopping)
        self._signals = 0
        self._first_signal = 0.0
        self._done = threading.Event()  # set once running jobs are finished or released
        self.scheduler: Scheduler | None = None  # once run() starts, with the scanner
        self._lifecycle(health_timeout, Budget(max_jobs_per_child, max_memory_mb))
        self._on_errors()
        self._scanner: Scanner | None = None  # the embedded scanner (scanner.py)
        #: the notify lists of every queue, grouped by cluster slot (one BLPOP may only
        #: name keys of one slot on a Redis Cluster; one group elsewhere)
        self.wakeups = self.queues[0].engine.workers.wakeups([q.engine for q in self.queues])
        #: the event-loop lane for ``async def`` tasks (aio.py), or None
        self.lane: AioLane | None = self._lane(async_concurrency)

    def _on_errors(self) -> None:
        #: at most one error line per second for each kind of error (consumer_error,
        #: heartbeat_error), however many threads meet it
        self.errors = Throttle(1.0)
        #: a queue whose claims (or outcomes) fail for an error of its own, not an outage
        #: (a key of the wrong type), is left alone for a growing while, up to 5 s: the
        #: other queues go on (shared by the consumer threads and the event-loop lane)
        self.paused = QueueBackoff(base=0.1, cap=5.0)

    def _lifecycle(self, health_timeout: float, budget: Budget) -> None:
        """The outage log, the probes' facts and the process's budget."""
        # one redis_lost / redis_back pair per outage, whichever thread sees it first
        self.outage = Outage(log, worker=self.id)
        #: the liveness facts the health probes read (health.py; ``--health-port``)
        self.vitals = Vitals(self.outage, health_timeout, stopping=self.stopping)
        #: the process's budget (recycle.py): once spent, it stops as on SIGTERM and its
        #: ``reason`` says why (the parent of ``--processes`` starts another)
        self.recycler = Recycler(budget, self.stopping, self.id)

    def _lane(self, async_concurrency: int) -> AioLane | None:
        """The event-loop lane of ``async_concurrency`` slots (0: none; see aio.py)."""
        if async_concurrency == 0:
            return None
        from .aio import lane_for  # imported only now: redis.asyncio is slow to import

        return lane_for(self, async_concurrency)

    # ------------------------------------------------------------------ lifecycle

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the worker (a second one within the grace: at once);
        handled on a thread of their own (stopsignals.py), never inside the handler."""
        SignalRelay(self._on_signal).install()

    def _on_signal(self, signum: int) -> None:
        now = time.monotonic()
        if self._signals and now - self._first_signal < 1.0:
            return  # the same stop delivered twice (terminal + parent, or systemd + parent)
        self._signals += 1
        if self._signals == 1:
            self._first_signal = now
            log.info(kv(event="worker_stopping", worker=self.id, signal=signum))
            self.stopping.set()
        else:
            log.warning(kv(event="worker_exit_now", worker=self.id, signal=signum))
            self.leases.release_held(only_unstarted=False)
            os._exit(1)

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> int:
        """Run until stopped (or idle, with ``burst``). Returns the number of jobs run."""
        log.info(
            kv(
                event="worker_start",
                worker=self.id,
                queues=",".join(q.name for q in self.queues),
                concurrency=self.concurrency,
                prefetch="auto" if self.auto_prefetch else self.prefetch,
                burst=self.burst,
                **({"async_concurrency": self.lane.slots} if self.lane else {}),
            )
        )
        self._prepare()
        # JOB_LOGS["LEVEL"]: the logging records of the jobs go to their logs
        captured = joblog.capture(conf.get_config().job_logs.level)
        self.vitals.prepared = True
        threads = [
            threading.Thread(target=Consumer(self).run, name=f"zqueue-consumer-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        if self.lane is not None:
            threads.append(threading.Thread(target=self.lane.run, name="zqueue-aio", daemon=True))
        beat = threading.Thread(target=self._heartbeat, name="zqueue-heartbeat", daemon=True)
        for t in threads:
            t.start()
        beat.start()
        try:
            while any(t.is_alive() for t in threads):
                if self.stopping.wait(0.1):
                    break
            # stopping: buffered jobs go back at once; running ones get the grace period,
            # during which the heartbeat keeps extending their leases
            self.leases.release_held(only_unstarted=True)
            deadline = time.monotonic() + self.grace
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
        finally:
            self.stopping.set()
            self.leases.release_held(only_unstarted=False)
            self._done.set()
            beat.join(2.0)
            self.leases.unregister()
            if captured:
                joblog.release()
        if self.recycler.reason is not None:
            with contextlib.suppress(Exception):  # a counter: not worth failing the stop
                self.queues[0].engine.stats.incr(RECYCLED_COUNTER, 1)
        log.info(
            kv(event="worker_stop", worker=self.id, processed=self.processed, failed=self.failed)
        )
        return self.processed

    def publish_protocol(self) -> None:
        """Set each queue up for producers in other languages (docs/protocol.md): the
        protocol library loaded, the queue's policy in its proto hash. Redis down: left
        (``manage.py zqueue_protocol`` or the next start does it); a server that cannot
        (no Redis Functions, an ACL) is logged, and the worker runs on."""
        for q in self.queues:
            try:
                q.engine.protocol.publish()
            except QueueUnavailable:
                return
            except ZQueueError as exc:
                log.warning(
                    kv(event="protocol_not_set_up", worker=self.id, queue=q.name, error=str(exc))
                )
                return

    def _prepare(self) -> None:
        """Before the threads start: check the queues' layout, sync the schedules and,
        with ``burst``, run the scanner once."""
        tracing.prepare()  # OpenTelemetry's imports, if installed: not on a claimed job's time
        for q in self.queues:  # refuse a changed 'partitions' before running anything
            with contextlib.suppress(QueueUnavailable):  # down: checked at first claim
                q.engine.layout.check()
        self.publish_protocol()
        if self.scanner:
            from ..tasks.schedules import Scheduler

            self.scheduler = Scheduler([q.name for q in self.queues])
        if self.burst and self.scanner:
            # recover expired leases and promote due jobs before deciding "nothing left"
            self.scan_once()

    def count(self, outcome: Outcome) -> None:
        """Count a job that ran (``processed``; ``failed`` too for a Failure); a job
        given back unrun (Released) is not counted."""
        if isinstance(outcome, Released):
            return
        with self._count_lock:
            self.processed += 1
            processed = self.processed
            if isinstance(outcome, Failure):
                self.failed += 1
        if self.recycler.budget.limited:
            self.recycler.after_job(processed)

    # ------------------------------------------------------------------ heartbeat

    def _heartbeat(self) -> None:
        """Keep the leases (:meth:`Leases.beat`) and run the scanner; until the running
        jobs are finished or given back (through the grace period too). With Redis down,
        the leases are tried again after a growing backoff, and the outage is logged
        once (``redis_lost``, then ``redis_back``), not at every beat."""
        next_scan = next_relay = next_orders = 0.0
        next_try = 0.0  # after a failure: Redis is tried again from then on (backoff)
        retry = RetryDelay(base=0.05, cap=2.0)
        while not self._done.is_set():
            now = time.monotonic()
            self.vitals.beat()  # the probes' "heartbeat not stale" (health.py)
            if now >= next_orders and not self.stopping.is_set():
                next_orders = now + ORDERS_EVERY
                self.read_orders()
            self.leases.set_state(self.state)  # registered again at once when it changed
            try:
                self.leases.enforce_timeouts(now)
            except Exception:
                log.exception(kv(event="heartbeat_error", worker=self.id))
            if now >= next_try:
                try:
                    if self.leases.beat(now, hand_back=self.auto_prefetch):
                        self.outage.ok()  # only a call that reached Redis says it is back
                    retry.reset()
                except Exception as exc:
                    next_try = now + retry.next()
                    if is_unavailable(exc):
                        self.outage.failed(exc)  # one line per outage, not 20 a second
                    else:  # said once a second, its traceback once
                        self.heartbeat_failed(exc)
            if self.scanner and now >= next_scan and not self.stopping.is_set():
                # never raises; backs off on its own after a failure
                next_scan = now + self.embedded_scanner().tick(self.scan_interval)
            if self.scanner and now >= next_relay and not self.stopping.is_set():
                # the transactional outbox, between scans (ZQUEUE["OUTBOX"]; never raises)
                next_relay = time.monotonic() + self.embedded_scanner().relay_tick()
            self._done.wait(0.05)
        if self._scanner is not None:
            self._scanner.close()  # the relay's database connections of this thread

    @property
    def state(self) -> str:
        """What the worker does: running, quiet (claims no more) or stopping."""
        if self.stopping.is_set():
            return "stopping"
        return "quiet" if self.quiet.is_set() else "running"

    def read_orders(self) -> None:
        """Obey the orders left for this worker (``engine.workers.orders``): ``stop`` as
        SIGTERM, ``quiet`` claims no more (the jobs claimed and not started go back at
        once). Redis down: read at a later beat."""
        try:
            engine = self.queues[0].engine
            orders = engine.workers.orders([q.engine for q in self.queues], self.id)
        except Exception:
            return  # an outage: the leases' calls log it
        if "stop" in orders:
            log.info(kv(event="worker_stopping", worker=self.id, order="stop"))
            self.stopping.set()
        elif "quiet" in orders and not self.quiet.is_set():
            log.info(kv(event="worker_quiet", worker=self.id, order="quiet"))
            self.quiet.set()
            self.leases.release_held(only_unstarted=True)

    def heartbeat_failed(self, exc: BaseException) -> None:
        """A heartbeat's call failed, not for an outage: one line a second at most."""
        kind = f"heartbeat {str(exc)[:300]}"
        held = self.errors.due(kind)
        if held is None:
            return
        more = {"repeated": held} if held else {}
        trace = self.errors.first(kind)
        line = kv(event="heartbeat_error", worker=self.id, error=str(exc)[:300], **more)
        log.error(line, exc_info=exc if trace else None)

    def embedded_scanner(self) -> Scanner:
        """The scanner this worker runs (scanner.py), sharing its outage log."""
        if self._scanner is None:
            self._scanner = Scanner(
                self.queues, self.scheduler, name=self.id, max_steps=20, outage=self.outage
            )
        return self._scanner

    def scan_once(self) -> None:
        """One step of the embedded scanner (scanner.py): scan every queue until it
        reports no more work (bounded), fire due periodic schedules. Raises what Redis
        raises; the heartbeat runs it through ``Scanner.tick`` (backoff, no raise)."""
        self.embedded_scanner().step()
