"""The scanner: promote due delayed jobs, recover expired leases, trim dead letters, and
fire due periodic schedules, on every queue it is given.

One :class:`Scanner` serves both ``manage.py zqueue_scanner`` and the scanner a worker
embeds (``Worker.scan_once``). A *step* scans each queue until the scan script reports
no more work (bounded), then fires due schedules (synced to Redis lazily: at the first
step that reaches Redis). :meth:`Scanner.run` repeats steps and rides out Redis being
down, restarting, failing over or answering ``LOADING``/``READONLY``/``BUSY``: capped
exponential backoff with jitter, one ``redis_lost`` line when Redis is lost and one
``redis_back`` line (with the outage length) when it is back. It never returns on a
connection error; only a configuration error (raised before the loop) stops it.
Each scan step is one atomic script, so any number of scanners may run at once.

With ``ZQUEUE["OUTBOX"]`` a step also relays the transactional outbox (jobs enqueued in a
database transaction, :mod:`django_zqueue.tasks.outbox`), and :meth:`Scanner.relay_tick` relays
it between steps, every ``outbox.RELAY_INTERVAL`` seconds (a worker's heartbeat and
:meth:`Scanner.run` call it), so a committed job is published within a second.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import conf
from ..engine.keys import KEYS_FIX
from ..engine.redis.outages import (
    ErrorLine,
    FullNotice,
    Outage,
    QueueBackoff,
    RetryDelay,
    full_refusal,
    is_unavailable,
)
from ..events import kv
from ..exceptions import RedisFull, ScriptError
from ..queue import Queue

if TYPE_CHECKING:
    from .health import Vitals

log = logging.getLogger("django_zqueue.scanner")

#: most scan script calls per queue in one step (each moves at most scan_batch jobs of
#: each kind); the next step carries on
MAX_STEPS = 1000
#: seconds between two looks at ``ZQUEUE["OUTBOX"]`` while it is off
RELAY_OFF_INTERVAL = 1.0


@dataclass
class StepTotals:
    """What one step did: per queue (promoted, recovered, buried, trimmed), and ticks fired."""

    queues: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    fired: int = 0
    dispatched: int = 0  # workflow outbox entries applied (what no worker finished)
    relayed: int = 0  # rows of the transactional outbox published (ZQUEUE["OUTBOX"])

    @property
    def busy(self) -> bool:
        return (
            self.fired > 0
            or self.dispatched > 0
            or self.relayed > 0
            or any(any(t) for t in self.queues.values())
        )


class Scanner:
    """Housekeeping of ``queues``; with a ``scheduler`` (a ``schedules.Scheduler``), also
    their periodic schedules. ``outage`` may be shared with other loops of the process
    (a worker's), so the process logs one lost/back pair per outage."""

    def __init__(
        self,
        queues: Sequence[Queue],
        scheduler: Any = None,
        *,
        name: str = "scanner",
        max_steps: int = MAX_STEPS,
        outage: Outage | None = None,
        retry: RetryDelay | None = None,
        report: Callable[[StepTotals], None] | None = None,
        paused: QueueBackoff | None = None,
        errors: ErrorLine | None = None,
    ) -> None:
        self.queues = list(queues)
        self.scheduler = scheduler
        self.name = name
        self.max_steps = max_steps
        self.outage = outage or Outage(log, scanner=name)
        #: what Redis at maxmemory refuses and the scans go on without (one line each)
        self.full = FullNotice(log, scanner=name)
        self.retry = retry or RetryDelay(base=0.1, cap=30.0)
        #: a queue whose scan fails with an error of its own (a key of the wrong type) is
        #: left alone for a growing while (up to 30 s); the other queues are scanned on
        self.paused = paused or QueueBackoff(base=0.1, cap=30.0)
        #: scan_error: one line per second for each kind of error, a traceback once
        self.errors = errors or ErrorLine(log)
        self.report = report or self._log_totals
        self.synced = False
        self.steps = 0  # steps that completed (for tests and operators)
        self.failures = 0  # steps that failed
        self.relay_retry = RetryDelay(base=0.25, cap=30.0)
        self.relayed = 0  # outbox rows this scanner published (for tests and operators)
        self.relayed_at_all = False  # whether a relay step ran (opened a connection)
        #: queue -> the minute (this host's clock) of its last roll-up of the minute ring
        self.rolled: dict[str, int] = {}

    def sync_schedules(self) -> None:
        """Write the schedules to Redis (raises what the write raises)."""
        if self.scheduler is None:
            return
        changes = self.scheduler.sync()
        self.synced = True
        if any(changes.values()):
            log.info(kv(event="schedules_synced", scanner=self.name, **changes))

    def step(self, stop: threading.Event | None = None, *, isolate: bool = False) -> StepTotals:
        """One step on every queue, then the due schedules. Raises what Redis raises
        (the queues scanned before the failure keep their work done). ``isolate`` (the
        scanner's own loop, :meth:`tick`): an error of one queue that is not an outage
        (a key of the wrong type) is logged and that queue left alone for a while
        (:attr:`paused`); the other queues are scanned on."""
        totals = StepTotals()
        for q in self.queues:
            if isolate and self.paused.wait(q.name) > 0:
                continue
            try:
                self.scan_queue(q, totals, stop)
            except Exception as exc:
                if not isolate or is_unavailable(exc):
                    raise
                self.queue_failed(q, exc)
                continue
            if isolate:
                self.paused.ok(q.name)
        if self.scheduler is not None:
            with self.full.refusing("schedules"):
                if not self.synced:
                    try:
                        self.sync_schedules()
                    except RedisFull:
                        raise
                    except Exception as exc:
                        error = str(exc)[:200]
                        fields = {"scanner": self.name, "error": error}
                        log.warning(kv(event="schedules_sync_failed", **fields))
                        raise
                totals.fired = self.scheduler.step()
        with self.full.refusing("outbox_relay"):
            totals.relayed = self.relay()
        self.steps += 1
        return totals

    def scan_queue(self, q: Queue, totals: StepTotals, stop: threading.Event | None) -> None:
        """Scan queue ``q`` until its scan reports no more work (bounded), then apply the
        workflow ends no worker dispatched."""
        moved = [0, 0, 0, 0]
        for _ in range(self.max_steps):
            r = q.scan()
            for i, v in enumerate((r.promoted, r.recovered, r.buried, r.trimmed)):
                moved[i] += v
            if not r.more or (stop is not None and stop.is_set()):
                break
        totals.queues[q.name] = (moved[0], moved[1], moved[2], moved[3])
        with self.full.refusing("workflow_outbox"):  # (it adds jobs: not at maxmemory)
            for _ in range(self.max_steps):  # workflow ends a worker did not dispatch
                n = q.engine.flow.drain()
                totals.dispatched += n
                if not n or (stop is not None and stop.is_set()):
                    break
        self.roll_up(q)

    def roll_up(self, q: Queue) -> None:
        """Once a minute (this host's clock) per queue, roll its minute ring up into the
        24-hour and 7-day rings (``engine.stats.roll_up``). Only an outage raises: at
        maxmemory it is said once (:attr:`full`), another error (a roll-up key of the
        wrong type) one ``roll_up_failed`` line, and the housekeeping goes on."""
        minute = int(time.time()) // 60
        if self.rolled.get(q.name) == minute:
            return
        self.rolled[q.name] = minute
        with self.full.refusing("roll_up"):
            try:
                q.engine.stats.roll_up()
            except Exception as exc:
                if is_unavailable(exc) or full_refusal(exc):
                    raise
                fields = {"scanner": self.name, "queue": q.name, "error": str(exc)[:300]}
                log.warning(kv(event="roll_up_failed", **fields))

    def queue_failed(self, q: Queue, exc: BaseException) -> None:
        """Queue ``q``'s scan failed, not for an outage: left alone for a growing while,
        one ``scan_error`` line per second at most (naming the key of the wrong type)."""
        self.failures += 1
        wait = self.paused.failed(q.name)
        self.errors.error(
            exc,
            lambda more: kv(
                event="scan_error",
                scanner=self.name,
                queue=q.name,
                retry_in=f"{wait:.2f}",
                error=str(exc)[:300],
                **more,
                **self.key_fields(exc),
            ),
        )

    def step_failed(self, exc: BaseException, wait: float) -> None:
        """A step failed, not for an outage: one ``scan_error`` line per second at most."""
        self.errors.error(
            exc,
            lambda more: kv(
                event="scan_error",
                scanner=self.name,
                retry_in=f"{wait:.2f}",
                error=str(exc)[:300],
                **more,
                **self.key_fields(exc),
            ),
        )

    def relay(self) -> int:
        """One relay step of the transactional outbox (none while ``ZQUEUE["OUTBOX"]`` is
        off): the rows published. Raises what Redis or the database raise."""
        if not conf.get_config().outbox:
            return 0
        from ..tasks import outbox

        self.relayed_at_all = True
        done = outbox.relay()
        if done.published:
            self.outage.ok()  # it reached Redis
        self.relayed += done.published
        return done.published

    def close(self) -> None:
        """Close the database connections the relay opened in this thread (when its loop
        ends: a thread's connections are its own)."""
        if self.relayed_at_all:
            from django.db import connections

            connections.close_all()

    def relay_tick(self) -> float:
        """One relay step that never raises: the seconds to wait before the next one
        (``outbox.RELAY_INTERVAL``, a growing backoff after failures)."""
        if not conf.get_config().outbox:
            return RELAY_OFF_INTERVAL
        from ..tasks import outbox

        try:
            n = self.relay()
        except Exception as exc:
            wait = self.relay_retry.next()
            if is_unavailable(exc):
                self.outage.failed(exc)
            elif full_refusal(exc):  # Redis at maxmemory: the rows wait, said once
                self.full.refused("outbox_relay")
            else:  # the database (a missing migration, a lost connection) or a bug
                log.error(
                    kv(event="outbox_relay_error", scanner=self.name, retry_in=f"{wait:.2f}"),
                    exc_info=exc,
                )
                outbox.close_broken_connections()
            return wait
        self.relay_retry.reset()
        if n:
            log.info(kv(event="outbox_relayed", scanner=self.name, jobs=n))
        return outbox.RELAY_INTERVAL

    def tick(self, interval: float, stop: threading.Event | None = None) -> float:
        """One step that never raises: the seconds to wait before the next one
        (``interval`` after a success, a growing backoff after failures)."""
        try:
            totals = self.step(stop, isolate=True)
        except Exception as exc:
            self.failures += 1
            wait = self.retry.next()
            if is_unavailable(exc):
                self.outage.failed(exc)
            else:  # the schedules, or a bug: say what it is, and back off all the same
                self.step_failed(exc, wait)
            return wait
        self.outage.ok()
        self.retry.reset()
        self.report(totals)
        return interval

    def key_fields(self, exc: BaseException) -> dict[str, str]:
        """For a script's error: the keys of the wrong type when Redis said WRONGTYPE,
        and how to find and repair them."""
        if not isinstance(exc, ScriptError) or not self.queues:
            return {}
        fields = {"fix": KEYS_FIX}
        if "WRONGTYPE" in str(exc) or "ZQ_CORRUPT_KEY" in str(exc):
            keys = self.queues[0].engine.workers.wrong_types([q.engine for q in self.queues])
            if keys:
                fields["key"] = ", ".join(keys)
        return fields

    def run(
        self, stop: threading.Event, interval: float = 1.0, vitals: Vitals | None = None
    ) -> None:
        """Step every ``interval`` seconds until ``stop`` is set, through any outage;
        each turn of the loop ticks ``vitals`` (the health probes', health.py)."""
        log.info(kv(event="scanner_start", scanner=self.name, queues=len(self.queues)))
        next_step = next_relay = time.monotonic()
        if vitals is not None:
            vitals.prepared = True
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_step:
                next_step = now + self.tick(interval, stop)
                next_relay = time.monotonic() + self.relay_tick()  # the step relayed
            elif now >= next_relay:
                next_relay = now + self.relay_tick()
            wait = max(0.0, min(next_step, next_relay) - time.monotonic())
            if vitals is not None:  # a backoff (up to 30 s) is not a blocked loop
                vitals.tick("scanner loop", wait)
            stop.wait(wait)
        self.close()
        log.info(kv(event="scanner_stop", scanner=self.name, steps=self.steps))

    def _log_totals(self, totals: StepTotals) -> None:
        for name, (p, r, b, t) in totals.queues.items():
            if p or r or b or t:
                log.info(
                    kv(
                        event="scan",
                        scanner=self.name,
                        queue=name,
                        promoted=p,
                        recovered=r,
                        buried=b,
                        trimmed=t,
                    )
                )
        if totals.fired:
            log.info(kv(event="schedules_fired", scanner=self.name, fired=totals.fired))
        if totals.dispatched:
            log.info(kv(event="workflow_dispatched", scanner=self.name, ends=totals.dispatched))
        if totals.relayed:
            log.info(kv(event="outbox_relayed", scanner=self.name, jobs=totals.relayed))
