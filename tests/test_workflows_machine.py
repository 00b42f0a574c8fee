"""Stateful property test of workflow dependencies against a real Redis (the ``waiting``
state; see tests/test_state_machine.py for the four other states).

A hypothesis ``RuleBasedStateMachine`` publishes jobs, some depending on any earlier jobs
(live, dead or gone), and runs them in random orders: ack, bury (dead), delete, requeue
a dead job, with the dispatch of each end done at once, late (a "crashed" worker: only
the scanner's drain applies it) or twice. A model of which jobs succeeded and failed
predicts, after every step and a full drain:

- every job is in exactly one of ready, waiting, dead, or gone;
- a job is ready (or was run) only once every parent succeeded (never before);
- a job runs at most once per time it was put back by hand (never twice);
- a waiting job has a parent not yet succeeded and none failed; a job dead for a
  dependency has a failed parent (nothing waits forever, nothing dies for nothing).
"""

from __future__ import annotations

import uuid
from typing import Any

import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from django_zqueue.conf import QueueOptions
from django_zqueue.queue import Queue

DISPATCH = st.sampled_from(["now", "late", "twice"])


class FlowMachine(RuleBasedStateMachine):
    def __init__(self, client: redis.Redis, prefix: str) -> None:
        super().__init__()
        self.q = Queue(
            "wf",
            QueueOptions(max_retries=0),
            prefix=f"{prefix}-{uuid.uuid4().hex[:6]}",
            client=client,
        )
        self.parents: dict[str, list[str]] = {}
        self.given: dict[str, set[str]] = {}  # parents already gone when it was published
        self.succeeded: set[str] = set()
        self.failed: set[str] = set()  # buried by hand, or deleted
        self.runs: dict[str, int] = {}
        self.puts: dict[str, int] = {}  # times put in line by hand (requeue)
        self.n = 0

    def teardown(self) -> None:
        keys = list(self.q.engine._client.scan_iter(match=f"{{{self.q.prefix}:*", count=1000))
        if keys:
            self.q.engine._client.delete(*keys)

    def _end(self, tag: str, how: str) -> None:
        if how != "late":
            self.q.dispatch([tag])
        if how == "twice":
            self.q.dispatch([tag])

    @rule()
    def publish_root(self) -> None:
        tag = f"j{self.n}"
        self.n += 1
        self.q.publish(tag, tag=tag)
        self.parents[tag] = []

    @rule(data=st.data())
    def publish_child(self, data: Any) -> None:
        if not self.parents:
            return
        known = sorted(self.parents)
        chosen = data.draw(st.lists(st.sampled_from(known), min_size=1, max_size=3, unique=True))
        tag = f"j{self.n}"
        self.n += 1
        gone = {p for p in chosen if self.q.state(p) is None}
        self.q.publish(tag, tag=tag, depends_on=chosen)
        self.parents[tag] = chosen
        self.given[tag] = gone

    @rule(how=DISPATCH)
    def ack(self, how: str) -> None:
        msg = self.q.get()
        if msg is None:
            return
        self.runs[msg.tag] = self.runs.get(msg.tag, 0) + 1
        assert self.q.ack(msg, passed=msg.tag)
        self.succeeded.add(msg.tag)
        self.failed.discard(msg.tag)
        self._end(msg.tag, how)

    @rule(how=DISPATCH)
    def bury(self, how: str) -> None:
        msg = self.q.get()
        if msg is None:
            return
        self.runs[msg.tag] = self.runs.get(msg.tag, 0) + 1
        assert self.q.nack(msg, "no", dead=True) == "dead"
        self.failed.add(msg.tag)
        self._end(msg.tag, how)

    @rule(data=st.data(), how=DISPATCH)
    def delete(self, data: Any, how: str) -> None:
        if not self.parents:
            return
        tag = data.draw(st.sampled_from(sorted(self.parents)))
        if self.q.delete(tag):
            self.failed.add(tag)
            self._end(tag, how)

    @rule(data=st.data(), how=DISPATCH)
    def requeue(self, data: Any, how: str) -> None:
        dead = [t for t in sorted(self.failed) if self.q.state(t) == "dead"]
        if not dead:
            return
        tag = data.draw(st.sampled_from(dead))
        assert self.q.requeue_dead(tag)
        self.failed.discard(tag)
        self.puts[tag] = self.puts.get(tag, 0) + 1

    @rule()
    def drain(self) -> None:
        while self.q.engine.flow.drain():
            pass

    def ok(self, child: str, parent: str) -> bool:
        return parent in self.succeeded or parent in self.given.get(child, set())

    @invariant()
    def never_early_never_twice(self) -> None:
        for tag, ps in self.parents.items():
            state = self.q.state(tag)
            if state == "ready" or tag in self.succeeded:
                assert all(self.ok(tag, p) for p in ps), (tag, ps)
            assert self.runs.get(tag, 0) <= 1 + self.puts.get(tag, 0), tag

    @invariant()
    def settled(self) -> None:
        while self.q.engine.flow.drain():
            pass
        for tag, ps in self.parents.items():
            state = self.q.state(tag)
            assert state in (None, "ready", "waiting", "dead"), (tag, state)
            if state == "waiting":  # (a parent gone at publish counts as succeeded)
                assert not all(self.ok(tag, p) for p in ps), (tag, ps)
                failed = [p for p in ps if p in self.failed and p not in self.given[tag]]
                assert not failed, (tag, ps, failed)
            if state == "dead" and tag not in self.failed:
                why = self.q.info(tag).last_error or ""  # type: ignore[union-attr]
                assert why.startswith("dependency "), (tag, why)
                blamed = why.split()[1]
                assert blamed in ps
                assert blamed in self.failed or self.q.state(blamed) == "dead", (tag, blamed)
            if state == "ready":
                assert all(self.ok(tag, p) for p in ps), (tag, ps)


def test_workflow_state_machine(redis_client: redis.Redis, prefix: str) -> None:
    run_state_machine_as_test(
        lambda: FlowMachine(redis_client, prefix),
        settings=settings(
            max_examples=15,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            report_multiple_bugs=False,
            phases=[p for p in Phase if p is not Phase.explain],
        ),
    )
