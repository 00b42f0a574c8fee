"""``engine.sandbox`` (django_zqueue/engine/sandbox.py), the test-only verbs behind
django_zqueue.testing: ``wipe_prefix`` deletes its prefix's keys and nothing else;
``fast_forward`` makes delayed jobs due, a durable sleep passed, and leaves a job
waiting for an event alone."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
import redis

from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue

from .conftest import snapshot


def test_wipe_prefix_deletes_its_keys_only(
    make_queue: Callable[..., Queue], redis_client: redis.Redis, prefix: str
) -> None:
    from django_zqueue.conf import queue_options

    q = make_queue("a")
    make_queue("b").publish({"x": 1})
    q.publish({"x": 2}, delay=3600)
    near = f"{prefix}x"  # a prefix that starts the same
    other = Queue("a", queue_options("a"), prefix=near, client=redis_client)
    other.publish({"x": 3})
    kept = snapshot(redis_client, near)
    assert snapshot(redis_client, prefix)
    deleted = q.engine.sandbox.wipe_prefix()
    assert deleted > 0
    assert snapshot(redis_client, prefix) == {}
    assert snapshot(redis_client, near) == kept
    other.engine.sandbox.wipe_prefix()


def test_wipe_prefix_is_bounded(
    make_queue: Callable[..., Queue], redis_client: redis.Redis, prefix: str
) -> None:
    q = make_queue()
    q.publish({"x": 1})
    before = len(snapshot(redis_client, prefix))
    assert before > 2
    assert q.engine.sandbox.wipe_prefix(limit=2) == 2
    assert len(snapshot(redis_client, prefix)) == before - 2


def test_wipe_prefix_of_nothing(redis_client: redis.Redis) -> None:
    from django_zqueue.conf import queue_options

    q = Queue("q", queue_options("q"), prefix=f"zqt-{uuid.uuid4().hex}", client=redis_client)
    assert q.engine.sandbox.wipe_prefix() == 0


def test_fast_forward_makes_delayed_jobs_due(q: Queue) -> None:
    a = q.publish({"n": 1}, delay=86400)
    b = q.publish({"n": 2}, delay=3600)
    assert q.claim(5)[0] == []
    assert q.engine.sandbox.fast_forward() == 2
    got, _ = q.claim(5)
    assert {m.tag for m in got} == {a, b}


def test_fast_forward_of_nothing_writes_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    q.publish({"n": 1})
    before = snapshot(redis_client, prefix)
    assert q.engine.sandbox.fast_forward() == 0
    assert snapshot(redis_client, prefix) == before


def test_fast_forward_is_bounded_per_shard(q: Queue) -> None:
    for n in range(5):
        q.publish({"n": n}, delay=3600)
    assert q.engine.sandbox.fast_forward(limit=2) == 2
    assert q.counts()["delayed"] == 5  # promoted by the next claim
    assert len(q.claim(10)[0]) == 2


def test_fast_forward_covers_every_partition(make_queue: Callable[..., Queue]) -> None:
    q = make_queue("parts", partitions=4)
    tags = {q.publish({"n": n}, delay=3600) for n in range(12)}
    assert q.engine.sandbox.fast_forward() == 12
    claimed = set()
    for _ in range(10):
        claimed |= {m.tag for m in q.claim(12)[0]}
    assert claimed == tags


def test_fast_forward_leaves_a_job_waiting_for_an_event(q: Queue) -> None:
    msg = None
    tag = q.publish({"n": 1})
    (msg,), _ = q.claim(1)
    assert msg.tag == tag
    q.engine.durable.park(msg, "w:approved", 86_400_000)
    score = q.info(tag).run_at
    assert q.engine.sandbox.fast_forward() == 0
    assert q.state(tag) == "delayed" and q.info(tag).run_at == score


def test_fast_forward_passes_a_durable_sleep(q: Queue) -> None:
    tag = q.publish({"n": 1})
    (msg,), _ = q.claim(1)
    q.engine.durable.park(msg, "z:nap", 3_600_000)
    assert q.engine.durable.parked(tag).kind == "sleep"
    assert q.engine.sandbox.fast_forward() == 1
    (again,), _ = q.claim(1)
    records = q.engine.durable.run_records(again)
    assert int(records.fields["z:nap"]) <= records.now_ms  # the sleep has passed


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "2"])
def test_a_bad_limit_is_refused_with_nothing_written(
    q: Queue, redis_client: redis.Redis, prefix: str, limit: object
) -> None:
    q.publish({"n": 1}, delay=3600)
    before = snapshot(redis_client, prefix)
    with pytest.raises(InvalidArgument, match="limit"):
        q.engine.sandbox.fast_forward(limit=limit)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="limit"):
        q.engine.sandbox.wipe_prefix(limit=limit)  # type: ignore[arg-type]
    assert snapshot(redis_client, prefix) == before


def test_jobs_made_due_already_are_not_counted_again(q: Queue) -> None:
    """A queue that does not claim them (paused) keeps them at 0: a drain stops."""
    q.publish({"n": 1}, delay=3600)
    assert q.engine.sandbox.fast_forward() == 1
    assert q.engine.sandbox.fast_forward() == 0
    assert q.counts()["delayed"] == 1
