"""The queue option max_length: a publish past it raises QueueFull and writes nothing
(docs/queue.md, "Queue limits (backpressure)")."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
import redis

from django_zqueue import QueueFull, ZQueueError
from django_zqueue.conf import parse
from django_zqueue.engine.records.links import FlowJob, Kid, Ref
from django_zqueue.queue.flow import publish_flow

from .conftest import QueueFactory, snapshot


def test_a_publish_past_max_length_raises_and_writes_nothing(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = make_queue(max_length=3)
    q.publish("a")
    q.publish("b", delay=60)  # delayed jobs count
    q.publish("c")
    before = snapshot(redis_client, prefix)
    with pytest.raises(QueueFull, match="3 jobs wait and 1 more would pass max_length 3"):
        q.publish("d")
    with pytest.raises(QueueFull):
        q.publish("d", tag="named", delay=5)
    assert snapshot(redis_client, prefix) == before
    assert isinstance(QueueFull("x"), ZQueueError)
    q.get()  # one leaves the line: there is room for one
    q.publish("d")
    with pytest.raises(QueueFull):
        q.publish("e")


def test_publish_many_is_refused_as_a_whole(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = make_queue(max_length=10)
    q.publish_many(range(8))
    before = snapshot(redis_client, prefix)
    with pytest.raises(QueueFull):
        q.publish_many(range(3))  # 8 + 3 > 10: none of the three
    assert snapshot(redis_client, prefix) == before
    q.publish_many(range(2))
    assert q.counts()["ready"] == 10


def test_a_long_publish_many_is_checked_before_its_first_chunk(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = make_queue(max_length=250)
    q.publish_many(range(100))
    before = snapshot(redis_client, prefix)
    with pytest.raises(QueueFull) as info:
        q.publish_many(range(151))  # two chunks of 100 would fit; the third would not
    assert info.value.published == []
    assert snapshot(redis_client, prefix) == before
    assert len(q.publish_many(range(150))) == 150
    assert q.counts()["ready"] == 250


def test_a_chunk_refused_after_the_check_says_what_was_written(make_queue: QueueFactory) -> None:
    """Another client fills the queue between the check and a later chunk: the chunks
    written are named in ``published`` (simulated: the check is passed with a policy
    that has room, the scripts see the real limit)."""
    q = make_queue(max_length=150)
    jobs = [q.prepare(i) for i in range(200)]
    with pytest.raises(QueueFull) as info:
        q.publish_prepared(jobs)  # the check refuses: nothing sent
    assert info.value.published == [] and q.counts()["ready"] == 0
    from django_zqueue.engine import writes as publishing

    real = publishing.room_or_full
    publishing.room_or_full = lambda *a, **k: None  # the check saw room
    try:
        with pytest.raises(QueueFull) as info:
            q.publish_prepared(jobs)
    finally:
        publishing.room_or_full = real
    assert info.value.published == [j.tag for j in jobs[:100]]
    assert q.counts()["ready"] == 100


def test_concurrent_publishers_never_pass_the_limit(make_queue: QueueFactory) -> None:
    q = make_queue(max_length=50)
    refused: list[int] = []
    barrier = threading.Barrier(4)

    def publisher() -> None:
        barrier.wait(5)
        for i in range(40):
            try:
                q.publish(i)
            except QueueFull:
                refused.append(i)

    threads = [threading.Thread(target=publisher) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert q.counts()["ready"] == 50
    assert len(refused) == 4 * 40 - 50


def test_jobs_coming_back_are_never_refused(make_queue: QueueFactory) -> None:
    """A retry, a release and a requeued dead letter go back in line even in a full
    queue: refusing them would lose a job."""
    q = make_queue(max_length=2, max_retries=1)
    q.publish("a")
    q.publish("b")
    first = q.get()
    assert first is not None
    q.publish("c")  # the queue is full again
    assert q.nack(first, "boom", retry_in=0) == "retry"
    assert q.counts()["ready"] + q.counts()["delayed"] == 3  # past the limit, not lost
    second = q.get()
    assert second is not None
    assert q.release(second)
    dead = q.get()
    assert dead is not None
    assert q.nack(dead, "boom", dead=True) == "dead"
    assert q.requeue_dead(dead.tag)
    with pytest.raises(QueueFull):
        q.publish("d")


def test_debounce_replacing_a_waiting_job_is_not_refused(make_queue: QueueFactory) -> None:
    q = make_queue(max_length=1)
    assert q.publish_once(q.prepare("v1", "k"), debounce=5) == "new"
    assert q.publish_once(q.prepare("v2", "k"), debounce=5) == "replaced"
    with pytest.raises(QueueFull):
        q.publish_once(q.prepare("other", "k2"), debounce=5)
    with pytest.raises(QueueFull):
        q.publish("x", tag="u", unique_for=60)


def test_partitions_each_hold_their_share(make_queue: QueueFactory) -> None:
    q = make_queue(max_length=4, partitions=2)
    tags = []
    for i in range(200):
        with contextlib.suppress(QueueFull):
            tags.append(q.publish(i))
    per_shard = [
        q.engine._client.zcard(s.keys.ready) + q.engine._client.zcard(s.keys.delayed)
        for s in q.engine._shards
    ]
    assert per_shard == [2, 2]
    assert len(tags) == 4


def test_a_workflow_is_checked_before_any_job_is_written(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = make_queue(max_length=2)
    q.publish("filler")
    before = snapshot(redis_client, prefix)
    pair = [(q, FlowJob(q.prepare(i))) for i in range(2)]
    with pytest.raises(QueueFull):
        publish_flow(pair)  # 1 + 2 > 2
    assert snapshot(redis_client, prefix) == before
    # a chain's later steps wait for their parents: only its first enters the line
    a, b, c = (q.prepare(i) for i in range(3))
    publish_flow(
        [
            (q, FlowJob(a, kids=(Kid(q.name, b.tag, 1),))),
            (q, FlowJob(b, parents=(Ref(q.name, a.tag),), kids=(Kid(q.name, c.tag, 1),))),
            (q, FlowJob(c, parents=(Ref(q.name, b.tag),))),
        ]
    )
    assert q.counts()["ready"] == 2
    assert q.state(c.tag) == "waiting"


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True, 10**13])
def test_a_bad_max_length_is_a_check_error(bad: Any) -> None:
    _, problems = parse({"QUEUES": {"q": {"max_length": bad}}})
    assert [p.id for p in problems] == ["django_zqueue.E007"], problems
    assert "max_length" in problems[0].msg


def test_the_async_client_is_refused_alike(
    make_queue: QueueFactory, zqueue_settings: dict[str, Any]
) -> None:
    from django_zqueue import conf
    from django_zqueue.engine.redis.aconnection import make_async_client
    from django_zqueue.queue.aio import AsyncQueue

    q = make_queue("alimited", max_length=1)

    async def scenario() -> None:
        client = make_async_client(conf.get_config())
        try:
            aq = AsyncQueue(q, client=client)
            await aq.publish("a")
            with pytest.raises(QueueFull):
                await aq.publish("b")
        finally:
            await client.aclose()

    asyncio.run(scenario())
    assert q.counts()["ready"] == 1
