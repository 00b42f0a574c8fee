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
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_zqueue.queue import Message, Queue
from django_zqueue.worker.leases import Leases

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
