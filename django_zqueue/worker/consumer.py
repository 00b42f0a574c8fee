"""One consumer thread of a worker: claim, run, report.

A consumer claims a batch of jobs, runs them one after the other and keeps their
outcomes until it next talks to Redis: then the acks and nacks of the finished jobs and
its next claim go in one pipelined round trip (:meth:`Consumer.flush_and_claim`).
Outcomes wait at most ~50 ms (a long batch flushes in between). Idle, it blocks on the
queues' notify lists (:meth:`Consumer.wait`), with its claim in the same round trip.

How many jobs a claim takes (prefetch) is fixed, or adaptive (:meth:`Consumer.next_batch`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..engine import Wakeups
from ..engine.keys import KEYS_FIX
from ..engine.records import Ack, NackResult
from ..engine.redis.connection import is_out_of_memory
from ..engine.redis.outages import (
    FullNotice,
    QueueBackoff,
    RetryDelay,
    Throttle,
    as_error,
    full_refusal,
    is_unavailable,
)
from ..engine.scripts import Batch, Pending, Sink, flow_ended
from ..events import kv, log
from ..exceptions import QueueUnavailable, ScriptError, ZQueueError
from ..queue import AckReply, Message, Queue
from . import dbconn, taskstats
from . import django_tasks as backend_runner
from .chunks import ChunkBuffers, run_chunk
from .outcome import Failure, Outcome, ParkedRun, Released, Success

if TYPE_CHECKING:
    from ..engine.redis.outages import Outage
    from .health import Vitals
    from .leases import Leases
    from .runner import Runner


class Lane(Protocol):
    """The event-loop lane (:class:`.aio.AioLane`) as a consumer thread sees it."""

    def submit(self, queue: Queue, msg: Message) -> bool: ...


class Host(Protocol):
    """What a consumer thread uses of its worker (:class:`~.worker.Worker` is one)."""

    id: str
    queues: list[Queue]
    wakeups: Wakeups
    leases: Leases
    runner: Runner
    outage: Outage
    errors: Throttle  # one consumer_error line per second for each kind of error
    #: claims of a queue left alone after an error of its own (a key of the wrong type)
    paused: QueueBackoff
    stopping: threading.Event
    quiet: threading.Event  # a quiet order: claim no more, finish what runs, stay idle
    auto_prefetch: bool
    prefetch: int
    burst: bool
    max_jobs: int | None
    weights: list[float] | None
    vitals: Vitals  # the liveness facts the health probes read (health.py)

    @property
    def lane(self) -> Lane | None: ...

    def count(self, outcome: Outcome) -> None: ...


AUTO_PREFETCH_MAX = 20  # adaptive prefetch: most jobs one claim takes
AUTO_HOLD_SECONDS = 0.05  # adaptive prefetch: most work (estimated) one claim takes
FLUSH_AFTER = 0.05  # seconds a finished job's outcome may wait for the next round trip
#: after an error, the retry delay starts again from its base only once a claim brought
#: jobs, or after this many seconds without an error (an empty claim proves little: a
#: corrupt key may fail only the claims that find work)
RETRY_RESET_AFTER = 10.0


class Finished(NamedTuple):
    """A job that ran, and its outcome, not yet sent."""

    queue: Queue
    message: Message
    outcome: Outcome


Reply = Pending[bool] | Pending[NackResult] | AckReply


def add_outcomes(batch: Sink, done: list[Finished]) -> list[Reply]:
    """Queue the acks (Successes: one ``ack_many`` call per queue shard), nacks
    (Failures: one call each) and releases (Released: one call each, no attempt used)
    of ``done`` in ``batch``; one reply per job, in order."""
    replies: list[Reply | None] = [None] * len(done)
    acks: dict[Queue, tuple[list[int], list[Ack]]] = {}
    for i, f in enumerate(done):
        out, q, msg = f.outcome, f.queue, f.message
        if isinstance(out, Success) and out.passed:  # a workflow job hands on its result
            replies[i] = batch.add(
                q.engine.consume.ack_call(msg, out.result, out.result_ttl, out.run_ms, out.passed)
            )
        elif isinstance(out, Success):
            where, items = acks.setdefault(q, ([], []))
            where.append(i)
            items.append(q.engine.consume.make_ack(msg, out.result, out.result_ttl, out.run_ms))
        elif isinstance(out, Released):
            replies[i] = batch.add(q.engine.consume.release_call(msg))
        elif isinstance(out, Failure):
            replies[i] = batch.add(
                q.engine.consume.nack_call(msg, out.error, out.retry_in, dead=out.dead)
            )
    for q, (where, items) in acks.items():
        for i, part in zip(where, q.engine.consume.add_acks(batch, items), strict=True):
            replies[i] = part
    return [r for r in replies if r is not None]


def settle(done: list[Finished], replies: Sequence[Reply]) -> None:
    """Once the batch of :func:`add_outcomes` is sent: the acks ``ack_many`` left to
    ``ack.lua`` (see :meth:`Queue.settle_acks`), one more round trip per queue that has
    any; a failure to send is QueueUnavailable (the loop retries the whole flush)."""
    by_queue: dict[Queue, list[AckReply]] = {}
    for f, r in zip(done, replies, strict=True):
        if isinstance(r, AckReply):
            by_queue.setdefault(f.queue, []).append(r)
    for q, acks in by_queue.items():
        try:
            q.engine.consume.settle_acks(acks)
        except ZQueueError:
            raise
        except Exception as exc:
            raise as_error(exc) from exc


def _ended(reply: Reply) -> bool:
    """Whether the job's end went to the workflow outbox (its dependents are to be told);
    ``ack_many`` leaves every workflow job to ``ack.lua`` (``redo``)."""
    if isinstance(reply, AckReply):
        return reply.redo is not None and flow_ended(reply.redo.call, reply.redo.reply)
    return flow_ended(reply.call, reply.reply)


def dispatch_ends(queue: Queue, tags: list[str], full: FullNotice | None = None) -> None:
    """Tell the dependents of workflow jobs that ended (their outbox entries); on any
    error the scanner's drain does it later (Redis at maxmemory: said once by ``full``)."""
    try:
        queue.dispatch(tags)
    except Exception as exc:
        if full is not None and full_refusal(exc):
            full.refused("workflow_dispatch")
            return
        error = str(exc)[:200]
        log.warning(kv(event="dispatch_deferred", queue=queue.name, jobs=len(tags), error=error))


def report_error(worker: Host, exc: BaseException, wait: float, **more: Any) -> None:
    """Log a consumer's error that is not an outage: one line per second at most for
    each kind of error (the others counted in ``repeated``); a script's error says the
    key of the wrong type when Redis said WRONGTYPE, and how to find and repair it."""
    kind = f"{type(exc).__name__}: {str(exc)[:300]}"
    held = worker.errors.due(kind)
    if held is None:
        return
    fields: dict[str, Any] = dict(more)
    if held:
        fields["repeated"] = held
    trace = worker.errors.first(kind)  # the traceback once; the next lines say the error
    if not trace:
        fields["error"] = str(exc)[:300]
    if isinstance(exc, ScriptError):
        engines = [q.engine for q in worker.queues]
        keys = (
            worker.queues[0].engine.workers.wrong_types(engines)
            if "WRONGTYPE" in str(exc) or "ZQ_CORRUPT_KEY" in str(exc)
            else []
        )
        if keys:
            fields["key"] = ", ".join(keys)
        fields["fix"] = KEYS_FIX
    log.error(
        kv(event="consumer_error", worker=worker.id, retry_in=f"{wait:.2f}", **fields),
        exc_info=exc if trace else None,
    )


def _send(queue: Queue, batch: Batch, full: FullNotice) -> None:
    """Send ``batch``; a failure to send it is raised as what it is (an outage:
    QueueUnavailable, which the loop rides out; Redis full; a script's error). Redis at
    maxmemory refuses the per-task statistics in it (the ends of the jobs and the claim
    run there): they are left out, said once by ``full``."""
    try:
        replies = queue.engine.send(batch)
    except ZQueueError:
        raise
    except Exception as exc:
        raise as_error(exc) from exc
    with full.refusing("task_statistics"):
        for reply in replies:
            if isinstance(reply, Exception) and is_out_of_memory(reply):
                raise reply


def kept_on_error(failed: BaseException) -> bool:
    """Whether an outcome a script refused with ``failed`` is kept (still held, its lease
    extended) and sent again, rather than dropped: an outage, Redis full, a key of the
    wrong type (until it is repaired) all pass; only a call refused for its arguments
    (ZQ_BAD_ARGUMENT, which no retry changes) is dropped."""
    return "ZQ_BAD_ARGUMENT" not in str(failed)


class Consumer:
    """The loop of one consumer thread of ``worker`` (:meth:`run`)."""

    def __init__(self, worker: Host) -> None:
        self.worker = worker
        self.done: list[Finished] = []  # finished jobs whose outcome is not sent yet
        self.want = 1 if worker.auto_prefetch else worker.prefetch  # next claim's size
        self.per_job = -1.0  # moving average of this thread's job run times, s (-1: none yet)
        self.retry = RetryDelay(base=0.1, cap=5.0)  # the wait after errors (backoff)
        self.failed_at = 0.0  # monotonic time of the last error
        #: when the oldest outcome not sent yet finished (None: none; outcomes kept after
        #: a refusal do not count: they go with the next flush, not one flush per job)
        self.oldest: float | None = None
        #: the chunk tasks' jobs this thread holds until their chunk is due
        self.chunks = ChunkBuffers()

    def run(self) -> None:
        """Claim and run jobs until the worker stops (or, with ``burst``, runs dry)."""
        name = threading.current_thread().name
        try:
            with dbconn.consumer():  # connections kept across back-to-back jobs
                self._loop()
        finally:
            self.worker.vitals.gone(name)

    def _loop(self) -> None:
        w = self.worker
        name = threading.current_thread().name
        while True:
            w.vitals.tick(name)  # the probes' "claim loop not blocked" (health.py)
            try:
                if not self.step():
                    return
            except Exception as exc:  # Redis down, or a bug: never let the loop die
                wait = self.retry.next()
                self.failed_at = time.monotonic()
                if is_unavailable(exc):
                    w.outage.failed(exc)  # one line per outage, not per thread or try
                else:  # a script error or a bug: reported as what it is, with backoff
                    report_error(w, exc, wait)
                w.vitals.tick(name, wait)  # a backoff is not a blocked loop
                w.stopping.wait(wait)

    def step(self) -> bool:
        """One claim (waiting for work when there is none) and the run of what it
        brought. False when this consumer is done."""
        w = self.worker
        if w.stopping.is_set():
            self.chunks.give_back(w.leases)
            self.flush()
            return False
        if w.quiet.is_set():
            return self.idle_quiet()
        self.run_chunks()
        budget = self.budget(self.want)
        if budget == 0:
            self.run_chunks(everything=True)
            self.flush()
            if w.max_jobs is not None and w.leases.claimed >= w.max_jobs:
                w.stopping.set()
            return False
        queue, msgs, hints = self.claim(budget)
        if msgs or time.monotonic() - self.failed_at > RETRY_RESET_AFTER:
            self.retry.reset()
        w.outage.ok()
        if queue is None:
            if w.burst and not any(h == 0 for h in hints):
                if not self.chunks:
                    return False
                self.run_chunks(everything=True)  # a burst run calls what it holds
                return True
            dbconn.idle()  # no work ready: a connection kept for jobs is closed when idle
            left = self.chunks.seconds_left(time.monotonic())
            wait = min([*hints, 1.0] if left is None else [*hints, 1.0, max(left, 0.01)])
            w.vitals.tick(threading.current_thread().name, wait)  # (a blocking wait)
            woke = self.wait(wait, budget) if wait > 0 else None
            if woke is None:
                return True
            queue, msgs = woke  # claimed in the wake-up's own round trip
        name = threading.current_thread().name
        w.vitals.job(name, True)  # a long job is not a blocked loop
        try:
            self.run_batch(queue, msgs)
        finally:
            w.vitals.job(name, False)
        self.want = self.next_batch(budget, len(msgs), self.per_job)
        return True

    def idle_quiet(self) -> bool:
        """A quiet worker's thread: what it holds goes back, its outcomes are sent, and
        it claims nothing (a ``burst`` run ends)."""
        w = self.worker
        self.chunks.give_back(w.leases)
        self.flush()
        if w.burst:
            return False
        w.vitals.tick(threading.current_thread().name, 1.0)  # (an idle wait)
        w.stopping.wait(1.0)
        return True

    # ------------------------------------------------------------------ claiming

    def order(self) -> list[Queue]:
        """The worker's queues in the order to claim from."""
        w = self.worker
        if w.weights is None or len(w.queues) == 1:
            return w.queues
        # weighted: draw the first queue by weight, the others after it in order
        first = random.choices(range(len(w.queues)), weights=w.weights)[0]
        return [w.queues[first]] + [q for i, q in enumerate(w.queues) if i != first]

    def budget(self, want: int) -> int:
        """How many jobs the next claim may take (``max_jobs`` counts them all)."""
        w = self.worker
        if w.max_jobs is None:
            return want
        return max(0, min(want, w.max_jobs - w.leases.claimed))

    def next_batch(self, want: int, got: int, per_job: float) -> int:
        """Adaptive prefetch: the next claim's size after a claim of ``want`` brought
        ``got`` jobs that ran ``per_job`` seconds each on average (recent jobs).

        A full claim (the line is long) doubles the size, a short one (the line is
        short) goes back to 1, and the size never holds more than AUTO_HOLD_SECONDS of
        work: short jobs are claimed by the dozen, slow ones one at a time."""
        w = self.worker
        if not w.auto_prefetch:
            return w.prefetch
        size = min(w.prefetch, want * 2) if got >= want else 1
        if per_job < 0:  # nothing ran yet: no estimate
            return 1
        return max(1, min(size, int(AUTO_HOLD_SECONDS / max(per_job, 1e-4))))

    def claim(self, budget: int) -> tuple[Queue | None, list[Message], list[float]]:
        """Claim up to ``budget`` jobs from the first queue in order that has some (the
        first claim goes with the pending outcomes). Returns that queue and its jobs, or
        None, no jobs, and the queues' hints (seconds until work may be due).

        A queue whose claim fails for an error of its own, not an outage (a key of the
        wrong type), is logged and left alone for a growing while (``worker.paused``):
        the other queues are claimed from as usual. An outage raises (the loop backs
        off as a whole)."""
        w = self.worker
        hints: list[float] = []
        first = True
        for q in self.order():
            paused = w.paused.wait(q.name)
            if paused > 0:
                hints.append(paused)
                continue
            try:
                if first:
                    first = False
                    msgs, hint = self.flush_and_claim(q, budget)
                else:
                    msgs, hint = q.claim(budget, w.id)
            except Exception as exc:
                if is_unavailable(exc):
                    raise
                wait = w.paused.failed(q.name)
                report_error(w, exc, wait, queue=q.name)
                hints.append(wait)
                continue
            w.paused.ok(q.name, proved=bool(msgs))
            if msgs:
                return q, msgs, hints
            if hint is not None:
                hints.append(hint)
        if first:  # every queue left alone: the outcomes go on their own
            self.flush()
        return None, [], hints

    def first_open(self) -> Queue | None:
        """The first queue in order that is not left alone after an error."""
        return next((q for q in self.order() if self.worker.paused.wait(q.name) <= 0), None)

    def wait(self, seconds: float, budget: int) -> tuple[Queue, list[Message]] | None:
        """Block until a wake-up token comes (or ``seconds``, at most 1 s, pass).

        On a single Redis, the claim of the first queue in order goes in the same
        pipeline, right behind the BLPOP: Redis runs it as soon as the BLPOP returns, so
        a woken thread has its job one round trip after the publish, not two. Returns
        that queue and what it claimed, or None (then the loop claims as usual)."""
        w = self.worker
        block = max(0.01, min(seconds, 1.0, w.queues[0].engine.max_block))
        first = self.first_open()
        try:
            if first is None:  # every queue left alone after an error: no wake-up to wait for
                w.stopping.wait(block)
                return None
            if not w.wakeups.pipelined:
                w.wakeups.wait(block)
                return None
            batch = first.engine.batch()
            batch.command("blpop", w.wakeups.groups[0], timeout=block)
            plan = first.engine.consume.plan_claim(budget, w.id)
            pending = batch.add(plan.call)
            replies = first.engine.send(batch)
        except Exception as exc:  # a dropped connection while idle: retried by the loop
            if is_unavailable(exc):
                raise QueueUnavailable(str(exc)) from exc
            self.wait_failed(exc, block)
            return None
        if isinstance(replies[0], Exception):  # the BLPOP (a notify list of a wrong type)
            if is_unavailable(replies[0]):
                raise as_error(replies[0])
            self.wait_failed(replies[0], block)
        failed = pending.failed
        if failed is not None:
            if is_unavailable(failed):
                raise as_error(failed)
            report_error(w, as_error(failed), w.paused.failed(first.name), queue=first.name)
            return None
        msgs, _ = first.engine.consume.claim_rest(plan, pending.result())
        return (first, msgs) if msgs else None

    def wait_failed(self, exc: BaseException, block: float) -> None:
        """The wait for a wake-up failed, not for an outage (a notify list of the wrong
        type): said once a second at most; the thread sleeps instead (``block``), and
        claims on."""
        report_error(self.worker, as_error(exc), block, call="blpop")
        self.worker.stopping.wait(block)

    # ------------------------------------------------------------------ running

    def run_batch(self, queue: Queue, msgs: list[Message]) -> None:
        """Hold and run the jobs of one claim, in order; when stopping, give back the
        ones not started."""
        w = self.worker
        w.leases.hold(queue, msgs)
        for n, msg in enumerate(msgs):
            if w.stopping.is_set() or w.quiet.is_set():
                # give back what this loop holds but has not started
                for rest in msgs[n:]:
                    w.leases.give_back(queue, rest)
                break
            if self.chunks.take(queue, msg):
                continue  # a chunk task's job: held until its chunk is due
            if not w.leases.start(queue, msg):
                continue  # given back already (stopping, or a slow job before it)
            if w.lane is not None and w.lane.submit(queue, msg):
                continue  # an async task: the event-loop lane runs and reports it
            t0 = time.monotonic()
            self.ended(queue, msg, w.runner.run(queue, msg), t0)
        if self.chunks:
            self.run_chunks()

    def ended(self, queue: Queue, msg: Message, outcome: Outcome, t0: float) -> None:
        """A job's run ended (it began at ``t0``): its outcome kept to be sent."""
        w = self.worker
        w.count(outcome)
        if isinstance(outcome, ParkedRun):  # park.lua moved the job: nothing to send
            w.leases.unhold(queue, msg)
            return
        if not w.leases.finish(queue, msg):  # cancel.lua ended it: nothing to send
            log.info(kv(event="job_cancelled", queue=queue.name, job=msg.tag))
            return
        self.done.append(Finished(queue, msg, outcome))
        if self.oldest is None:
            self.oldest = outcome.finished
        now = time.monotonic()
        ran = now - t0
        self.per_job = ran if self.per_job < 0 else self.per_job + (ran - self.per_job) * 0.2
        if now - self.oldest > FLUSH_AFTER:
            self.flush()

    def run_chunks(self, everything: bool = False) -> None:
        """Call the chunk tasks whose chunk is due (``everything``: all it holds)."""
        if not self.chunks:
            return
        w = self.worker
        for queue, task, msgs in self.chunks.due(time.monotonic(), everything):
            started = [m for m in msgs if w.leases.start(queue, m)]  # (not cancelled meanwhile)
            if not started:
                continue
            t0 = time.monotonic()
            for msg, outcome in zip(
                started, run_chunk(w.runner, queue, task, started), strict=True
            ):
                self.ended(queue, msg, outcome, t0)

    # ------------------------------------------------------------------ reporting

    def flush_and_claim(self, q: Queue, budget: int) -> tuple[list[Message], float | None]:
        """Send the finished jobs' acks/nacks and the next claim in one round trip."""
        if not self.done:
            return q.claim(budget, self.worker.id)
        batch = q.engine.batch()
        pending = add_outcomes(batch, self.done)
        taskstats.add_to(batch, self.done)  # per-task statistics, in the same round trip
        plan = q.engine.consume.plan_claim(budget, self.worker.id)
        claimed = batch.add(plan.call)
        _send(q, batch, self.worker.leases.full)
        self.outcomes_sent(pending)
        if claimed.failed is not None:
            raise as_error(claimed.failed)
        return q.engine.consume.claim_rest(plan, claimed.result())

    def flush(self) -> None:
        """Send the finished jobs' acks/nacks."""
        if not self.done:
            return
        q = self.done[0].queue
        batch = q.engine.batch()
        pending = add_outcomes(batch, self.done)
        taskstats.add_to(batch, self.done)  # per-task statistics, in the same round trip
        _send(q, batch, self.worker.leases.full)
        self.outcomes_sent(pending)

    def outcomes_sent(self, pending: Sequence[Reply]) -> None:
        """Act on the replies to the sent outcomes (``pending``, one per finished job).
        An outcome refused by an outage (a slot migrating, a failover), by Redis being
        full or by a key of the wrong type is kept, still held (so its lease is extended
        meanwhile), and sent again with the next flush, so the job does not run again;
        while a queue's outcomes are refused for an error of its own, its claims are
        left alone (``worker.paused``). A resend after a lost reply is refused as stale,
        harmlessly."""
        settle(self.done, pending)
        self.oldest = None
        again = []
        refused: dict[str, BaseException] = {}
        ended: dict[str, tuple[Queue, list[str]]] = {}
        for f, p in zip(self.done, pending, strict=True):
            q, msg, out = f.queue, f.message, f.outcome
            if _ended(p):
                ended.setdefault(q.name, (q, []))[1].append(msg.tag)
            failed = p.failed
            if failed is not None and (is_unavailable(failed) or kept_on_error(failed)):
                again.append(f)
                if not is_unavailable(failed):
                    refused.setdefault(q.name, failed)
                continue
            self.worker.leases.unhold(q, msg, given_back=isinstance(out, Released))
            if failed is not None:
                log.error(kv(event="ack_failed", queue=q.name, job=msg.tag, error=str(failed)))
                continue
            # an ack's reply: True, or False when stale; a nack's: "retry", "dead", or
            # None when stale (the lease was recovered, or the job handed to another)
            reply = p.result()
            if reply is False or reply is None:
                log.warning(
                    kv(event="stale_delivery", queue=q.name, job=msg.tag, attempt=msg.attempt)
                )
                continue
            buried = reply == "dead"
            if buried and isinstance(out, Failure) and out.on_failure is not None:
                try:
                    out.on_failure(out.context, out.exception)
                except Exception:
                    log.exception(kv(event="failure_hook_error", queue=q.name, job=msg.tag))
            if out.record is not None:
                backend_runner.outcome_sent(q, msg, out, buried=buried)
        self.done[:] = again
        for name, failed in refused.items():  # its claims wait until the outcomes go
            wait = self.worker.paused.failed(name)
            report_error(self.worker, as_error(failed), wait, queue=name, outcomes="kept")
        for q, tags in ended.values():
            dispatch_ends(q, tags, self.worker.leases.full)
