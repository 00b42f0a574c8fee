"""``drain()``: the jobs waiting run in the test's own process and thread, through the
real worker path (docs/testing.md): a :class:`~django_zqueue.worker.Worker` in burst
mode whose consumer loop (:class:`~django_zqueue.worker.consumer.Consumer`) runs here,
so claims, the serializer, model loading, signals, acks and nacks, retries, dead
letters, ``on_failure``, workflow dependents and durable steps all happen as in
production. Between passes the worker's scanner takes a step (expired jobs, leases lost,
workflow ends; no periodic schedule fires) and the queues' delayed jobs are made due
(``engine.sandbox.fast_forward``): a delay, a retry's backoff and a durable sleep take no
time. No heartbeat runs, so no time limit interrupts a task."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..exceptions import JobCancelled, ZQueueError
from ..queue import Message, Queue
from ..worker import dbconn
from ..worker.consumer import Consumer
from ..worker.outcome import Failure, Outcome, ParkedRun, Success
from ..worker.runner import Runner
from ..worker.worker import Worker

#: seconds between two beats of the heartbeat of ``drain(time_limits=True)``
HEARTBEAT = 0.05
#: most passes of one drain (a pass runs what is ready, then makes delayed jobs due)
MAX_PASSES = 1000


class JobNotRun(ZQueueError):
    """A job that failed without its task being called (an unknown task name, a body
    that is not a call): raised by ``drain()`` with the worker's reason."""


class DrainTimeout(ZQueueError):
    """``drain()`` ran past its ``timeout``, or past its number of jobs: a task that
    enqueues itself for ever, say."""


@dataclass
class DrainSummary:
    """What one ``drain()`` ran: how many runs succeeded, failed (an attempt that
    raised) and parked (a durable sleep or wait), the jobs that ended dead, and each of
    these by task name."""

    succeeded: int = 0
    failed: int = 0
    parked: int = 0
    dead: int = 0
    by_task: dict[str, Counter[str]] = field(default_factory=dict)
    #: the exceptions the failed runs raised, in order
    errors: list[BaseException] = field(default_factory=list)

    @property
    def ran(self) -> int:
        """Runs in all (a job retried counts once per run)."""
        return self.succeeded + self.failed + self.parked

    def add(self, task: str, what: str) -> None:
        setattr(self, what, getattr(self, what) + 1)
        self.by_task.setdefault(task, Counter())[what] += 1


class _Runner(Runner):
    """The worker's runner, telling each outcome to the drain."""

    def __init__(self, worker: _DrainWorker) -> None:
        super().__init__(worker.id, worker.leases, worker.runner.pool)
        self.drain = worker

    def run(self, queue: Queue, msg: Message) -> Outcome:
        outcome = super().run(queue, msg)
        self.drain.seen(queue, msg, outcome)
        return outcome


class _DrainWorker(Worker):
    def __init__(self, queues: list[str], raise_errors: bool, max_jobs: int) -> None:
        super().__init__(queues, burst=True, scanner=False, prefetch=1, max_jobs=max_jobs)
        self.runner = _Runner(self)
        self.raise_errors = raise_errors
        self.summary = DrainSummary()
        self.failures: list[tuple[Queue, str, str]] = []  # (queue, job, task)

    def seen(self, queue: Queue, msg: Message, outcome: Outcome) -> None:
        body = msg.body
        task = str(body.get("task", "")) if isinstance(body, dict) else ""
        if isinstance(outcome, Success):
            self.summary.add(task, "succeeded")
        elif isinstance(outcome, ParkedRun):
            self.summary.add(task, "parked")
        elif isinstance(outcome, Failure) and not isinstance(outcome.exception, JobCancelled):
            self.summary.add(task, "failed")
            self.failures.append((queue, msg.tag, task))
            error = outcome.exception
            self.summary.errors.append(error if error is not None else JobNotRun(outcome.error))
            if self.raise_errors:  # the rest of the claim is given back
                self.stopping.set()


def run_pass(
    queues: list[str], raise_errors: bool, max_jobs: int, deadline: float, time_limits: bool = False
) -> _DrainWorker:
    """One pass: what is ready runs, in this thread, until none is left (or the first
    failure with ``raise_errors``); the outcomes are sent before it returns. With
    ``time_limits``, a heartbeat thread keeps the leases and interrupts a task past its
    ``timeout`` (``JobTimeout``), as a worker's does."""
    worker = _DrainWorker(queues, raise_errors, max_jobs)
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), worker.stopping.set)
    timer.daemon = True
    timer.start()
    done = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(worker, done), daemon=True)
    if time_limits:
        beat.start()
    try:
        with dbconn.callers_connections():  # the test's connections stay the test's
            Consumer(worker).run()
    finally:
        timer.cancel()
        done.set()
        if time_limits:
            beat.join(5)
    return worker


def _heartbeat(worker: _DrainWorker, done: threading.Event) -> None:
    """The worker's heartbeat, as far as a test needs it: time limits and leases."""
    while not done.wait(HEARTBEAT):
        now = time.monotonic()
        worker.leases.enforce_timeouts(now)
        with contextlib.suppress(ZQueueError):  # Redis gone: the pass meets it too
            worker.leases.beat(now, hand_back=False)


def _count_dead(summary: DrainSummary, failures: list[tuple[Queue, str, str]]) -> None:
    for queue, tag, task in failures:
        if queue.state(tag) == "dead":
            summary.add(task, "dead")


def drain(
    queues: list[str],
    *,
    delayed: bool = True,
    raise_errors: bool = True,
    max_jobs: int = 10_000,
    timeout: float = 60.0,
    before_pass: Callable[[], object] | None = None,
    time_limits: bool = False,
) -> DrainSummary:
    """Run every waiting job of ``queues`` (see the module's docstring); returns what
    ran. ``delayed``: delayed jobs, retries and durable sleeps are made due and run too.
    ``raise_errors``: the first exception a task raises is raised here, with the task's
    own traceback (the job's failure is recorded as in production first).
    ``before_pass`` is called before each pass (the test's commits, :mod:`.commits`)."""
    total = DrainSummary()
    deadline = time.monotonic() + timeout
    for _ in range(MAX_PASSES):
        if before_pass is not None:
            before_pass()
        worker = one_pass(queues, raise_errors, max_jobs - total.ran, deadline, total, time_limits)
        if time.monotonic() >= deadline or total.ran >= max_jobs:
            for queue in worker.queues:  # Redis gone: QueueUnavailable, not a timeout
                queue.total_count()
            raise DrainTimeout(
                f"drain() stopped after {total.ran} runs and {timeout} s: is a task "
                "enqueueing itself for ever? (drain(max_jobs=..., timeout=...))"
            )
        # the worker's scanner, as its heartbeat runs it: expired jobs, leases lost,
        # workflow ends no run dispatched (no periodic schedule fires)
        scanned = worker.embedded_scanner().step().busy
        moved = sum(_fast_forward(q) for q in worker.queues) if delayed else 0
        if worker.summary.ran == 0 and moved == 0 and not scanned:
            return total
    raise DrainTimeout(f"drain() made {MAX_PASSES} passes and jobs are still due")


def one_pass(
    queues: list[str],
    raise_errors: bool,
    max_jobs: int,
    deadline: float,
    total: DrainSummary,
    time_limits: bool = False,
) -> _DrainWorker:
    """One pass of at most ``max_jobs`` runs, added to ``total``; the first error raised
    with ``raise_errors``."""
    worker = run_pass(queues, raise_errors, max_jobs, deadline, time_limits)
    _merge(total, worker.summary)
    _count_dead(total, worker.failures)
    if raise_errors and worker.summary.errors:
        raise worker.summary.errors[0]
    return worker


def _fast_forward(queue: Queue) -> int:
    return queue.engine.sandbox.fast_forward()


def _merge(total: DrainSummary, part: DrainSummary) -> None:
    for task, counts in part.by_task.items():
        for what, n in counts.items():
            for _ in range(n):
                total.add(task, what)
    total.errors.extend(part.errors)


def run_one(
    queue: Queue, tag: str, raise_errors: bool = True, time_limits: bool = False
) -> DrainSummary:
    """Run job ``tag`` of ``queue`` now (moved to the front of its line, then claimed
    and run through the worker path); raises ``LookupError`` when it is not waiting."""
    if not queue.run_now(tag):
        raise LookupError(f"job {tag} is not waiting in queue {queue.name!r}")
    total = DrainSummary()
    one_pass([queue.name], raise_errors, 1, time.monotonic() + 60.0, total, time_limits)
    return total


__all__ = ["DrainSummary", "DrainTimeout", "JobNotRun", "drain", "one_pass", "run_one"]
