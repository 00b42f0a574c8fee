"""Expired jobs at the head of the line do not hide a ready job behind them: a claim
reads past up to ``EXPIRED_MAX`` expired (or corrupt) heads per call, ending each as
expired, and leases the ready job behind them in the same call; past that bound it
answers nothing with a hint of 0, and ``get()`` claims again (docs/queue.md, "Job
expiry")."""

from __future__ import annotations

import re
import time

import pytest
import redis

from django_zqueue.engine.scripts.source import lua_file
from django_zqueue.queue import Queue

from .conftest import QueueFactory


def lapse(seconds: float = 0.08) -> None:
    time.sleep(seconds)  # past the jobs' expiry (Redis' clock runs with ours here)


def expired_max() -> int:
    found = re.search(r"^local EXPIRED_MAX = (\d+)", lua_file("_expire"), re.MULTILINE)
    assert found is not None
    return int(found.group(1))


@pytest.fixture(params=["plain", "fair"])
def queue(request: pytest.FixtureRequest, make_queue: QueueFactory) -> Queue:
    if request.param == "fair":
        return make_queue("fq", fairness="groups")
    return make_queue()


def test_get_returns_the_ready_job_behind_three_expired_ones(queue: Queue) -> None:
    late = [queue.publish(f"late {i}", expires=0.05) for i in range(3)]
    ready = queue.publish("ready", expires=600)
    lapse()
    msg = queue.get()  # timeout 0: one look
    assert msg is not None and msg.tag == ready
    assert [queue.state(t) for t in late] == ["expired"] * 3
    assert queue.stats()["jobs_expired"] == 3
    assert queue.get() is None


def test_one_claim_leases_the_ready_job_behind_expired_ones(queue: Queue) -> None:
    late = [queue.publish(f"late {i}", expires=0.05) for i in range(5)]
    ready = [queue.publish(f"ready {i}") for i in range(2)]
    lapse()
    msgs, hint = queue.claim(2, "c")  # one script call (a worker's claim)
    assert [m.tag for m in msgs] == ready and hint is None
    assert all(queue.state(t) == "expired" for t in late)
    counts = queue.counts()
    assert counts["ready"] == 0 and counts["inflight"] == 2


def test_a_claim_reads_past_at_most_the_bound_then_says_claim_again(queue: Queue) -> None:
    bound = expired_max()
    n = bound + 7
    for i in range(0, n, 50):
        queue.publish_many([f"late {j}" for j in range(i, min(n, i + 50))], expires=0.05)
    ready = queue.publish("ready")
    lapse()
    msgs, hint = queue.claim(1, "c")
    assert msgs == [] and hint == 0  # stopped at the bound: claim again
    assert queue.stats()["jobs_expired"] == bound  # the work of one call is bounded
    assert queue.counts()["ready"] == 7 + 1
    msg = queue.get()  # the client claims again after a hint of 0
    assert msg is not None and msg.tag == ready
    assert queue.stats()["jobs_expired"] == n


def test_get_gives_up_on_an_empty_line_after_expired_heads(queue: Queue) -> None:
    for i in range(3):
        queue.publish(f"late {i}", expires=0.05)
    lapse()
    assert queue.get() is None
    assert queue.counts()["ready"] == 0 and queue.stats()["jobs_expired"] == 3


def test_a_delayed_job_that_falls_due_expired_is_skipped_too(queue: Queue) -> None:
    late = queue.publish("late", delay=0.01, expires=0.05)
    ready = queue.publish("ready", delay=0.03)  # due after it: promoted behind it
    lapse()
    msg = queue.get()
    assert msg is not None and msg.tag == ready
    assert queue.state(late) == "expired"


def test_get_claims_again_while_claims_end_expired_heads(queue: Queue) -> None:
    n = 2 * expired_max() + 5  # three claims' worth: get() sends them all
    for i in range(0, n, 50):
        queue.publish_many([f"late {j}" for j in range(i, min(n, i + 50))], expires=0.05)
    ready = queue.publish("ready")
    lapse()
    msg = queue.get()
    assert msg is not None and msg.tag == ready
    assert queue.stats()["jobs_expired"] == n
    assert next(queue.subscribe(timeout=0), None) is None


def test_jobs_read_past_the_batch_stay_in_line(queue: Queue) -> None:
    """The pages read past expired heads may hold more than the batch needs: those stay
    ready, in order, and are leased by the next claim."""
    tags = []
    for i in range(12):
        tags.append(queue.publish(f"late {i}", expires=0.05) if i % 3 == 0 else queue.publish(i))
    lapse()
    late = tags[0::3]
    ready = [t for t in tags if t not in late]
    msgs, _ = queue.claim(2, "c")
    assert [m.tag for m in msgs] == ready[:2]
    assert queue.state(late[0]) == "expired"  # (late[1] is behind the two leased)
    assert all(queue.state(t) == "ready" for t in [*ready[2:], *late[1:]])
    rest: list[str] = []
    for _ in range(5):
        more, _ = queue.claim(3, "c")
        rest += [m.tag for m in more]
    assert rest == ready[2:]
    assert all(queue.state(t) == "expired" for t in late)


def test_corrupt_and_expired_heads_together(queue: Queue, redis_client: redis.Redis) -> None:
    bad = [queue.publish(f"bad {i}") for i in range(3)]
    late = [queue.publish(f"late {i}", expires=0.05) for i in range(3)]
    ready = queue.publish("ready")
    for t in bad:
        redis_client.hset(queue.engine._keys_for(t).meta, t, b"garbage")
    lapse()
    msgs, _ = queue.claim(1, "c")
    assert [m.tag for m in msgs] == [ready]
    assert [queue.state(t) for t in bad] == ["dead"] * 3
    assert [queue.state(t) for t in late] == ["expired"] * 3
