"""Stateful property test of the queue engine against a real Redis.

A hypothesis ``RuleBasedStateMachine`` drives one fresh queue per example through random
interleavings of every state-changing operation (publish, publish_many, get, claim, ack,
nack, touch, scan, delete, requeue_dead, purge_dead) plus three harness moves that stand
in for time passing: a lease runs out, a delayed job falls due, a waiting job's expiry passes
(it must then end ``expired`` at the next claim that meets it or scan, never be leased). A
plain-Python model predicts the outcome of each call and, after every step, the complete
content of the queue in Redis: which of the sorted sets holds each job, the exact order of
the ready line, job records, errors, progress and the lifetime counters.

Time is never waited for. Delays, backoffs and leases are an hour or more (or five minutes
for leases), so nothing falls due by the clock during an example; the harness moves write
a score in the past straight into the ``delayed`` / ``leased`` ZSET. Each such score is a
distinct small number (1, 2, 3, ... ms after the epoch) rather than 0, so that promotion
and lease recovery, which go by score, happen in an order the model knows (equal scores
would be broken by member bytes, i.e. by the random tags).

The test can fail: each of these one-line changes to a Lua script was caught (checked by
running the machine against mutated script text patched into ``scripts.source`` from a
throwaway pytest plugin; no package file was edited): ack, nack or touch accepting a stale
token; ``>=`` instead of ``>`` in the max-retries check; LIFO instead of FIFO within a
priority; a retry put at the front of the line; a promotion that leaves the job in
``delayed`` too; claim not counting the attempt, or not promoting due jobs first;
``requeue_dead`` keeping the attempts; ``delete`` removing a leased job; publish
overwriting a live tag; nack ignoring ``dead=True``; the dead-letter bound off by one;
scan's ``more`` flag ignoring the lease limit; claim letting one job too many in flight
under a ``concurrency`` limit. A failing run shrinks its example before
reporting, which can take a minute or more.

A second machine (``GroupLimitMachine``) holds ``group_max_length`` of a fair queue to a
model of each job's group and state; it caught a count that took jobs in flight for
waiting ones, and one that took the entry of a tag used again by another group for its
own (each a one-line change to ``lua/_group_room.lua``).
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_zqueue.conf import Backoff, QueueOptions
from django_zqueue.engine.records import from_ms as _from_ms
from django_zqueue.engine.records.attempts import last_error
from django_zqueue.engine.records.codec import read_fields, split_record
from django_zqueue.engine.redis.connection import is_cluster, server_time_ms
from django_zqueue.engine.scripts.replies import ParkReply, StepReply
from django_zqueue.exceptions import DuplicateJob, QueueFull, SignalRefused
from django_zqueue.queue import NOTIFY_CAP, Message, Queue
from django_zqueue.queue import durable_calls as dc

from .records_util import update_fields

READY, DELAYED, LEASED, DEAD = "ready", "delayed", "leased", "dead"
EXPIRED = "expired"
MAX_RETRIES = 2
#: caller-given tags; a small pool so that tags clash and are reused after a job is gone
POOL = ["u0", "u1", "u2", "u3", "u4", "u5"]
PRIORITIES = st.sampled_from([-1, 0, 0, 1, 5])
#: the bodies of a task's shape take the lean publish (lua/publish_lean.lua) when the job
#: sets no option but its retries and priority
TASK_BODIES = st.builds(
    lambda args, kwargs: {"task": "t.x", "args": args, "kwargs": kwargs},
    st.lists(st.integers(-2, 2), max_size=2),
    st.sampled_from([{}, {}, {"k": "v"}]),
)
BODIES = st.one_of(
    st.integers(-5, 5), st.text("ab", max_size=3), st.just({"k": [1, None]}), TASK_BODIES
)
INDEX = st.integers(0, 63)
#: how a publish says when: the ones that are "now" must land in ready, the rest in delayed
WHEN = {
    "default": ({}, False),
    "delay_0": ({"delay": 0}, False),
    "delay_negative": ({"delay": -5}, False),
    "delay_sub_ms": ({"delay": 0.0004}, False),
    "delay_hour": ({"delay": 3600}, True),
    "delay_timedelta": ({"delay": timedelta(hours=2)}, True),
    "run_at_past": ("past", False),
    "run_at_future": ("future", True),
}
WHENS = st.sampled_from(sorted(WHEN))
#: nack variants: (kwargs, goes to delayed when it retries)
NACKS = {
    "now": ({"retry_in": 0}, False),
    "sub_ms": ({"retry_in": 0.0004}, False),  # rounds down to 0 ms: back in line now
    "timedelta_0": ({"retry_in": timedelta(0)}, False),
    "later": ({"retry_in": 3600}, True),
    "backoff": ({}, True),  # the queue's backoff: base 3600 s, so always delayed
    "dead": ({"retry_in": 0, "dead": True}, False),
}
#: "dead" twice: a forced burial must often meet a job that still has retries left
NACK_HOWS = st.sampled_from(["now", "sub_ms", "timedelta_0", "later", "backoff", "dead", "dead"])
STALE_OPS = st.sampled_from(["ack", "ack_many", "nack", "nack_dead", "touch"])
#: the lifetime counters the model keeps (the stats hash may hold more, e.g. time series)
COUNTERS = (
    "enqueued",
    "claimed",
    "acked",
    "failed",
    "retried",
    "dead",
    "expired",
    "deleted",
    "requeued",
    "cancelled",
    "jobs_expired",
)

_names = itertools.count()


@dataclass
class Job:
    """The model of one job incarnation (a tag may be reused once its job is gone)."""

    jid: int
    tag: str
    body: Any
    priority: int
    max_retries: int
    vt_ms: int  # lease length: the job's own visibility timeout, else the queue's
    state: str
    attempts: int = 0
    token: int | None = None  # current delivery, while leased
    msg: Message | None = None  # that delivery
    consumer: str | None = None
    deadline: int = 0  # while leased: the lease deadline handed out (ms, Redis clock)
    order: int = 0  # while ready: when it entered the line (FIFO within a priority)
    past: int | None = None  # delayed made due / lease expired: the past score written
    buried: bool = False  # nacked with dead=True
    died: int = 0  # while dead: order of death (dead letters are trimmed oldest first)
    error: str | None = None
    progress: bool = False
    expires: bool = False  # its record holds an expiry (published with one, not yet started)
    lapsed: int | None = None  # its expiry made past by the harness: the score written
    event: str | None = None  # parked by durable.wait_for for this event (docs/durable.md)
    delivered: set[str] = field(default_factory=set)  # events signalled to it


def _when_kwargs(name: str) -> dict[str, Any]:
    spec = WHEN[name][0]
    if spec == "past":
        return {"run_at": datetime.now(UTC) - timedelta(hours=1)}
    if spec == "future":
        return {"run_at": datetime.now(UTC) + timedelta(hours=1)}
    assert isinstance(spec, dict)
    return spec


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


class QueueMachine(RuleBasedStateMachine):
    def __init__(
        self, client: redis.Redis, prefix: str, mode: str, dead_max: int, concurrency: int | None
    ) -> None:
        super().__init__()
        self.client = client
        options = QueueOptions(
            max_retries=MAX_RETRIES,
            retry_backoff=Backoff(base=3600, max=7200, jitter=0.2),
            priority_mode=mode,  # type: ignore[arg-type]
            dead_letter_max=dead_max,
            concurrency=concurrency,
        )
        # a fresh, empty queue per example (its keys are deleted in teardown)
        self.q = Queue(
            f"sm{next(_names)}-{uuid.uuid4().hex[:6]}", options, prefix=prefix, client=client
        )
        self.jobs: dict[str, Job] = {}
        self.msgs: list[tuple[Message, int]] = []  # every delivery: (message, job incarnation)
        self.tokens: set[int] = set()
        self.acked: Counter[int] = Counter()  # job incarnation -> successful acks
        self.stats: Counter[str] = Counter()
        self._jid = itertools.count()
        self._order = itertools.count()
        self._past = itertools.count(1)
        self._died = itertools.count()
        self.dead_max = dead_max
        self.concurrency = concurrency
        #: expiry index entries left by a job that went without starting or expiring
        #: (cancelled): tag -> the past score the harness wrote; the scanner drops them
        self.stale_x: dict[str, int] = {}
        self._consumer = itertools.count()
        #: the history of finished jobs (keep_finished, far above what an example ends):
        #: tag -> how its last job ended, "succeeded" or "cancelled"
        self.ended: dict[str, str] = {}

    def teardown(self) -> None:
        self.q.clear()

    # ------------------------------------------------------------------ model helpers

    def _in(self, state: str) -> list[Job]:
        return [j for j in self._known() if j.state == state]

    def _known(self) -> list[Job]:
        """The model's jobs in a reproducible order (generated tags are random, so
        ordering by tag would make hypothesis' choices depend on chance)."""
        return sorted(self.jobs.values(), key=lambda j: j.jid)

    def _pick(self, jobs: list[Job], idx: int) -> Job:
        return jobs[idx % len(jobs)]

    def _ready_order(self) -> list[str]:
        """Claim order: higher priority first, FIFO (order of entering the line) within."""
        return [j.tag for j in sorted(self._in(READY), key=lambda j: (-j.priority, j.order))]

    def _to_ready(self, job: Job) -> None:
        job.state = READY
        job.order = next(self._order)
        job.past = None
        job.token = job.msg = job.consumer = None
        job.progress = False

    def _promote(self, limit: int) -> int:
        due = sorted((j for j in self._in(DELAYED) if j.past is not None), key=lambda j: j.past)
        for job in due[:limit]:
            self._to_ready(job)
        return len(due[:limit])

    def _trim_dead(self, limit: int) -> tuple[int, bool]:
        """Dead letters are bounded by count: the oldest beyond dead_letter_max go, at
        most ``limit`` at a time. Returns (how many went, whether more must go)."""
        dead = sorted(self._in(DEAD), key=lambda j: j.died)
        excess = max(0, len(dead) - self.dead_max)
        for old in dead[: min(excess, limit)]:
            del self.jobs[old.tag]
        return min(excess, limit), excess > limit

    def _retry_or_bury(self, job: Job, later: bool, bury: bool, trim: bool = True) -> str:
        job.token = job.msg = job.consumer = None
        job.progress = False
        job.past = None
        if bury or job.attempts > job.max_retries:
            job.state = DEAD
            job.buried = bury
            job.died = next(self._died)
            self.stats["dead"] += 1
            if trim:
                self._trim_dead(self.q.options.scan_batch)
            return "dead"
        self.stats["retried"] += 1
        if later:
            job.state = DELAYED
        else:
            self._to_ready(job)
        return "retry"

    def _is_current(self, msg: Message, jid: int) -> bool:
        job = self.jobs.get(msg.tag)
        return job is not None and job.jid == jid and job.state == LEASED and job.token == msg.token

    def _stale(self) -> list[Message]:
        return [m for m, jid in self.msgs if not self._is_current(m, jid)]

    def _add(
        self,
        tag: str,
        body: Any,
        priority: int,
        max_retries: int | None,
        later: bool,
        vt: int | None = None,
    ):
        job = Job(
            jid=next(self._jid),
            tag=tag,
            body=body,
            priority=priority,
            max_retries=MAX_RETRIES if max_retries is None else max_retries,
            vt_ms=self.q.options.visibility_timeout_ms if vt is None else vt * 1000,
            state=DELAYED,
        )
        self.jobs[tag] = job
        if not later:
            self._to_ready(job)

    def _snapshot(self) -> dict[str, Any]:
        """Every key of the queue with its content, to prove a call wrote nothing."""
        keys = self.q.engine._keys.all()
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.type(key)
        read = {
            b"zset": lambda p, k: p.zrange(k, 0, -1, withscores=True),
            b"hash": lambda p, k: p.hgetall(k),
            b"list": lambda p, k: p.lrange(k, 0, -1),
            b"set": lambda p, k: p.smembers(k),
            b"string": lambda p, k: p.get(k),
            b"none": lambda p, k: p.exists(k),
        }
        for key, kind in zip(keys, pipe.execute(), strict=True):
            read[kind](pipe, key)
        return dict(zip(keys, pipe.execute(), strict=True))

    def _redis_now(self) -> int:
        sec, usec = self.client.time()
        return sec * 1000 + usec // 1000

    def _expire(self, job: Job) -> None:
        """A job whose expiry passed before it started ends in the state expired."""
        job.state = EXPIRED
        job.error = "expired"
        job.expires = False
        job.past = None
        self.stats["jobs_expired"] += 1

    def _claim_model(self, batch: int, consumer: str) -> list[str]:
        """The jobs a claim leases; a job at the head whose expiry passed is expired
        instead (``self.claim_expired``: how many), and the claim reads on past it, up to
        EXPIRED_MAX (100) such jobs in one call."""
        self._promote(100)
        if self.concurrency is not None:  # a global limit on jobs in flight
            batch = max(0, min(batch, self.concurrency - len(self._in(LEASED))))
        tags: list[str] = []
        self.claim_expired = 0
        for tag in self._ready_order():
            if len(tags) >= batch or self.claim_expired >= 100:
                break
            job = self.jobs[tag]
            if job.lapsed is not None:
                self._expire(job)
                self.claim_expired += 1
                continue
            job.state = LEASED
            job.attempts += 1
            job.consumer = consumer
            job.past = None
            job.expires = False  # started: its expiry no longer applies
            tags.append(tag)
        self.stats["claimed"] += len(tags)
        return tags

    def _check_delivered(self, msgs: list[Message], expected: list[str], t0: int, t1: int) -> None:
        """Check a claim's messages; t0/t1: Redis time before and after the call."""
        assert [m.tag for m in msgs] == expected, "claim must hand out the front of the line"
        for m in msgs:
            job = self.jobs[m.tag]
            assert t0 + job.vt_ms <= m.lease_deadline_ms <= t1 + job.vt_ms
            assert m.token not in self.tokens, "a delivery token was reused"
            self.tokens.add(m.token)
            job.token, job.msg, job.deadline = m.token, m, m.lease_deadline_ms
            assert m.attempt == job.attempts
            assert m.priority == job.priority
            assert m.max_retries == job.max_retries
            assert m.body == job.body
            assert m.queue == self.q.name
            self.msgs.append((m, job.jid))

    # ------------------------------------------------------------------ publishing

    @initialize(jobs=st.lists(st.tuples(BODIES, PRIORITIES), max_size=6))
    def seed_jobs(self, jobs):
        """Some work from the start (the queue itself starts empty)."""
        for body, priority in jobs:
            tag = self.q.publish(body, priority=priority)
            self._add(tag, body, priority, None, later=False)
        self.stats["enqueued"] += len(jobs)

    @rule(
        body=BODIES,
        priority=PRIORITIES,
        tag_kind=st.sampled_from(["auto", "pool", "existing"]),
        idx=INDEX,
        when=WHENS,
        max_retries=st.sampled_from([None, 0, 0, 1, 2]),
        vt=st.sampled_from([None, None, 600]),
        expires=st.sampled_from([None, None, 3600]),
    )
    def publish(self, body, priority, tag_kind, idx, when, max_retries, vt, expires):
        tag: str | None = None
        if tag_kind == "pool" or (tag_kind == "existing" and not self.jobs):
            tag = POOL[idx % len(POOL)]
        elif tag_kind == "existing":
            tag = self._known()[idx % len(self.jobs)].tag
        kwargs = {
            "priority": priority,
            "max_retries": max_retries,
            "visibility_timeout": vt,
            "expires": expires,
            **_when_kwargs(when),
        }
        if tag is not None and tag in self.jobs:
            before = self._snapshot()
            with pytest.raises(DuplicateJob) as exc:
                self.q.publish(body, tag, **kwargs)
            assert exc.value.tags == [tag]
            assert exc.value.states == [self.jobs[tag].state]
            assert self._snapshot() == before, "a duplicate publish must write nothing"
            return
        got = self.q.publish(body, tag, **kwargs)
        if tag is not None:
            assert got == tag
        else:
            assert got not in self.jobs
        self._add(got, body, priority, max_retries, WHEN[when][1], vt)
        self.jobs[got].expires = expires is not None
        if expires is not None:
            self.stale_x.pop(got, None)  # its entry now holds the new job's expiry
        self.stats["enqueued"] += 1

    @rule(
        bodies=st.lists(BODIES, max_size=4),
        priority=PRIORITIES,
        tag_mode=st.sampled_from(["auto", "pool", "mixed"]),
        idxs=st.lists(INDEX, min_size=4, max_size=4),
        when=WHENS,
        max_retries=st.sampled_from([None, 0, 2]),
    )
    def publish_many(self, bodies, priority, tag_mode, idxs, when, max_retries):
        tags: list[str] | None = None
        if tag_mode != "auto":
            pool = POOL + ([j.tag for j in self._known()] if tag_mode == "mixed" else [])
            tags = [pool[i % len(pool)] for i in idxs[: len(bodies)]]
        kwargs = {"priority": priority, "max_retries": max_retries, **_when_kwargs(when)}
        clashes: list[tuple[str, str]] = []
        seen: set[str] = set()
        for t in tags or []:
            if t in seen:
                clashes.append((t, "batch"))
            elif t in self.jobs:
                clashes.append((t, self.jobs[t].state))
            seen.add(t)
        if clashes:
            before = self._snapshot()
            with pytest.raises(DuplicateJob) as exc:
                self.q.publish_many(bodies, tags=tags, **kwargs)
            assert list(zip(exc.value.tags, exc.value.states, strict=True)) == clashes
            assert exc.value.published == []
            assert self._snapshot() == before, "a clashing publish_many must write nothing"
            return
        got = self.q.publish_many(bodies, tags=tags, **kwargs)
        assert len(got) == len(bodies) == len(set(got))
        if tags is not None:
            assert got == tags
        for tag, body in zip(got, bodies, strict=True):
            assert tag not in self.jobs
            self._add(tag, body, priority, max_retries, WHEN[when][1])
        self.stats["enqueued"] += len(got)

    # ------------------------------------------------------------------ consuming

    @rule(worker=st.sampled_from(["a", "b", "c"]))
    def get(self, worker):
        consumer = f"{worker}{next(self._consumer)}"
        t0 = self._redis_now()
        msg = self.q.get(timeout=0, consumer=consumer)
        t1 = self._redis_now()
        expected = self._claim_model(1, consumer)
        for _ in range(100):  # get() claims again after "claim again" (CLAIM_AGAIN_MAX)
            if expected or not self.claim_expired:
                break
            expected = self._claim_model(1, consumer)
        self._check_delivered([] if msg is None else [msg], expected, t0, t1)

    @rule(batch=st.integers(1, 4))
    def claim(self, batch):
        consumer = f"x{next(self._consumer)}"
        t0 = self._redis_now()
        msgs, hint = self.q.claim(batch, consumer=consumer)
        t1 = self._redis_now()
        expected = self._claim_model(batch, consumer)
        self._check_delivered(msgs, expected, t0, t1)
        if msgs:
            assert hint is None
        elif self.claim_expired:
            assert hint == 0, "expired jobs were met at the head: claim again"
        elif self._in(DELAYED):
            assert hint is not None and hint >= 0, "hint: time until the next delayed job"
        else:
            assert hint is None, "nothing is known to come: wait for a notify"

    @precondition(lambda self: any(j.state == LEASED for j in self.jobs.values()))
    @rule(idx=INDEX)
    def ack(self, idx):
        job = self._pick(self._in(LEASED), idx)
        assert job.msg is not None
        assert self.q.ack(job.msg) is True
        self.acked[job.jid] += 1
        self.stats["acked"] += 1
        del self.jobs[job.tag]
        self.ended[job.tag] = "succeeded"

    def _superseded(self) -> list[Message]:
        """Stale deliveries of a tag that is leased again, to another consumer."""
        return [m for m in self._stale() if getattr(self.jobs.get(m.tag), "state", "") == LEASED]

    @precondition(lambda self: bool(self._stale()))
    @rule(idx=INDEX, first=STALE_OPS)
    def stale_delivery(self, idx, first):
        """A delivery that is no longer current (acked, retried, recovered, re-claimed,
        buried, deleted, requeued) can neither finish nor fail nor extend the job."""
        self._use_stale(self._pick(self._stale(), idx), first)

    @precondition(lambda self: bool(self._superseded()))
    @rule(idx=INDEX, first=STALE_OPS)
    def superseded_delivery(self, idx, first):
        """The same while the job is leased again under a newer token: the old consumer
        must not finish, fail or extend the new delivery."""
        self._use_stale(self._pick(self._superseded(), idx), first)

    def _use_stale(self, msg: Message, first: str) -> None:
        """Every way a consumer can use a delivery, ``first`` first: each must be
        rejected and write nothing."""
        ops = {
            "ack": lambda: self.q.ack(msg) is False,
            "ack_many": lambda: self.q.ack_many([msg]) == [False],
            "nack": lambda: self.q.nack(msg, "late", retry_in=0) is None,
            "nack_dead": lambda: self.q.nack(msg, "late", dead=True) is None,
            "touch": lambda: self.q.touch(msg, extend=60, progress=0.5) is None,
            "step": lambda: (
                self.q.engine.run(dc.step_call(self.q.engine._shards[0], msg, "s:x", "1", 60_000))
                is StepReply.STALE
            ),
            "park": lambda: (
                self.q.engine.run(
                    dc.park_call(self.q.engine._shards[0], msg, "z:x", 60_000, 60_000)
                )
                == (ParkReply.STALE, "")
            ),
        }
        for op in [first, *(o for o in ops if o != first)]:
            before = self._snapshot()
            assert ops[op](), f"a stale {op} must be rejected"
            assert self._snapshot() == before, f"a stale {op} must change nothing"

    @precondition(lambda self: any(j.state == LEASED for j in self.jobs.values()))
    @rule(idx=INDEX, how=NACK_HOWS, error=st.sampled_from(["", "boom"]))
    def nack(self, idx, how, error):
        job = self._pick(self._in(LEASED), idx)
        assert job.msg is not None
        kwargs, later = NACKS[how]
        got = self.q.nack(job.msg, error, **kwargs)
        self.stats["failed"] += 1
        if error:
            job.error = error
        expected = self._retry_or_bury(job, later, bool(kwargs.get("dead")))
        assert got == expected

    @precondition(lambda self: any(j.state == LEASED for j in self.jobs.values()))
    @rule(
        idx=INDEX,
        extend=st.sampled_from([None, 0, 60]),
        progress=st.sampled_from([None, 0.5]),
    )
    def touch(self, idx, extend, progress):
        job = self._pick(self._in(LEASED), idx)
        assert job.msg is not None
        t0 = self._redis_now()
        got = self.q.touch(job.msg, extend=extend, progress=progress)
        t1 = self._redis_now()
        assert got is not None
        if progress is not None:
            job.progress = True
        if extend == 0:  # the deadline stays; an expired lease stays expired
            assert got == _from_ms(job.deadline if job.past is None else job.past)
            return
        ext_ms = job.vt_ms if extend is None else extend * 1000
        assert _from_ms(t0 + ext_ms) <= got <= _from_ms(t1 + ext_ms)
        job.past = None  # a heartbeat revives an expired (not yet recovered) lease
        job.deadline = round(got.timestamp() * 1000)

    # ------------------------------------------------------------------ durable tasks

    @precondition(lambda self: any(j.state == LEASED for j in self.jobs.values()))
    @rule(idx=INDEX, kind=st.sampled_from(["z", "w"]), name=st.sampled_from(["a", "b"]))
    def park(self, idx, kind, name):
        """durable.sleep / wait_for: the job to delayed, its attempt given back."""
        job = self._pick(self._in(LEASED), idx)
        assert job.msg is not None
        call = dc.park_call(self.q.engine._shards[0], job.msg, f"{kind}:{name}", 3_600_000, 60_000)
        code, wake = self.q.engine.run(call)
        if kind == "w" and name in job.delivered:  # the event is there: not parked
            assert code is ParkReply.SIGNALLED, (code, wake)
            return
        assert code is ParkReply.PARKED, (code, wake)
        job.state = DELAYED
        job.attempts = max(0, job.attempts - 1)
        job.token = job.msg = job.consumer = None
        job.progress = False
        job.past = None
        job.event = name if kind == "w" else None

    @precondition(lambda self: any(j.state == DELAYED and j.event for j in self.jobs.values()))
    @rule(idx=INDEX)
    def signal(self, idx):
        """An event a parked job waits for: delivered once, the job due at once."""
        job = self._pick([j for j in self._in(DELAYED) if j.event], idx)
        assert job.event is not None
        assert self.q.signal(job.tag, job.event, {"n": idx}) is True
        with pytest.raises(SignalRefused):
            self.q.signal(job.tag, job.event, 0)
        score = self.client.zscore(self.q.engine._keys.delayed, job.tag)
        assert score is not None and score <= self._redis_now()
        job.past = int(score)
        job.delivered.add(job.event)
        job.event = None

    # ------------------------------------------------------------------ time passing

    @precondition(
        lambda self: any(j.state == LEASED and j.past is None for j in self.jobs.values())
    )
    @rule(idx=INDEX)
    def expire_lease(self, idx):
        job = self._pick([j for j in self._in(LEASED) if j.past is None], idx)
        job.past = next(self._past)
        assert (
            self.client.zadd(self.q.engine._keys.leased, {job.tag: job.past}, xx=True, ch=True) == 1
        )

    @precondition(
        lambda self: any(j.state == DELAYED and j.past is None for j in self.jobs.values())
    )
    @rule(idx=INDEX)
    def make_due(self, idx):
        job = self._pick([j for j in self._in(DELAYED) if j.past is None], idx)
        job.past = next(self._past)
        assert (
            self.client.zadd(self.q.engine._keys.delayed, {job.tag: job.past}, xx=True, ch=True)
            == 1
        )

    @precondition(
        lambda self: (
            self.dead_max >= 100  # expired jobs are trimmed like dead letters
            and any(
                j.state in (READY, DELAYED) and j.expires and j.lapsed is None
                for j in self.jobs.values()
            )
        )
    )
    @rule(idx=INDEX)
    def expiry_passes(self, idx):
        """A waiting job's expiry passes: a past expiry written into its record and its
        entry of the expiry index."""
        waiting = [j for j in self._known() if j.state in (READY, DELAYED)]
        job = self._pick([j for j in waiting if j.expires and j.lapsed is None], idx)
        job.lapsed = next(self._past)
        k = self.q.engine._keys
        update_fields(self.client, k, job.tag, x=job.lapsed)
        assert self.client.zadd(k.expiry, {job.tag: job.lapsed}, xx=True, ch=True) == 1

    @rule(limit=st.sampled_from([None, None, 1, 2]))
    def scan(self, limit):
        """Housekeeping, by default in one step; a small limit leaves work for the next."""
        result = self.q.scan(limit)
        limit = limit or self.q.options.scan_batch
        # first the due entries of the expiry index, oldest first: a waiting job whose
        # expiry passed ends expired, a stale entry is dropped
        entries = [
            (j.lapsed, j.tag)
            for j in self._known()
            if j.lapsed is not None and j.state in (READY, DELAYED)
        ]
        entries += [(past, tag) for tag, past in self.stale_x.items()]
        due = sorted(entries)[:limit]
        expired_jobs = 0
        for past, tag in due:
            job = self.jobs.get(tag)
            if job is not None and job.lapsed == past and job.state in (READY, DELAYED):
                self._expire(job)
                expired_jobs += 1
            else:
                self.stale_x.pop(tag, None)
        assert result.expired == expired_jobs
        promoted = self._promote(limit)
        recovered = buried = 0
        expired = sorted((j for j in self._in(LEASED) if j.past is not None), key=lambda j: j.past)
        for job in expired[:limit]:
            self.stats["expired"] += 1
            job.error = "lease expired"
            if self._retry_or_bury(job, later=False, bury=False, trim=False) == "dead":
                buried += 1
            else:
                recovered += 1
        # the dead letters beyond the bound (e.g. just buried) are trimmed at the end
        trimmed, more_dead = self._trim_dead(limit)
        assert (result.promoted, result.recovered, result.buried) == (promoted, recovered, buried)
        assert result.trimmed == trimmed
        assert result.more == (
            promoted == limit or len(expired) >= limit or more_dead or len(due) >= limit
        )

    # ------------------------------------------------------------------ operators

    def _any_tag(self, idx: int) -> str:
        tags = POOL + [j.tag for j in self._known() if j.tag not in POOL]
        return tags[idx % len(tags)]

    @rule(
        op=st.sampled_from(
            ["delete", "delete", "requeue_dead", "purge_dead", "inspect", "cancel", "priority"]
        ),
        idx=INDEX,
    )
    def operator(self, op, idx):
        """Operator calls on any tag (one rule, so that the lease rules run more often)."""
        getattr(self, f"_{op}")(idx)

    @precondition(lambda self: any(j.state == DEAD for j in self.jobs.values()))
    @rule(op=st.sampled_from(["requeue_dead", "requeue_dead", "purge_dead"]), idx=INDEX)
    def dead_letters(self, op, idx):
        """Operator calls while there are dead letters."""
        getattr(self, f"_{op}")(idx)

    def _delete(self, idx: int) -> None:
        tag = self._any_tag(idx)
        job = self.jobs.get(tag)
        if job is None or job.state == LEASED:
            before = self._snapshot()
            assert self.q.delete(tag) is False
            assert self._snapshot() == before, "delete of a leased/unknown job changes nothing"
            return
        assert self.q.delete(tag) is True
        self.stats["deleted"] += 1
        del self.jobs[tag]
        self.stale_x.pop(tag, None)  # delete drops the tag's expiry entry

    def _cancel(self, idx: int) -> None:
        """Cancel: a waiting or running job ends in the terminal state ``cancelled`` (out
        of every set, its record gone, its delivery stale); a dead one is refused."""
        leased = self._in(LEASED)
        tag = self._pick(leased, idx).tag if leased and idx % 2 else self._any_tag(idx)
        job = self.jobs.get(tag)
        if job is None or job.state in (DEAD, EXPIRED):
            before = self._snapshot()
            assert self.q.cancel_job(tag) == ("dead" if job and job.state == DEAD else "missing")
            assert self._snapshot() == before, "a refused cancel changes nothing"
            return
        want = "running" if job.state == LEASED else "waiting"
        assert self.q.cancel_job(tag) == want
        self.stats["cancelled" if want == "running" else "deleted"] += 1
        del self.jobs[tag]
        self.ended[tag] = "cancelled"
        if job.lapsed is not None and job.state != LEASED:
            self.stale_x[tag] = job.lapsed  # cancel leaves its expiry entry to the scanner
        rec = self.q.cancelled(tag)
        assert rec is not None and rec.was == job.state and rec.attempts == job.attempts

    def _priority(self, idx: int) -> None:
        """A waiting job's new priority: its FIFO place among that priority's jobs."""
        tag = self._any_tag(idx)
        job = self.jobs.get(tag)
        priority = [-1, 0, 1, 5][idx % 4]
        if job is None or job.state not in (READY, DELAYED):
            before = self._snapshot()
            assert self.q.set_priority(tag, priority) is False
            assert self._snapshot() == before
            return
        assert self.q.set_priority(tag, priority) is True
        job.priority = priority

    def _requeue_dead(self, idx: int) -> None:
        dead = self._in(DEAD)
        tag = self._pick(dead, idx).tag if dead and idx % 3 else self._any_tag(idx)
        job = self.jobs.get(tag)
        if job is None or job.state != DEAD:
            before = self._snapshot()
            assert self.q.requeue_dead(tag) is False
            assert self._snapshot() == before
            return
        assert self.q.requeue_dead(tag) is True
        self.stats["requeued"] += 1
        job.attempts = 0
        job.buried = False
        self._to_ready(job)

    def _purge_dead(self, idx: int) -> None:
        dead = self._in(DEAD)
        assert self.q.purge_dead() == len(dead)
        for job in dead:
            del self.jobs[job.tag]

    def _inspect(self, idx: int) -> None:
        """The read API agrees with the model: info, state, exists, rank, score."""
        tag = self._any_tag(idx)
        job = self.jobs.get(tag)
        info = self.q.info(tag)
        if job is None:  # gone, or kept in the history of finished jobs
            assert (None if info is None else info.state) == self.ended.get(tag)
            assert self.q.state(tag) is None
            assert self.q.rank(tag) is None
            assert not self.q.exists(tag)
            return
        assert info is not None
        assert info.state == job.state == self.q.state(tag)
        assert self.q.exists(tag) == (job.state not in (DEAD, EXPIRED))
        assert (info.attempts, info.priority, info.max_retries) == (
            job.attempts,
            job.priority,
            job.max_retries,
        )
        assert info.body == job.body
        assert (info.progress is not None) == job.progress
        assert (info.last_error is not None) == (job.error is not None)
        assert info.consumer == job.consumer
        rank = self._ready_order().index(tag) if job.state == READY else None
        assert info.rank == rank == self.q.rank(tag)
        assert (self.q.score(tag) is None) == (job.state != READY)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def redis_matches_model(self):
        k = self.q.engine._keys
        pipe = self.client.pipeline(transaction=True)
        for key in (k.ready, k.delayed, k.leased, k.dead, k.expired, k.expiry):
            pipe.zrange(key, 0, -1, withscores=True)
        pipe.hkeys(k.body)
        pipe.hgetall(k.meta)
        pipe.hgetall(k.errors)
        pipe.hkeys(k.progress)
        pipe.llen(k.notify)
        if is_cluster(self.client):  # no TIME in a cluster transaction; nothing else runs
            now_ms = server_time_ms(self.client, k.ready)
        else:
            pipe.time()
        (
            ready,
            delayed,
            leased,
            dead,
            expired,
            expiry,
            body,
            meta,
            errors,
            progress,
            notify,
            *now,
        ) = pipe.execute()
        if now:
            now_ms = now[0][0] * 1000 + now[0][1] // 1000
        sets = {
            READY: {_s(t): s for t, s in ready},
            DELAYED: {_s(t): s for t, s in delayed},
            LEASED: {_s(t): s for t, s in leased},
            DEAD: {_s(t): s for t, s in dead},
            EXPIRED: {_s(t): s for t, s in expired},
        }

        # every job in exactly one set; no set member the model doesn't know
        for state, members in sets.items():
            assert set(members) == {j.tag for j in self._in(state)}, f"{state} set differs"
        assert sum(len(m) for m in sets.values()) == len(self.jobs), "a job in two sets"
        # records exist exactly for jobs in some set
        assert not body, "every record holds its body (the compact layout)"
        assert all(split_record(raw)[1] is not None for raw in meta.values())
        assert {_s(t) for t in meta} == set(self.jobs), "meta records differ"

        # ready order = claim order: higher priority first, FIFO within a priority
        order = [_s(t) for t, _ in ready]
        assert order == self._ready_order(), "ready line out of order"
        scores = [s for _, s in ready]
        assert all(a < b for a, b in itertools.pairwise(scores)), "ready scores must not tie"
        # so rank(tag) is the number of jobs claimed before it (rank 0 = the next get())
        pipe = self.client.pipeline(transaction=False)
        for tag in order:
            pipe.zrank(k.ready, tag)
        assert pipe.execute() == list(range(len(order)))
        assert notify <= NOTIFY_CAP, "the wake-up list is bounded"
        if self.concurrency is not None:
            assert len(sets[LEASED]) <= self.concurrency, "global in-flight limit"

        # scores: harness-written past scores as written, everything else in the future
        for state in (DELAYED, LEASED):
            for job in self._in(state):
                score = sets[state][job.tag]
                if job.past is None:
                    assert score > now_ms, f"{job.tag} {state} in the past by itself"
                    if state == LEASED:
                        assert score == job.deadline, "lease deadline as handed out"
                else:
                    assert score == job.past
        for score in sets[DEAD].values():
            assert score <= now_ms + 1  # time of death (a monotonic clock may run ahead)
        # dead letters in order of death (the oldest are trimmed first)
        died = sorted(self._in(DEAD), key=lambda j: j.died)
        assert [_s(t) for t, _ in dead] == [j.tag for j in died], "dead letters out of order"

        # job records
        for tag, job in self.jobs.items():
            m = read_fields(meta[tag.encode()])
            # priority 0 and attempts 0 are left out at publish (absent = 0)
            assert ("p" in m) == (job.priority != 0)
            m = {"p": 0, "a": 0, **m}
            assert m["p"] == job.priority
            assert m["a"] == job.attempts
            assert m["m"] == job.max_retries
            assert m.get("t") == job.token, "a token must be set exactly while leased"
            assert ("t" in m) == (job.state == LEASED)
            # dead exactly when attempts exceed max retries, or buried on purpose
            if job.state == DEAD:
                assert m["a"] > m["m"] or job.buried
            elif job.state in (READY, DELAYED, EXPIRED):
                assert m["a"] <= m["m"]
            else:
                assert 1 <= m["a"] <= m["m"] + 1

        # the expiry index: a waiting job with an expiry has its entry (past as written by
        # the harness, else in the future); a started one has none, nor does its record
        index = {_s(t): s for t, s in expiry}
        for tag, job in self.jobs.items():
            m = read_fields(meta[tag.encode()])
            if job.state in (READY, DELAYED) and job.expires:
                want = job.lapsed
                assert index[tag] == (want if want is not None else index[tag])
                assert want is not None or index[tag] > now_ms
                assert m["x"] == index[tag], "the record and the index agree"
            if job.state == LEASED:
                assert "x" not in m, "a started job keeps no expiry"
        for tag, past in self.stale_x.items():
            assert index.get(tag) == past, "a stale entry waits for the scanner"

        want_errors = {t: j.error for t, j in self.jobs.items() if j.error is not None}
        got_errors = {_s(t): last_error(e) or "" for t, e in errors.items()}
        assert set(got_errors) == set(want_errors)
        for tag, err in want_errors.items():
            assert got_errors[tag].startswith(err)
        assert {_s(t) for t in progress} == {t for t, j in self.jobs.items() if j.progress}

        # counters, and the count APIs
        lifetime = self.q.stats()
        assert {n: lifetime.get(n, 0) for n in COUNTERS} == {n: self.stats[n] for n in COUNTERS}
        assert self.q.counts() == {
            "ready": len(sets[READY]),
            "delayed": len(sets[DELAYED]),
            "inflight": len(sets[LEASED]),
            "dead": len(sets[DEAD]),
        }

        # no job acked twice (token fencing makes this strict: even after a lease
        # expired and the job was handed out again, only the current delivery acks)
        assert all(n == 1 for n in self.acked.values())


@pytest.mark.parametrize(
    ("mode", "dead_max", "concurrency", "examples"),
    [
        ("strict", 10_000, None, 60),
        ("strict", 1, None, 40),  # one dead letter kept: each death trims the one before
        ("strict", 10_000, 2, 30),  # at most two jobs in flight across all consumers
        ("aging", 10_000, None, 40),
    ],
)
def test_queue_state_machine(
    redis_client: redis.Redis,
    prefix: str,
    mode: str,
    dead_max: int,
    concurrency: int | None,
    examples: int,
) -> None:
    # In "aging" mode one priority step is worth 60 s of waiting; an example lasts well
    # under a second, so the claim order is the same as in strict mode.
    run_state_machine_as_test(
        lambda: QueueMachine(redis_client, prefix, mode, dead_max, concurrency),
        settings=settings(
            max_examples=examples,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            report_multiple_bugs=False,
            phases=[p for p in Phase if p is not Phase.explain],
        ),
    )


# ---------------------------------------------------------------------- group_max_length

GROUPS = st.sampled_from(["a", "b", ""])  # "": jobs without a group
GROUP_LIMIT = 3


@dataclass
class GroupJob:
    group: str
    state: str
    counted: bool  # published under the limit (by the old queue object: not indexed)
    msg: Message | None = None


class GroupLimitMachine(RuleBasedStateMachine):
    """``group_max_length`` of a fair queue against a model of each job's group and
    state. Every publish is refused exactly when the model says a group would pass the
    limit (and then writes nothing); after every step, each group's count as the publish
    scripts read it (``group_check``, which names the count it found) is exactly the
    model's jobs of the group ready or delayed, through claims, acks, retries (now and
    later), burials, releases, recovered leases, requeued dead letters, deletes,
    cancels, tags used again by another group, and jobs published by a queue object
    without the limit (the layout of earlier code: no index entry, never counted)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        super().__init__()
        self.client = client
        name = f"gl{next(_names)}-{uuid.uuid4().hex[:6]}"
        backoff = Backoff(base=3600, max=7200, jitter=0)
        self.q = Queue(
            name,
            QueueOptions(
                fairness="groups",
                group_max_length=GROUP_LIMIT,
                max_retries=1,
                retry_backoff=backoff,
            ),
            prefix=prefix,
            client=client,
        )
        opts = QueueOptions(fairness="groups", max_retries=1, retry_backoff=backoff)
        self.old = Queue(name, opts, prefix=prefix, client=client)
        # loaded first: a script error in the reply to a call sent again after NOSCRIPT
        # reaches the caller unmapped (Scripts.run), which is not what is tested here
        self.q.engine._scripts.load_all()
        self.jobs: dict[str, GroupJob] = {}
        self._past = itertools.count(1)

    def teardown(self) -> None:
        self.q.clear()

    def _waiting(self, group: str) -> int:
        return sum(
            1
            for j in self.jobs.values()
            if j.counted and j.group == group and j.state in (READY, DELAYED)
        )

    def _tags(self, state: str | None = None) -> list[str]:
        return sorted(t for t, j in self.jobs.items() if state is None or j.state == state)

    def _snapshot(self) -> dict[str, Any]:
        pipe = self.client.pipeline(transaction=False)
        for key in self.q.engine._keys.all():
            pipe.dump(key)
        return dict(zip(self.q.engine._keys.all(), pipe.execute(), strict=True))

    @rule(
        group=GROUPS,
        later=st.booleans(),
        old=st.sampled_from([False, False, False, True]),
        tag=st.sampled_from([None, *POOL[:2]]),
    )
    def publish(self, group: str, later: bool, old: bool, tag: str | None) -> None:
        if tag in self.jobs:
            tag = None
        kwargs: dict[str, Any] = {"group": group or None, "delay": 3600 if later else None}
        if not old and self._waiting(group) + 1 > GROUP_LIMIT:
            before = self._snapshot()
            n = self._waiting(group)
            with pytest.raises(QueueFull, match=f'group "{group}" has {n} jobs waiting'):
                self.q.publish("x", tag, **kwargs)
            assert self._snapshot() == before, "a refused publish writes nothing"
            return
        got = (self.old if old else self.q).publish("x", tag, **kwargs)
        self.jobs[got] = GroupJob(group, DELAYED if later else READY, counted=not old)

    @rule(groups=st.lists(GROUPS, min_size=1, max_size=5), later=st.booleans())
    def publish_many(self, groups: list[str], later: bool) -> None:
        jobs = [self.q.prepare("x", group=g or None, delay=3600 if later else None) for g in groups]
        over = [
            g for g in dict.fromkeys(groups) if self._waiting(g) + groups.count(g) > GROUP_LIMIT
        ]
        if over:
            before = self._snapshot()
            with pytest.raises(QueueFull, match=f'group "{over[0]}"'):
                self.q.publish_prepared(jobs)
            assert self._snapshot() == before, "a refused batch writes nothing"
            return
        self.q.publish_prepared(jobs)
        for job, g in zip(jobs, groups, strict=True):
            self.jobs[job.tag] = GroupJob(g, DELAYED if later else READY, counted=True)

    @rule(batch=st.integers(1, 3))
    def claim(self, batch: int) -> None:
        msgs, _ = self.q.claim(batch, consumer="c")
        assert len(msgs) == min(batch, len(self._tags(READY)))
        for m in msgs:
            job = self.jobs[m.tag]
            assert job.state == READY
            job.state, job.msg = LEASED, m

    def _leased(self, idx: int) -> tuple[str, GroupJob] | None:
        tags = self._tags(LEASED)
        if not tags:
            return None
        tag = tags[idx % len(tags)]
        return tag, self.jobs[tag]

    @rule(idx=INDEX, how=st.sampled_from(["ack", "now", "later", "dead", "release", "lapse"]))
    def settle(self, idx: int, how: str) -> None:
        found = self._leased(idx)
        if found is None:
            return
        tag, job = found
        assert job.msg is not None
        if how == "ack":
            assert self.q.ack(job.msg)
            del self.jobs[tag]
        elif how == "release":
            assert self.q.release(job.msg)
            job.state = READY
        elif how == "lapse":  # the lease ran out; scan recovers it (or buries it)
            self.client.zadd(self.q.engine._keys.leased, {tag: next(self._past)})
            self.q.scan()
            job.state = self.q.state(tag) or "gone"
            assert job.state in (READY, DEAD)
        else:
            retry_in = 3600 if how == "later" else 0
            outcome = self.q.nack(job.msg, "e", retry_in=retry_in, dead=how == "dead")
            job.state = DEAD if outcome == "dead" else DELAYED if how == "later" else READY
        job.msg = None

    @rule(idx=INDEX, op=st.sampled_from(["delete", "cancel", "requeue_dead"]))
    def remove_or_revive(self, idx: int, op: str) -> None:
        tags = self._tags(DEAD) if op == "requeue_dead" else self._tags()
        if not tags:
            return
        tag = tags[idx % len(tags)]
        job = self.jobs[tag]
        if op == "requeue_dead":
            assert self.q.requeue_dead(tag)
            job.state = READY
        elif op == "delete":
            assert self.q.delete(tag) == (job.state != LEASED)
            if job.state != LEASED:
                del self.jobs[tag]
        else:
            assert self.q.cancel(tag) == (job.state != DEAD)
            if job.state != DEAD:
                del self.jobs[tag]

    @invariant()
    def each_group_is_counted_exactly(self) -> None:
        shard = self.q.engine._shards[0]
        for group in ("a", "b", ""):
            n = self._waiting(group)
            with pytest.raises(QueueFull, match=f'group "{group}" has {n} jobs waiting'):
                self.q.engine.run(shard.group_check([(group, max(1, GROUP_LIMIT - n + 1))]))
            if n < GROUP_LIMIT:
                assert self.q.engine.run(shard.group_check([(group, GROUP_LIMIT - n)])) == 0


def test_group_limit_state_machine(redis_client: redis.Redis, prefix: str) -> None:
    run_state_machine_as_test(
        lambda: GroupLimitMachine(redis_client, prefix),
        settings=settings(
            max_examples=40,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            report_multiple_bugs=False,
            phases=[p for p in Phase if p is not Phase.explain],
        ),
    )
