"""The worker: claim -> run -> ack/nack, with leases, heartbeats and graceful shutdown.

Each of ``concurrency`` threads is a consumer loop. A loop sends the acks of the jobs it
finished and its next claim in one pipelined round trip, and holds at most ``prefetch``
claimed jobs (by default an adaptive number: 1 when the line is short or jobs are slow,
up to 20 short jobs when the line is long). Idle, it blocks on the queues' notify lists
(no sleep-polling), so a new job starts within milliseconds. A heartbeat thread extends
the leases of every held job, enforces task timeouts, registers the worker, and runs the
embedded scanner step.

SIGTERM/SIGINT: stop claiming, give back held-but-unstarted jobs at once, let running
jobs finish within ``grace`` seconds, then give back what still runs, and exit 0. A
second signal gives back everything held and exits at once. SIGKILL loses nothing
either: the leases expire and the jobs run again.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import random
import signal
import socket
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections

from . import registry, signals
from .backoff import Outage, RetryDelay, as_error, is_unavailable
from .connection import is_cluster, slot_groups, wait_any
from .exceptions import QueueUnavailable
from .queue import CLAIM_CHUNK, NO_RESULT, NOTIFY_CAP, Message, Queue, encode_body, get_queue
from .scanner import Scanner
from .serializer import MalformedPayload, ModelInstanceMissing, decode_call

log = logging.getLogger("django_zqueue.worker")

_current = threading.local()


class JobTimeout(Exception):
    """Raised inside a job that ran past its task's ``timeout``."""


@dataclass
class JobContext:
    """What a running job knows about itself (``django_zqueue.current_job()``)."""

    message: Message
    queue: Queue
    task_name: str
    started: float = field(default_factory=time.monotonic)

    @property
    def id(self) -> str:
        return self.message.tag

    @property
    def attempt(self) -> int:
        return self.message.attempt

    def progress(self, value: float, note: str = "") -> None:
        """Record progress (0.0-1.0 and a short note) on the job record; extends the lease."""
        self.queue.touch(self.message, progress=value, note=note)


def current_job() -> JobContext | None:
    """The job running in this thread, or None outside a job."""
    return getattr(_current, "job", None)


def _kv(**fields: Any) -> str:
    return " ".join(
        f"{k}={json.dumps(v) if isinstance(v, str) and ' ' in v else v}" for k, v in fields.items()
    )


@dataclass
class _Held:
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
    ) -> None:
        if concurrency < 1 or (prefetch is not None and prefetch < 1):
            raise ValueError("concurrency and prefetch must be >= 1")
        if weights is not None and len(weights) != len(queues):
            raise ValueError("give one weight per queue")
        self.queues = [get_queue(q) for q in queues]
        self.concurrency = concurrency
        # None: adaptive ("auto"), 1 to AUTO_PREFETCH_MAX jobs per claim (see _next_batch)
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
        self.processed = 0
        self.failed = 0
        self._claimed = 0  # claimed and not given back: what max_jobs counts
        self._count_lock = threading.Lock()
        self._held: dict[tuple[str, str], _Held] = {}
        self._held_lock = threading.Lock()
        self._signals = 0
        self._first_signal = 0.0
        self._done = threading.Event()  # set once running jobs are finished or released
        self.scheduler: Any = None  # a schedules.Scheduler once run() starts
        # one redis_lost / redis_back pair per outage, whichever thread sees it first
        self._outage = Outage(log, worker=self.id)
        self._scanner: Scanner | None = None  # the embedded scanner (scanner.py)
        self._notify_keys = [key for q in self.queues for key in q.notify_keys]
        self._client = self.queues[0].client
        # One BLPOP may only name keys of one slot on a Redis Cluster: group the notify
        # keys by slot (one group, all the keys, elsewhere)
        self._notify_groups = slot_groups(self._client, self._notify_keys)
        self._wait_turn = [0]

    # ------------------------------------------------------------------ lifecycle

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        now = time.monotonic()
        if self._signals and now - self._first_signal < 1.0:
            return  # the same stop delivered twice (terminal + parent, or systemd + parent)
        self._signals += 1
        if self._signals == 1:
            self._first_signal = now
            log.info(_kv(event="worker_stopping", worker=self.id, signal=signum))
            self.stopping.set()
        else:
            log.warning(_kv(event="worker_exit_now", worker=self.id, signal=signum))
            self._release_held(only_unstarted=False)
            os._exit(1)

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> int:
        """Run until stopped (or idle, with ``burst``). Returns the number of jobs run."""
        log.info(
            _kv(
                event="worker_start",
                worker=self.id,
                queues=",".join(q.name for q in self.queues),
                concurrency=self.concurrency,
                prefetch="auto" if self.auto_prefetch else self.prefetch,
                burst=self.burst,
            )
        )
        for q in self.queues:  # refuse a changed 'partitions' before running anything
            with contextlib.suppress(QueueUnavailable):  # down: checked at first claim
                q.check_layout()
        if self.scanner:
            from .schedules import Scheduler

            self.scheduler = Scheduler([q.name for q in self.queues])
        if self.burst and self.scanner:
            # recover expired leases and promote due jobs before deciding "nothing left"
            self.scan_once()
        threads = [
            threading.Thread(target=self._consume, name=f"zqueue-consumer-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        beat = threading.Thread(target=self._heartbeat_loop, name="zqueue-heartbeat", daemon=True)
        for t in threads:
            t.start()
        beat.start()
        try:
            while any(t.is_alive() for t in threads):
                if self.stopping.wait(0.1):
                    break
            # stopping: buffered jobs go back at once; running ones get the grace period,
            # during which the heartbeat keeps extending their leases
            self._release_held(only_unstarted=True)
            deadline = time.monotonic() + self.grace
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
        finally:
            self.stopping.set()
            self._release_held(only_unstarted=False)
            self._done.set()
            beat.join(2.0)
            self._unregister()
        log.info(
            _kv(event="worker_stop", worker=self.id, processed=self.processed, failed=self.failed)
        )
        return self.processed

    # ------------------------------------------------------------------ consuming

    def _order(self) -> list[Queue]:
        if self.weights is None or len(self.queues) == 1:
            return self.queues
        # weighted: draw the first queue by weight, the others after it in order
        first = random.choices(range(len(self.queues)), weights=self.weights)[0]
        return [self.queues[first]] + [q for i, q in enumerate(self.queues) if i != first]

    def _budget(self, want: int) -> int:
        if self.max_jobs is None:
            return want
        with self._count_lock:
            left = self.max_jobs - self._claimed
        return max(0, min(want, left))

    def _next_batch(self, want: int, got: int, per_job: float) -> int:
        """Adaptive prefetch: the next claim's size after a claim of ``want`` brought
        ``got`` jobs that ran ``per_job`` seconds each on average (recent jobs).

        A full claim (the line is long) doubles the size, a short one (the line is
        short) goes back to 1, and the size never holds more than AUTO_HOLD_SECONDS of
        work: short jobs are claimed by the dozen, slow ones one at a time."""
        if not self.auto_prefetch:
            return self.prefetch
        size = min(self.prefetch, want * 2) if got >= want else 1
        if per_job < 0:  # nothing ran yet: no estimate
            return 1
        return max(1, min(size, int(AUTO_HOLD_SECONDS / max(per_job, 1e-4))))

    def _consume(self) -> None:
        done: list[tuple[Queue, Message, dict[str, Any]]] = []
        retry = RetryDelay(base=0.1, cap=5.0)
        want = 1 if self.auto_prefetch else self.prefetch
        per_job = -1.0  # moving average of this thread's job run times, s (-1: none yet)
        while True:
            try:
                if self.stopping.is_set():
                    self._flush(done)
                    return
                budget = self._budget(want)
                msgs: list[Message] = []
                queue: Queue | None = None
                hints: list[float] = []
                if budget == 0:
                    self._flush(done)
                    if self.max_jobs is not None and self._claimed >= self.max_jobs:
                        self.stopping.set()
                    return
                for i, q in enumerate(self._order()):
                    if i == 0:
                        msgs, hint = self._flush_and_claim(done, q, budget)
                    else:
                        msgs, hint = q.claim(budget, self.id)
                    if msgs:
                        queue = q
                        break
                    if hint is not None:
                        hints.append(hint)
                retry.reset()
                self._outage.ok()
                if queue is None:
                    if self.burst and not any(h == 0 for h in hints):
                        return
                    wait = min([*hints, 1.0])
                    woke = self._wait(wait, budget) if wait > 0 else None
                    if woke is None:
                        continue
                    queue, msgs = woke  # claimed in the wake-up's own round trip
                self._hold(queue, msgs)
                for n, msg in enumerate(msgs):
                    if self.stopping.is_set():
                        # give back what this loop holds but has not started
                        for rest in msgs[n:]:
                            self._give_back(queue, rest)
                        break
                    if not self._start(queue, msg):
                        continue  # given back already (stopping, or a slow job before it)
                    t0 = time.monotonic()
                    done.append((queue, msg, self._execute_safely(queue, msg)))
                    self._finish(queue, msg)
                    ran = time.monotonic() - t0
                    per_job = ran if per_job < 0 else per_job + (ran - per_job) * 0.2
                    if time.monotonic() - self._held_since(done) > 0.05:
                        self._flush(done)
                want = self._next_batch(budget, len(msgs), per_job)
            except Exception as exc:  # Redis down, or a bug: never let the loop die
                wait = retry.next()
                if is_unavailable(exc):
                    self._outage.failed(exc)  # one line per outage, not per thread or try
                else:  # a script error or a bug: reported as what it is, with backoff
                    log.error(
                        _kv(event="consumer_error", worker=self.id, retry_in=f"{wait:.2f}"),
                        exc_info=exc,
                    )
                if self.stopping.wait(wait):
                    continue

    def _held_since(self, done: list[tuple[Queue, Message, dict[str, Any]]]) -> float:
        return done[0][2]["finished"] if done else time.monotonic()

    def _wait(self, seconds: float, budget: int) -> tuple[Queue, list[Message]] | None:
        """Block until a wake-up token comes (or ``seconds``, at most 1 s, pass).

        On a single Redis, the claim of the first queue in order goes in the same
        pipeline, right behind the BLPOP: Redis runs it as soon as the BLPOP returns, so
        a woken thread has its job one round trip after the publish, not two. Returns
        that queue and what it claimed, or None (then the loop claims as usual)."""
        block = max(0.01, min(seconds, 1.0, self.queues[0]._max_block))
        first = self._order()[0]
        try:
            if len(self._notify_groups) > 1 or is_cluster(self._client) or first.partitions > 1:
                wait_any(self._client, self._notify_groups, block, self._wait_turn)
                return None
            pipe = first.scripts.pipeline()
            pipe.blpop(self._notify_groups[0], timeout=block)
            first._claim_call(min(budget, CLAIM_CHUNK), self.id, pipe)
            replies = first.scripts.execute(pipe, raise_on_error=False)
        except Exception as exc:  # a dropped connection while idle: retried by the loop
            raise QueueUnavailable(str(exc)) from exc
        for reply in replies:
            if isinstance(reply, Exception):
                raise as_error(reply)
        msgs, _ = first.claim_reply(replies[-1])
        return (first, msgs) if msgs else None

    def _hold(self, queue: Queue, msgs: list[Message]) -> None:
        with self._count_lock:
            self._claimed += len(msgs)
        now = time.monotonic()
        owner = threading.get_ident()
        with self._held_lock:
            for m in msgs:
                self._held[(queue.name, m.tag)] = _Held(
                    m, queue, now + _beat_every(queue, m), owner=owner
                )

    def _start(self, queue: Queue, msg: Message) -> bool:
        """Mark a held job as running in this thread; False if it was given back."""
        with self._held_lock:
            h = self._held.get((queue.name, msg.tag))
            if h is None:
                return False
            h.thread = threading.get_ident()
            h.started = time.monotonic()
            return True

    def _finish(self, queue: Queue, msg: Message) -> None:
        with self._held_lock:
            h = self._held.get((queue.name, msg.tag))
            if h is not None:
                h.finished = True

    def _unhold(self, queue: Queue, msg: Message) -> None:
        with self._held_lock:
            self._held.pop((queue.name, msg.tag), None)

    def _give_back(self, queue: Queue, msg: Message) -> None:
        with self._count_lock:
            self._claimed -= 1
        try:
            queue.release(msg)
        finally:
            self._unhold(queue, msg)

    def _flush_and_claim(
        self, done: list[tuple[Queue, Message, dict[str, Any]]], q: Queue, budget: int
    ) -> tuple[list[Message], float | None]:
        """Send the finished jobs' acks/nacks and the next claim in one round trip."""
        if not done:
            return q.claim(budget, self.id)
        pipe = q.scripts.pipeline()
        self._queue_outcomes(done, pipe)
        start = q.next_partition() if q.partitions > 1 else 0
        q._claim_call(min(budget, CLAIM_CHUNK), self.id, pipe, keys=q.part_keys[start])
        try:
            replies = q.scripts.execute(pipe, raise_on_error=False)
        except Exception as exc:
            raise QueueUnavailable(str(exc)) from exc
        self._outcomes_sent(done, replies[:-1])
        reply = replies[-1]
        if isinstance(reply, Exception):
            raise as_error(reply)
        msgs, hint = q.claim_reply(reply)
        if q.partitions > 1 and len(msgs) < budget:  # go on round-robin
            return q._claim_partitioned(budget, self.id, (start, msgs, hint))
        return msgs, (None if msgs or hint < 0 else hint / 1000)

    def _flush(self, done: list[tuple[Queue, Message, dict[str, Any]]]) -> None:
        if not done:
            return
        scripts = done[0][0].scripts
        pipe = scripts.pipeline()
        self._queue_outcomes(done, pipe)
        try:
            replies = scripts.execute(pipe, raise_on_error=False)
        except Exception as exc:
            raise QueueUnavailable(str(exc)) from exc
        self._outcomes_sent(done, replies)

    def _queue_outcomes(self, done: list[tuple[Queue, Message, dict[str, Any]]], pipe: Any) -> None:
        for q, msg, out in done:
            if out["ok"]:
                q.ack_pipelined(
                    msg, pipe, out.get("result", NO_RESULT), out["result_ttl"], out["run_ms"]
                )
            else:
                q.scripts.nack(
                    q.keys_for(msg.tag),
                    msg.tag,
                    msg.token,
                    out["error"][:65536],
                    int(out["retry_in"] * 1000),
                    out["dead"],
                    q._mode,
                    q._aging_us,
                    q.options.dead_letter_max,
                    q._dead_ttl_ms,
                    q.options.scan_batch,
                    NOTIFY_CAP,
                    client=pipe,
                )

    def _outcomes_sent(
        self, done: list[tuple[Queue, Message, dict[str, Any]]], replies: list[Any]
    ) -> None:
        again = []  # outcomes an outage refused: sent again with the next flush
        for (q, msg, out), reply in zip(done, replies, strict=True):
            if isinstance(reply, Exception) and is_unavailable(reply):
                # (a slot migrating, a failover): still held, so its lease is extended
                # meanwhile; a resend after a lost reply is refused as stale, harmlessly
                again.append((q, msg, out))
                continue
            self._unhold(q, msg)
            if isinstance(reply, Exception):
                log.error(_kv(event="ack_failed", queue=q.name, job=msg.tag, error=str(reply)))
            elif int(reply) == 0:
                log.warning(
                    _kv(event="stale_delivery", queue=q.name, job=msg.tag, attempt=msg.attempt)
                )
            else:
                if not out["ok"] and int(reply) == 2 and out.get("on_failure"):
                    try:
                        out["on_failure"](out["context"], out["exception"])
                    except Exception:
                        log.exception(_kv(event="failure_hook_error", queue=q.name, job=msg.tag))
                if "django_record" in out:
                    self._django_outcome_sent(q, msg, out, int(reply))
        done[:] = again

    def _django_outcome_sent(self, q: Queue, msg: Message, out: dict[str, Any], reply: int) -> None:
        """A Django task's failure: its record says READY (retry) or FAILED (dead)."""
        from . import backends

        record = out["django_record"]
        if out["ok"]:
            backends.send_finished(msg.tag, record)
            return
        if reply == 2:
            record["status"] = "FAILED"
            record["finished_at"] = record.get("finished_at") or backends.now_iso()
        else:
            record["status"] = "READY"
            record["finished_at"] = None
        try:
            backends.store_record(q, msg.tag, record, out["result_ttl"])
        except Exception:
            log.exception(_kv(event="record_failed", queue=q.name, job=msg.tag))
        if reply == 2 and not out.get("django_signalled"):
            backends.send_finished(msg.tag, record)

    # ------------------------------------------------------------------ running a job

    def _execute(self, queue: Queue, msg: Message) -> dict[str, Any]:
        body = msg.body
        name = body.get("task") if isinstance(body, dict) else None
        if isinstance(body, dict) and "django_task" in body and isinstance(name, str):
            return self._execute_django(queue, msg, body, name)
        task = registry.get(name) if isinstance(name, str) else None
        ctx = JobContext(msg, queue, name or "")
        if task is None:
            reason = (
                f"unknown task {name!r}: no task of that name is registered in this worker"
                if isinstance(name, str)
                else f"corrupt record: body is not a task call (undecodable payload: "
                f"{msg.raw_body[:200]!r})"
            )
            return self._failure(queue, msg, ctx, None, reason, None, dead=True)
        held = self._held.get((queue.name, msg.tag))
        if held is not None:
            held.timeout = task.timeout
        close_old_connections()
        _current.job = ctx
        t0 = time.perf_counter()
        try:
            args, kwargs = decode_call(body)
            _send(signals.job_started, sender=task, job=ctx)
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    _kv(
                        event="job_start",
                        queue=queue.name,
                        job=msg.tag,
                        task=name,
                        attempt=msg.attempt,
                    )
                )
            result = task.func(*args, **kwargs)
        except BaseException as exc:  # SystemExit from a task is a failure of that job too
            tb = traceback.format_exc()
            # a rerun cannot help these
            permanent = isinstance(exc, ModelInstanceMissing | MalformedPayload)
            corrupt = "corrupt record: body: " if isinstance(exc, MalformedPayload) else ""
            return self._failure(
                queue,
                msg,
                ctx,
                task,
                f"{corrupt}{type(exc).__module__}.{type(exc).__qualname__}: {exc}\n{tb}",
                exc,
                dead=permanent,
            )
        finally:
            _current.job = None
            close_old_connections()
        duration = time.perf_counter() - t0
        if task.store_result:
            try:
                encode_body(result)
            except (TypeError, ValueError) as exc:
                # dead, not retried: a rerun would repeat the task's side effects
                error = f"return value of {name} cannot be stored as JSON: {exc}"
                return self._failure(queue, msg, ctx, task, error, exc, dead=True)
        with self._count_lock:
            self.processed += 1
        _send(signals.job_finished, sender=task, job=ctx, result=result, duration=duration)
        if log.isEnabledFor(logging.DEBUG):  # one line per job: DEBUG (-v 2), not INFO
            log.debug(
                _kv(
                    event="job_done",
                    queue=queue.name,
                    job=msg.tag,
                    task=name,
                    attempt=msg.attempt,
                    ms=round(duration * 1000, 2),
                )
            )
        out: dict[str, Any] = {
            "ok": True,
            "result_ttl": task.result_ttl,
            "run_ms": int(duration * 1000),
            "finished": time.monotonic(),
        }
        if task.store_result:
            out["result"] = result
        return out

    def _execute_safely(self, queue: Queue, msg: Message) -> dict[str, Any]:
        """Run a job; a failure of the machinery around it (not of the task) still ends
        in a nack, so the job is never left leased by a live worker."""
        try:
            return self._execute(queue, msg)
        except Exception as exc:
            log.exception(_kv(event="job_machinery_error", queue=queue.name, job=msg.tag))
            ctx = JobContext(msg, queue, "")
            error = f"worker error around the job: {type(exc).__name__}: {exc}\n"
            return self._failure(
                queue, msg, ctx, None, error + traceback.format_exc(), exc, dead=False
            )

    def _execute_django(
        self, queue: Queue, msg: Message, body: dict[str, Any], name: str
    ) -> dict[str, Any]:
        """Run a job enqueued through Django's Tasks framework (ZQueueBackend)."""
        from . import backends

        ctx = JobContext(msg, queue, name)
        task = backends.resolve(name)
        if task is None:
            reason = (
                f"unknown task {name!r}: not a django.tasks Task in a module of an installed app"
            )
            return self._failure(queue, msg, ctx, None, reason, None, dead=True)
        backend = task.get_backend()
        if not isinstance(backend, backends.ZQueueBackend):
            reason = f"task {name!r} uses backend {backend.alias!r}, not a ZQueueBackend"
            return self._failure(queue, msg, ctx, None, reason, None, dead=True)
        record = backends.start_record(queue, msg.tag, body, self.id, backend.result_ttl)
        task_result = backends.result_from_record(msg.tag, record)
        close_old_connections()
        _current.job = ctx
        t0 = time.perf_counter()
        permanent = False  # a failure that a rerun cannot fix (and would repeat)
        try:
            backends.send_started(task_result)
            args, kwargs = body.get("args", []), body.get("kwargs", {})
            if task.takes_context:
                from ._django_tasks import TaskContext

                raw = task.call(TaskContext(task_result=task_result), *args, **kwargs)
            else:
                raw = task.call(*args, **kwargs)
            from ._django_tasks import normalize_json

            permanent = True  # from here on, the task has run: only its result is checked
            value = normalize_json(raw)
        except BaseException as exc:
            error = f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
            record["errors"].append(
                {
                    "exception_class_path": f"{type(exc).__module__}.{type(exc).__qualname__}",
                    "traceback": traceback.format_exc(),
                }
            )
            out = self._failure(
                queue, msg, ctx, None, error + "\n" + traceback.format_exc(), exc, dead=permanent
            )
            out["django_record"] = record
            out["result_ttl"] = backend.result_ttl
            if permanent or msg.attempt > msg.max_retries:
                # Final (the nack will bury it): signal now, inside the handler, so that
                # receivers see the exception (Django's own logging receiver does).
                record["status"] = "FAILED"
                record["finished_at"] = backends.now_iso()
                backends.send_finished(msg.tag, record)
                out["django_signalled"] = True
            return out
        finally:
            _current.job = None
            close_old_connections()
        duration = time.perf_counter() - t0
        with self._count_lock:
            self.processed += 1
        record.update(status="SUCCESSFUL", finished_at=backends.now_iso(), return_value=value)
        return {
            "ok": True,
            "result": record,
            "result_ttl": backend.result_ttl,
            "run_ms": int(duration * 1000),
            "finished": time.monotonic(),
            "django_record": record,
        }

    def _failure(
        self,
        queue: Queue,
        msg: Message,
        ctx: JobContext,
        task: Any,
        error: str,
        exc: BaseException | None,
        *,
        dead: bool,
    ) -> dict[str, Any]:
        will_retry = not dead and msg.attempt <= msg.max_retries
        backoff = (task.retry_backoff if task is not None else None) or queue.options.retry_backoff
        with self._count_lock:
            self.processed += 1
            self.failed += 1
        _send(
            signals.job_failed,
            sender=task,
            job=ctx,
            exception=exc,
            traceback=error,
            will_retry=will_retry,
        )
        log.warning(
            _kv(
                event="job_failed",
                queue=queue.name,
                job=msg.tag,
                task=ctx.task_name,
                attempt=msg.attempt,
                retry=will_retry,
                error=error.splitlines()[0][:200],
            )
        )
        return {
            "ok": False,
            "error": error,
            "retry_in": backoff.delay(msg.attempt),
            "dead": dead,
            "on_failure": getattr(task, "on_failure", None),
            "context": ctx,
            "exception": exc,
            "finished": time.monotonic(),
        }

    # ------------------------------------------------------------------ heartbeat

    def _heartbeat_loop(self) -> None:
        """Extend leases, enforce timeouts, register the worker, run the scanner; until
        the running jobs are finished or given back (through the grace period too)."""
        next_register = 0.0
        next_scan = 0.0
        next_try = 0.0  # after a failure: Redis is tried again from then on (backoff)
        retry = RetryDelay(base=0.05, cap=2.0)
        while not self._done.is_set():
            now = time.monotonic()
            try:
                self._enforce_timeouts(now)
            except Exception:
                log.exception(_kv(event="heartbeat_error", worker=self.id))
            if now >= next_try:
                try:
                    if self.auto_prefetch:
                        self._hand_back_waiting(now)
                    reached = self._extend_leases(now)
                    if now >= next_register:
                        self._register()
                        next_register = now + REGISTER_EVERY
                        reached = True
                    retry.reset()
                    if reached:  # only a call that reached Redis says it is back
                        self._outage.ok()
                except Exception as exc:
                    next_try = now + retry.next()
                    if is_unavailable(exc):
                        self._outage.failed(exc)  # one line per outage, not 20 a second
                    else:
                        log.exception(_kv(event="heartbeat_error", worker=self.id))
                if self.scanner and now >= next_scan and not self.stopping.is_set():
                    # never raises; backs off on its own after a failure
                    next_scan = now + self._embedded_scanner().tick(self.scan_interval)
            self._done.wait(0.05)

    def _extend_leases(self, now: float) -> bool:
        """Extend the leases due for it; True when that took a call to Redis."""
        with self._held_lock:
            due = [h for h in self._held.values() if h.next_beat <= now]
            for h in due:
                h.next_beat = now + _beat_every(h.queue, h.message)
        if not due:
            return False
        scripts = due[0].queue.scripts
        pipe = scripts.pipeline()
        for h in due:
            q = h.queue
            q.scripts.touch(
                q.keys_for(h.message.tag),
                h.message.tag,
                h.message.token,
                -1,
                "",
                q._vt_ms,
                client=pipe,
            )
        try:
            scripts.execute(pipe)
        except Exception as exc:
            with self._held_lock:  # due again: retried after the heartbeat's backoff
                for h in due:
                    h.next_beat = now
            raise QueueUnavailable(str(exc)) from exc
        return True

    def _register(self) -> None:
        """Record this worker on each queue; drop entries of workers long gone (a killed
        worker cannot remove its own)."""
        now_ms = int(time.time() * 1000)
        entry = json.dumps(
            {
                "threads": self.concurrency,
                "seen": now_ms,
                "host": socket.gethostname(),
                "pid": os.getpid(),
            }
        )
        pipe = self._client.pipeline(transaction=False)
        for q in self.queues:
            pipe.hset(q.keys.workers, self.id, entry)
            pipe.hgetall(q.keys.workers)
        try:
            replies = pipe.execute()
            stale = self._client.pipeline(transaction=False)
            for q, entries in zip(self.queues, replies[1::2], strict=True):
                for wid, raw in entries.items():
                    if json.loads(raw).get("seen", 0) < now_ms - WORKER_FORGOTTEN_MS:
                        stale.hdel(q.keys.workers, wid)
            stale.execute()
        except Exception as exc:
            raise QueueUnavailable(str(exc)) from exc

    def _unregister(self) -> None:
        try:
            pipe = self._client.pipeline(transaction=False)
            for q in self.queues:
                pipe.hdel(q.keys.workers, self.id)
            pipe.execute()
        except Exception:
            log.warning(_kv(event="unregister_failed", worker=self.id))

    def _enforce_timeouts(self, now: float) -> None:
        with self._held_lock:
            late = [
                h
                for h in self._held.values()
                if h.thread is not None
                and not h.finished
                and h.timeout is not None
                and not h.timed_out
                and now - h.started > h.timeout
            ]
        for h in late:
            h.timed_out = True
            log.warning(
                _kv(event="job_timeout", queue=h.queue.name, job=h.message.tag, timeout=h.timeout)
            )
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(h.thread or 0), ctypes.py_object(JobTimeout)
            )

    def _embedded_scanner(self) -> Scanner:
        if self._scanner is None:
            self._scanner = Scanner(
                self.queues, self.scheduler, name=self.id, max_steps=20, outage=self._outage
            )
        return self._scanner

    def scan_once(self) -> None:
        """One step of the embedded scanner (scanner.py): scan every queue until it
        reports no more work (bounded), fire due periodic schedules. Raises what Redis
        raises; the heartbeat runs it through ``Scanner.tick`` (backoff, no raise)."""
        self._embedded_scanner().step()

    def _hand_back_waiting(self, now: float) -> None:
        """Adaptive prefetch: when a job has run for GIVE_BACK_AFTER seconds, the jobs its
        thread claimed with it and has not started go back in line, at their place, for
        other threads and workers (the attempt is not counted)."""
        with self._held_lock:
            slow = {
                h.thread
                for h in self._held.values()
                if h.thread is not None and not h.finished and now - h.started > GIVE_BACK_AFTER
            }
            if not slow:
                return
            back = [h for h in self._held.values() if h.thread is None and h.owner in slow]
            for h in back:  # its consumer will not start what is no longer held
                del self._held[(h.queue.name, h.message.tag)]
        if back:
            with self._count_lock:
                self._claimed -= len(back)
            self._send_releases(back)

    def _release_held(self, *, only_unstarted: bool) -> None:
        with self._held_lock:
            held = [h for h in self._held.values() if not only_unstarted or h.thread is None]
            for h in held:  # a consumer will not start what is no longer held
                del self._held[(h.queue.name, h.message.tag)]
        self._send_releases(held)

    def _send_releases(self, held: list[_Held]) -> None:
        if not held:
            return
        try:
            scripts = held[0].queue.scripts
            pipe = scripts.pipeline()
            for h in held:
                q = h.queue
                q.scripts.release(
                    q.keys_for(h.message.tag),
                    h.message.tag,
                    h.message.token,
                    q._mode,
                    q._aging_us,
                    NOTIFY_CAP,
                    client=pipe,
                )
            scripts.execute(pipe, raise_on_error=False)
            log.info(_kv(event="released", worker=self.id, jobs=len(held)))
        except Exception:
            log.warning(_kv(event="release_failed", worker=self.id, jobs=len(held)))


REGISTER_EVERY = 10.0  # seconds between worker registrations
AUTO_PREFETCH_MAX = 20  # adaptive prefetch: most jobs one claim takes
AUTO_HOLD_SECONDS = 0.05  # adaptive prefetch: most work (estimated) one claim takes
GIVE_BACK_AFTER = 1.0  # adaptive prefetch: a job this slow hands its thread's waiting ones back
WORKER_FORGOTTEN_MS = 300_000  # a registration older than this is removed


def _beat_every(queue: Queue, msg: Message) -> float:
    """Seconds between lease extensions of ``msg``: a third of its lease, at most 10 s."""
    lease_ms = msg.visibility_timeout_ms or queue._vt_ms
    return max(0.05, min(lease_ms / 3000, 10.0))


def _send(signal: Any, **kwargs: Any) -> None:
    """Send a signal; a failing receiver is logged and does not fail or strand the job."""
    for receiver, result in signal.send_robust(**kwargs):
        if isinstance(result, Exception):
            log.error(
                _kv(event="signal_receiver_error", receiver=repr(receiver), error=repr(result)),
                exc_info=result,
            )


def run_processes(processes: int, make_worker: Any) -> int:
    """Fork ``processes`` children, each running ``make_worker().run()``; restart a child
    that dies unexpectedly; forward SIGTERM/SIGINT. Returns 0 after a clean stop."""
    from django.db import connections

    connections.close_all()
    children: dict[int, int] = {}
    stopping = False

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                w = make_worker()
                w.install_signal_handlers()
                w.run()
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        children[pid] = slot

    def forward(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    for slot in range(processes):
        spawn(slot)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    restarts = 0
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        slot = children.pop(pid, -1)
        if slot < 0:
            continue
        code = os.waitstatus_to_exitcode(status)
        if not stopping and code != 0 and restarts < 100:
            restarts += 1
            log.warning(_kv(event="child_died", pid=pid, code=code, restarting=True))
            time.sleep(min(5.0, 0.1 * restarts))
            spawn(slot)
    return 0
