"""A worker's own bookkeeping under races: the held jobs of :class:`Leases` (one entry per
delivery, not per tag), against a real Redis.

``LeasesMachine`` (hypothesis) drives two consumer threads of one worker (each a thread
of its own, as in a worker: ``hold`` and ``start`` read the calling thread) through
claims, starts, finishes, stops, and the heartbeat's adaptive-prefetch hand-back,
interleaved at random. What it holds to: a job is started only while this delivery is
held (a job handed back and claimed again by the other thread is never started a second
time with the old message); every started run acks (its token is the job's current one);
two runs of one tag never overlap; ``Leases.claimed`` counts the claims not given back
(a ``give_back`` after a hand-back neither counts nor sends twice).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_zqueue import chain, conf
from django_zqueue.queue import Message, Queue, get_queue
from django_zqueue.worker import Worker
from django_zqueue.worker.leases import Leases
from testproject.demo import ledger, tasks

T = TypeVar("T")


@dataclass
class Thread:
    """One consumer thread: its batch not started yet, and the job it runs."""

    pool: ThreadPoolExecutor
    batch: list[Message] = field(default_factory=list)
    running: Message | None = None

    def call(self, fn: Callable[[], T]) -> T:
        return self.pool.submit(fn).result(timeout=30)


class LeasesMachine(RuleBasedStateMachine):
    make: Callable[[], Queue]

    def __init__(self) -> None:
        super().__init__()
        self.q = self.make()
        self.leases = Leases("w-test", [self.q], 2)
        self.threads = [Thread(ThreadPoolExecutor(1)) for _ in range(2)]
        self.held: set[tuple[str, int]] = set()  # the model: deliveries held, not given back
        self.claimed = 0  # the model of Leases.claimed
        self.token: dict[str, int] = {}  # each tag's current delivery
        self.n = itertools.count()

    def teardown(self) -> None:
        for t in self.threads:
            t.pool.shutdown(wait=True)

    @rule(k=st.integers(1, 4))
    def publish(self, k: int) -> None:
        for _ in range(k):
            self.q.publish({"n": next(self.n)})

    def idle(self, i: int) -> bool:
        return not self.threads[i].batch and self.threads[i].running is None

    @precondition(lambda self: self.idle(0) or self.idle(1))
    @rule(i=st.integers(0, 1), n=st.integers(1, 4))
    def claim(self, i: int, n: int) -> None:
        if not self.idle(i):  # a thread claims once its batch is done
            i = 1 - i
        t = self.threads[i]

        def claim() -> list[Message]:
            msgs, _ = self.q.claim(n, "w-test")
            self.leases.hold(self.q, msgs)
            return msgs

        t.batch = t.call(claim)
        for m in t.batch:
            self.held.add((m.tag, m.token))
            self.token[m.tag] = m.token
        self.claimed += len(t.batch)

    def can_start(self, i: int) -> bool:
        return self.threads[i].running is None and bool(self.threads[i].batch)

    @precondition(lambda self: self.can_start(0) or self.can_start(1))
    @rule(i=st.integers(0, 1))
    def start(self, i: int) -> None:
        if not self.can_start(i):
            i = 1 - i
        t = self.threads[i]
        msg = t.batch.pop(0)
        started = t.call(lambda: self.leases.start(self.q, msg))
        assert started == ((msg.tag, msg.token) in self.held), (msg.tag, msg.token, started)
        if started:
            other = self.threads[1 - i].running
            assert other is None or other.tag != msg.tag, "one job runs twice in one worker"
            assert msg.token == self.token[msg.tag], "a stale delivery started"
            t.running = msg

    @precondition(lambda self: any(t.running is not None for t in self.threads))
    @rule(i=st.integers(0, 1))
    def finish(self, i: int) -> None:
        if self.threads[i].running is None:
            i = 1 - i
        t = self.threads[i]
        msg = t.running
        assert msg is not None

        def finish() -> bool:
            assert self.leases.finish(self.q, msg)
            acked = self.q.ack(msg)
            self.leases.unhold(self.q, msg)
            return acked

        assert t.call(finish), "a run's ack was refused as stale"
        self.held.discard((msg.tag, msg.token))
        t.running = None

    @precondition(lambda self: any(t.running is not None for t in self.threads))
    @rule()
    def hand_back(self) -> None:
        """The heartbeat, long after the running jobs started (adaptive prefetch)."""
        self.leases.hand_back_waiting(time.monotonic() + 3600)
        for t in self.threads:
            if t.running is not None:
                for m in t.batch:
                    if (m.tag, m.token) in self.held:
                        self.held.discard((m.tag, m.token))
                        self.claimed -= 1

    @precondition(lambda self: any(t.batch for t in self.threads))
    @rule(i=st.integers(0, 1))
    def stop(self, i: int) -> None:
        """The worker stops: the thread gives back the rest of its batch."""
        if not self.threads[i].batch:
            i = 1 - i
        t = self.threads[i]
        rest, t.batch = t.batch, []

        def give_back() -> None:
            for m in rest:
                self.leases.give_back(self.q, m)

        t.call(give_back)
        for m in rest:
            if (m.tag, m.token) in self.held:
                self.held.discard((m.tag, m.token))
                self.claimed -= 1

    @invariant()
    def counts(self) -> None:
        assert self.leases.claimed == self.claimed
        leased = self.q.counts()["inflight"]
        assert leased == len(self.held), (leased, self.held)


@pytest.mark.slow
def test_prefetch_hand_back_racing_claims(make_queue: Callable[..., Queue]) -> None:
    names = itertools.count()
    LeasesMachine.make = staticmethod(lambda: make_queue(f"lm{next(names)}"))  # type: ignore[method-assign]
    run_state_machine_as_test(
        LeasesMachine,
        settings=settings(
            max_examples=60,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_a_job_handed_back_and_claimed_by_another_thread_is_not_started_again(
    make_queue: Callable[..., Queue],
) -> None:
    """The sequence the outside check found: thread A holds S and J, starts S; the
    heartbeat hands J back; thread B claims J; A reaches J: it must not start it."""
    q = make_queue()
    leases = Leases("w-test", [q], 2)
    a, b = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    try:
        q.publish({"job": "S"}, tag="S")
        q.publish({"job": "J"}, tag="J")

        def claim(n: int) -> list[Message]:
            msgs, _ = q.claim(n, "w-test")
            leases.hold(q, msgs)
            return msgs

        s, j = a.submit(claim, 2).result()
        assert a.submit(leases.start, q, s).result()
        leases.hand_back_waiting(time.monotonic() + 3600)  # S is slow: J goes back
        assert leases.claimed == 1
        (j2,) = b.submit(claim, 1).result()
        assert (j2.tag, j2.attempt) == ("J", j.attempt) and j2.token != j.token
        assert b.submit(leases.start, q, j2).result()
        assert not a.submit(leases.start, q, j).result()  # the old delivery: not run
        a.submit(leases.give_back, q, j).result()  # a stop meets it: nothing sent, counted
        assert leases.claimed == 2
        assert q.state("J") == "leased"
        assert leases.finish(q, j2) and q.ack(j2)
    finally:
        a.shutdown()
        b.shutdown()


# ------------------------------------------------------------------ a corrupt history


def _corrupt(q: Queue, which: str) -> str:
    key = {
        "history": q.engine._keys.history,
        "finished": q.engine._keys.finished,
        "cancels": q.engine._keys.cancels,
    }
    k = key[which]
    q.engine._client.delete(k)
    q.engine._client.set(k, "junk")
    return k


@pytest.mark.parametrize("which", ["history", "finished", "cancels"])
@pytest.mark.parametrize("many", [False, True], ids=["ack", "ack_many"])
def test_an_ack_goes_on_without_a_history_of_the_wrong_type(
    make_queue: Callable[..., Queue], which: str, many: bool
) -> None:
    """The history is an optional write: with one of its keys of the wrong type, ack and
    ack_many still finish the job (it is not run again), the corrupt key is left as it
    was, and nothing of the history is half-written."""
    q = make_queue()
    tags = q.publish_many([{"n": i} for i in range(3)])
    msgs, _ = q.claim(3, "w1")
    assert len(msgs) == 3
    k = _corrupt(q, which)
    if many:
        assert q.ack_many(msgs) == [True, True, True]
    else:
        assert [q.ack(m) for m in msgs] == [True, True, True]
    assert q.counts()["inflight"] == 0
    assert [q.state(t) for t in tags] == [None, None, None]
    assert q.engine._client.get(k) == b"junk"
    others = {q.engine._keys.history, q.engine._keys.finished, q.engine._keys.cancels} - {k}
    assert all(q.engine._client.type(o) in (b"none", b"zset", b"hash") for o in others)
    assert q.engine._client.exists(q.engine._keys.history) == (which == "history")
    assert q.stats()["acked"] == 3
    # repaired (what zqueue_doctor --repair does to it): the history is kept again
    q.engine._client.delete(k)
    q.publish({"n": 9}, tag="after")
    (m,), _ = q.claim(1, "w1")
    assert q.ack_many([m]) == [True] if many else q.ack(m)
    assert q.engine._client.hexists(q.engine._keys.history, "after")


def test_an_ack_with_a_history_still_refuses_other_corrupt_keys(
    make_queue: Callable[..., Queue],
) -> None:
    """Only the history is optional: a corrupt key the ack must write (here the workflow
    outbox) still refuses it whole, nothing written, the job still leased."""
    from django_zqueue.exceptions import CorruptKey

    q = make_queue()
    q.publish({"n": 1}, tag="a")
    (m,), _ = q.claim(1, "w1")
    _corrupt(q, "history")
    q.engine._client.delete(q.engine._keys.wf_out)
    q.engine._client.set(q.engine._keys.wf_out, "junk")
    with pytest.raises(CorruptKey):
        q.ack(m)
    assert q.state("a") == "leased"


# ------------------------------------------------------------------ a key of the wrong type


def _worker_until(w: Worker, done: Callable[[], bool], timeout: float = 20.0) -> bool:
    import threading

    runner = threading.Thread(target=w.run)
    runner.start()
    try:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
        return done()
    finally:
        w.stop()
        runner.join(30)


def _events(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"event={name}" in r.getMessage()]


def test_a_corrupt_key_of_one_queue_stops_only_that_queue(
    zqueue_settings: dict[str, Any],
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """``{p:default}:ready`` set to a string: the worker's claims of ``default`` fail
    (said, with the key and its repair, at most once a second); those of ``other`` go
    on, every job of it runs once; not an outage (no redis_lost)."""
    caplog.set_level(logging.INFO)
    book = str(tmp_path / "ledger.db")
    ledger.connect(book).close()
    bad = get_queue("default").engine._keys.ready
    redis_client.set(bad, "junk")
    keys = [f"o{i}" for i in range(30)]
    for k in keys:
        tasks.fault_run.using(queue="other").enqueue(book, k)
    w = Worker(["default", "other"], concurrency=2, scan_interval=0.05)
    ran = _worker_until(w, lambda: len(ledger.runs(book)) >= len(keys))
    runs = ledger.runs(book)
    assert ran and sorted(r.key for r in runs) == sorted(keys)  # each once
    errors = _events(caplog, "consumer_error")
    assert errors and all("queue=default" in e for e in errors)
    assert any(bad in e for e in errors)
    assert not _events(caplog, "redis_lost")
    assert redis_client.type(bad) == b"string"  # left for the operator's repair


def _fired(caplog: pytest.LogCaptureFixture) -> int:
    """How many jobs the worker's scanner fired from schedules so far."""
    return sum(int(e.split("fired=")[1].split()[0]) for e in _events(caplog, "schedules_fired"))


def test_an_ack_refused_by_a_corrupt_key_is_kept_and_the_job_runs_once(
    zqueue_settings: dict[str, Any],
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """A workflow job's ack writes the workflow outbox (``wf_out``), which a claim that
    finds the job does not: that key of the wrong type, the job runs, its ack is refused;
    the outcome is kept and its lease extended (a lease of 1 s would otherwise lapse and
    the job run again), the queue's claims wait; once the key is repaired the ack goes
    through: one run, acked, nothing dead."""
    caplog.set_level(logging.INFO)
    zqueue_settings["QUEUES"]["default"] = {"visibility_timeout": 1}
    conf.reset()
    q = get_queue("default")
    book = str(tmp_path / "ledger.db")
    ledger.connect(book).close()
    bad = q.engine._keys.wf_out
    redis_client.set(bad, "junk")
    chain(tasks.fault_run.si(book, "only"), tasks.fault_run.si(book, "then")).enqueue()
    w = Worker(["default"], concurrency=1, scan_interval=0.05)
    import threading

    runner = threading.Thread(target=w.run)
    runner.start()
    try:
        deadline = time.monotonic() + 15
        while not _events(caplog, "consumer_error") and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(3.0)  # three leases of 1 s: a dropped outcome would have run it again
        assert [r.key for r in ledger.runs(book)] == ["only"]
        assert q.counts()["inflight"] == 1
        redis_client.delete(bad)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (
            q.stats().get("acked", 0) < 2 + _fired(caplog) or len(ledger.runs(book)) < 2
        ):
            time.sleep(0.05)
    finally:
        w.stop()
        runner.join(30)
    assert [r.key for r in ledger.runs(book)] == ["only", "then"]  # each once, in order
    # (the demo's */10 schedule fires into this queue when the test spans a 10-minute mark)
    assert 2 <= q.stats().get("acked", 0) <= 2 + _fired(caplog) and q.counts()["dead"] == 0
    assert not _events(caplog, "stale_delivery")


# ------------------------------------------------------------------ one bad queue


def _corrupt_ready(name: str) -> None:
    from django_zqueue.queue import get_queue

    q = get_queue(name)
    q.engine._client.delete(q.engine._keys.ready)
    q.engine._client.set(q.engine._keys.ready, "junk")


@pytest.mark.parametrize("lane", [False, True], ids=["threads", "aio-lane"])
def test_one_corrupt_queue_leaves_the_others_to_threads_and_the_lane(
    project: dict[str, str], lane: bool
) -> None:
    """``SET {p:default}:ready junk``: a worker of default and emails runs the emails
    jobs all the same (its claims and its scanner back off per queue)."""
    import threading

    from django_zqueue.queue import get_queue
    from django_zqueue.worker import Worker
    from testproject.demo import tasks

    jobs = [tasks.add.using(queue="emails").enqueue(i, i) for i in range(20)]
    _corrupt_ready("default")
    w = Worker(
        ["default", "emails"],
        concurrency=2,
        scan_interval=0.05,
        async_concurrency=5 if lane else 0,
    )
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    emails = get_queue("emails")
    try:
        for _ in range(600):  # bounded: 60 s at most (never reached when it works)
            if emails.total_count() == 0:
                break
            time.sleep(0.1)
    finally:
        w.stop()
        t.join(30)
    assert emails.total_count() == 0
    assert emails.stats()["acked"] == len(jobs)
    assert not t.is_alive()


def test_a_corrupt_history_is_named_by_the_scan(make_queue: Callable[..., Queue]) -> None:
    """The acks say nothing of a history they skipped: the queue's scan refuses it,
    naming the key and the repair (the scanner's scan_error line)."""
    from django_zqueue.exceptions import CorruptKey
    from django_zqueue.worker.scanner import Scanner

    q = make_queue()
    k = _corrupt(q, "history")
    with pytest.raises(CorruptKey, match=k) as info:
        Scanner([q]).step()
    assert "zqueue_doctor --repair" in str(info.value)


def test_a_wrong_typed_notify_list_is_not_an_outage(
    project: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """The idle wait's BLPOP on a notify list of the wrong type answers WRONGTYPE: a
    consumer_error naming it (once a second), never ``redis_lost``; jobs still run."""
    import logging
    import threading

    from django_zqueue.queue import get_queue
    from django_zqueue.worker import Worker
    from testproject.demo import tasks

    q = get_queue("default")
    q.engine._client.set(q.engine._keys.notify, "junk")
    w = Worker(["default"], scanner=False)
    t = threading.Thread(target=w.run, daemon=True)
    with caplog.at_level(logging.INFO, logger="django_zqueue"):
        t.start()
        try:
            for _ in range(100):  # bounded: the thread is idle, waiting, then a job comes
                if any("call=blpop" in r.getMessage() for r in caplog.records):
                    break
                time.sleep(0.05)
            tasks.add.enqueue(1, 2)
            for _ in range(600):
                if q.stats().get("acked", 0) == 1:
                    break
                time.sleep(0.05)
        finally:
            w.stop()
            t.join(30)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert q.stats().get("acked", 0) == 1
    assert "redis_lost" not in text
    assert "call=blpop" in text
