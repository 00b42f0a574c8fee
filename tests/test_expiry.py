"""Job expiry: a job not started by its expiry never starts; it ends in the terminal state
``expired``, its record kept, counted, its workflow dependents told (docs/queue.md,
"Job expiry")."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from django_zqueue import DuplicateJob, InvalidArgument, task
from django_zqueue.engine.records import NewJob
from django_zqueue.engine.records.links import FlowJob, Kid, Ref
from django_zqueue.engine.records.spec import pack_map
from django_zqueue.engine.scripts import source
from django_zqueue.queue import Queue
from django_zqueue.queue.flow import publish_flow

from .conftest import QueueFactory, snapshot


def lapse(seconds: float = 0.08) -> None:
    time.sleep(seconds)  # past the jobs' expiry (Redis' clock runs with ours here)


def test_a_job_past_its_expiry_is_never_claimed(q: Queue) -> None:
    late = q.publish("late", expires=0.05)
    on_time = q.publish("on time")
    lapse()
    msgs, _ = q.claim(10, "c")
    assert [m.tag for m in msgs] == [on_time]
    assert q.state(late) == "expired"
    info = q.info(late)
    assert info is not None and info.state == "expired" and info.expired_at is not None
    assert info.body == "late"  # its record and body are kept
    assert "expired: not started by" in (info.last_error or "")
    assert info.expires_at is not None and info.expires_at <= info.expired_at
    assert q.stats()["jobs_expired"] == 1
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 1, "dead": 0}


def test_a_claim_that_meets_only_expired_jobs_says_claim_again(q: Queue) -> None:
    for i in range(3):
        q.publish(i, expires=0.05)
    lapse()
    msgs, hint = q.claim(2, "c")  # the three expire: nothing leased, claim again
    assert msgs == [] and hint == 0
    fresh = q.publish("fresh")
    msgs, _ = q.claim(2, "c")
    assert [m.tag for m in msgs] == [fresh]


def test_scan_ends_waiting_jobs_on_time_without_a_claim(q: Queue) -> None:
    ready = q.publish("r", expires=0.05)
    delayed = q.publish("d", delay=60, expires=0.05)
    kept = q.publish("k", delay=60, expires=30)
    lapse()
    result = q.scan()
    assert result.expired == 2
    assert q.state(ready) == q.state(delayed) == "expired"
    assert q.state(kept) == "delayed"
    assert q.engine._client.zrange(q.engine._keys.expiry, 0, -1) == [kept.encode()]


def test_a_job_that_started_in_time_is_not_expired_later(q: Queue) -> None:
    tag = q.publish("x", expires=0.1)
    (msg,), _ = q.claim(1, "c")
    assert (
        q.engine._client.zcard(q.engine._keys.expiry) == 0
    )  # started: its expiry no longer applies
    lapse(0.15)
    assert q.scan().expired == 0
    assert q.state(tag) == "leased"
    assert q.ack(msg)
    assert q.state(tag) is None
    # a retry after its expiry still runs: expiry is about the first start
    tag = q.publish("y", expires=0.1)
    (msg,), _ = q.claim(1, "c")
    q.nack(msg, "boom", retry_in=0)
    lapse(0.15)
    (again,), _ = q.claim(1, "c")
    assert again.tag == tag and again.attempt == 2


def test_a_stale_index_entry_is_dropped(q: Queue) -> None:
    tag = q.publish("x", expires=0.05)
    assert q.delete(tag)
    lapse()
    assert q.scan().expired == 0
    assert q.engine._client.zcard(q.engine._keys.expiry) == 0


def test_an_expired_tag_clashes_until_deleted(q: Queue) -> None:
    q.publish("x", tag="t", expires=0.05)
    lapse()
    q.scan()
    with pytest.raises(DuplicateJob) as info:
        q.publish("again", tag="t")
    assert info.value.states == ["expired"]
    assert q.delete("t")
    assert q.state("t") is None and q.engine._client.zcard(q.engine._keys.expired) == 0
    q.publish("again", tag="t")
    assert q.state("t") == "ready"


def test_expired_jobs_are_trimmed_as_dead_letters(make_queue: QueueFactory) -> None:
    q = make_queue(dead_letter_max=2)
    tags = [q.publish(i, expires=0.05) for i in range(5)]
    lapse()
    q.scan()
    q.scan()
    assert q.engine._client.zcard(q.engine._keys.expired) == 2
    assert [q.state(t) for t in tags].count(None) == 3
    assert (
        q.engine._client.hlen(q.engine._keys.meta) == 2
    )  # the trimmed ones' records went with them


def test_the_fair_claim_expires_too(make_queue: QueueFactory) -> None:
    q = make_queue("fairq", fairness="groups")
    late = q.publish("late", group="a", expires=0.05)
    fresh = q.publish("fresh", group="b")
    lapse()
    seen = []
    for _ in range(3):
        msgs, _ = q.claim(5, "c")
        seen += [m.tag for m in msgs]
    assert seen == [fresh]
    assert q.state(late) == "expired"


def test_an_absolute_expiry_and_the_earlier_of_two(q: Queue) -> None:
    at = datetime.now(UTC) + timedelta(seconds=0.05)
    tag = q.publish("x", expires=at)
    lapse()
    assert q.claim(5, "c")[0] == []
    assert q.state(tag) == "expired"
    # a hand-made spec with both: the earlier wins
    spec = pack_map(
        {
            "id": "both",
            "body": b"1",
            "expires_in_ms": 3_600_000,
            "expires_at_ms": int(time.time() * 1000) + 50,
        }
    )
    call = q.engine._shards[0].publish([NewJob("both", b"1")])
    q.engine._client.eval(
        source("publish"), len(call.keys), *call.keys, q.engine.policy.packed, spec
    )
    lapse()
    q.scan()
    assert q.state("both") == "expired"


@pytest.mark.parametrize(
    "bad",
    [0, -1, float("nan"), float("inf"), 3651 * 86400, "soon", True],
)
def test_a_bad_expiry_is_refused_and_writes_nothing(
    q: Queue, prefix: str, redis_client: redis.Redis, bad: Any
) -> None:
    before = snapshot(redis_client, prefix)
    with pytest.raises(InvalidArgument, match="expires"):
        q.publish("x", expires=bad)
    with pytest.raises(InvalidArgument, match="expires is in the past"):
        q.publish("x", expires=datetime.now(UTC) - timedelta(seconds=1))
    assert snapshot(redis_client, prefix) == before


@pytest.mark.parametrize(
    ("field", "value"), [("expires_in_ms", 0), ("expires_in_ms", "1"), ("expires_at_ms", -5)]
)
def test_the_script_refuses_a_bad_expiry_field(
    q: Queue, prefix: str, redis_client: redis.Redis, field: str, value: Any
) -> None:
    before = snapshot(redis_client, prefix)
    call = q.engine._shards[0].publish([NewJob("t", b"1")])
    spec = pack_map({"id": "t", "body": b"1", field: value})
    with pytest.raises(redis.ResponseError, match=f"ZQ_BAD_ARGUMENT.*{field}"):
        q.engine._client.eval(
            source("publish"), len(call.keys), *call.keys, q.engine.policy.packed, spec
        )
    assert snapshot(redis_client, prefix) == before


def test_a_workflow_parent_that_expires_fails_its_dependent(q: Queue) -> None:
    parent, child = q.prepare("p", expires=0.05), q.prepare("c")
    publish_flow(
        [
            (q, FlowJob(parent, kids=(Kid(q.name, child.tag, 1),))),
            (q, FlowJob(child, parents=(Ref(q.name, parent.tag),))),
        ]
    )
    assert q.state(child.tag) == "waiting"
    lapse()
    assert q.scan().expired == 1
    q.engine.flow.drain()
    assert q.state(parent.tag) == "expired"
    info = q.info(child.tag)
    assert info is not None and info.state == "dead"
    assert parent.tag in (info.last_error or "")


def test_a_job_waiting_for_its_parents_expires_and_stays_expired(q: Queue) -> None:
    parent, child = q.prepare("p"), q.prepare("c", expires=0.05)
    publish_flow(
        [
            (q, FlowJob(parent, kids=(Kid(q.name, child.tag, 1),))),
            (q, FlowJob(child, parents=(Ref(q.name, parent.tag),))),
        ]
    )
    lapse()
    assert q.scan().expired == 1
    assert q.state(child.tag) == "expired"
    (msg,), _ = q.claim(1, "c")
    assert msg.tag == parent.tag and q.ack(msg)
    q.engine.flow.drain()
    assert q.state(child.tag) == "expired"  # its parent's success does not revive it
    assert q.claim(5, "c")[0] == []


@task(name="tests.expiry.echo", expires=0.05)
def echo(x: int) -> int:
    return x


@task(name="tests.expiry.takes_expires")
def takes_expires(x: int, expires: str = "") -> str:
    return expires


def test_task_expires_and_the_enqueue_keyword(zqueue_settings: dict[str, Any]) -> None:
    job = echo.enqueue(1)
    later = echo.enqueue(2, expires=60)  # the call's own expiry wins
    lapse()
    q = echo.queue
    q.scan()
    assert job.status() == "expired"
    assert later.status() == "ready"
    with pytest.raises(InvalidArgument, match="expires"):
        echo.using(expires=0).enqueue(3)
    # a function with a parameter of that name keeps it as an argument
    kept = takes_expires.enqueue(1, expires="mine")
    info = q.info(kept.id)
    assert info is not None and info.expires_at is None
    assert info.body["kwargs"] == {"expires": "mine"}


def test_the_admin_finds_an_expired_job_by_its_tag(q: Queue) -> None:
    from django_zqueue.read.overview import locate

    tag = q.publish("x", expires=0.05)
    lapse()
    q.scan()
    (where,) = locate([q.engine], tag)
    assert where.state == "expired" and where.rank is None


def test_the_position_widget_says_expired(zqueue_settings: dict[str, Any]) -> None:
    from django_zqueue.tasks.watch import read_positions

    q = echo.queue
    tag = q.publish({"task": "tests.expiry.echo", "args": [1], "kwargs": {}}, expires=0.05)
    lapse()
    q.scan()
    assert read_positions(q, [tag])[tag].status == "expired"
