"""The queue option group_max_length of a fair queue: a publish that would put more than
that many jobs of one group in line (ready + delayed) raises QueueFull and writes
nothing (docs/fairness.md, "A group's waiting jobs: group_max_length")."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest
import redis

from django_zqueue import QueueFull, ZQueueError, conf
from django_zqueue.conf import parse
from django_zqueue.engine.records.links import FlowJob, Kid, Ref
from django_zqueue.engine.records.spec import pack_map
from django_zqueue.engine.scripts import entry_arg, source
from django_zqueue.exceptions import ConfigurationError
from django_zqueue.queue import Queue
from django_zqueue.queue.flow import publish_flow

from .conftest import QueueFactory, snapshot


def limited(make_queue: QueueFactory, limit: int = 2, name: str = "q", **options: Any) -> Queue:
    q = make_queue(name, fairness="groups", group_max_length=limit, **options)
    # loaded first: on a fresh server the first refusal of a script not yet loaded comes
    # back after NOSCRIPT unmapped (Scripts.run), which is not what these tests are about
    q.engine._scripts.load_all()
    return q


def waiting(q: Queue, group: str) -> int:
    """Jobs of ``group`` ready or delayed, counted from the jobs themselves."""
    n = 0
    for state in ("ready", "delayed"):
        key = q.engine._keys.ready if state == "ready" else q.engine._keys.delayed
        for tag in q.engine._client.zrange(key, 0, -1):
            info = q.info(tag.decode())
            assert info is not None
            n += (info.group or "") == group
    return n


def test_a_publish_past_the_group_limit_raises_and_writes_nothing(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = limited(make_queue, 2)
    q.publish("a1", group="a")
    q.publish("a2", group="a", delay=60)  # delayed jobs count, as for max_length
    q.publish("b1", group="b")
    before = snapshot(redis_client, prefix)
    with pytest.raises(QueueFull) as info:
        q.publish("a3", group="a")
    assert str(info.value) == (
        'group "a" has 2 jobs waiting and 1 more would pass group_max_length 2; nothing was '
        "written: retry later, or raise the queue option group_max_length"
    )
    assert isinstance(info.value, ZQueueError)
    with pytest.raises(QueueFull, match='group "a"'):
        q.publish("a3", group="a", tag="named", delay=5)
    with pytest.raises(QueueFull, match='group "a"'):
        q.publish_once(q.prepare("a3", "once", group="a"), debounce=5)
    assert snapshot(redis_client, prefix) == before
    q.publish("b2", group="b")  # another group has its own room
    q.publish("c1")  # jobs without a group are group "" and have their own room too
    q.publish("c2")
    with pytest.raises(QueueFull, match='group "" has 2 jobs'):
        q.publish("c3")
    for _ in range(5):  # claimed until a job of group a leaves the line: room for one
        msg = q.get()
        assert msg is not None
        if msg.body in ("a1", "a2"):
            break
    q.publish("a3", group="a")
    with pytest.raises(QueueFull):
        q.publish("a4", group="a")


def test_a_batch_of_several_groups_is_refused_as_a_whole(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = limited(make_queue, 3)
    q.publish("a", group="a")
    q.publish("a", group="a")
    before = snapshot(redis_client, prefix)
    batch = [q.prepare("b", group="b"), q.prepare("a", group="a"), q.prepare("a", group="a")]
    with pytest.raises(QueueFull, match='group "a" has 2 jobs waiting and 2 more'):
        q.publish_prepared(batch)  # b fits, a does not: none is written
    assert snapshot(redis_client, prefix) == before
    q.publish_prepared(batch[:2])
    assert (waiting(q, "a"), waiting(q, "b")) == (3, 1)


def test_a_long_batch_is_checked_for_every_group_before_its_first_call(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = limited(make_queue, 100)
    q.publish_many(range(60), group="x")
    before = snapshot(redis_client, prefix)
    jobs = [q.prepare(i, group="y") for i in range(100)]  # the first call: fits
    jobs += [q.prepare(i, group="x") for i in range(41)]  # the second: 60 + 41 > 100
    with pytest.raises(QueueFull, match='group "x" has 60 jobs waiting and 41 more') as info:
        q.publish_prepared(jobs)
    assert info.value.published == []
    assert snapshot(redis_client, prefix) == before
    assert len(q.publish_prepared(jobs[:-1])) == 140
    assert (waiting(q, "x"), waiting(q, "y")) == (100, 100)


def test_a_workflow_is_checked_for_every_group_before_any_job_is_written(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = limited(make_queue, 1)
    q.publish("filler", group="a")
    before = snapshot(redis_client, prefix)
    flow = [(q, FlowJob(q.prepare("b", group="b"))), (q, FlowJob(q.prepare("a", group="a")))]
    with pytest.raises(QueueFull, match='group "a"'):
        publish_flow(flow)
    assert snapshot(redis_client, prefix) == before
    # a chain's later steps wait for their parents: only its first enters the line now
    a, b, c = (q.prepare(i, group="c") for i in range(3))
    publish_flow(
        [
            (q, FlowJob(a, kids=(Kid(q.name, b.tag, 1),))),
            (q, FlowJob(b, parents=(Ref(q.name, a.tag),), kids=(Kid(q.name, c.tag, 1),))),
            (q, FlowJob(c, parents=(Ref(q.name, b.tag),))),
        ]
    )
    assert q.state(c.tag) == "waiting"
    with pytest.raises(QueueFull, match='group "c"'):
        q.publish("more", group="c")
    # the first step runs; its dependent is released into line: it is never refused,
    # and it counts
    msg = q.get()
    assert msg is not None
    while msg.tag != a.tag:
        q.ack(msg)
        msg = q.get()
        assert msg is not None
    q.ack(msg)
    q.engine.flow.drain()
    assert q.state(b.tag) == "ready"
    with pytest.raises(QueueFull, match='group "c" has 1 jobs waiting'):
        q.publish("more", group="c")


def test_jobs_coming_back_are_never_refused_and_still_count(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    """A retry, a release, a recovered lease and a requeued dead letter go back in line
    even in a full group (refusing them would lose a job), and count from then on."""
    q = limited(make_queue, 2, max_retries=5)
    q.publish("a1", group="a")
    q.publish("a2", group="a")
    first = q.get()
    assert first is not None
    q.publish("a3", group="a")  # the group is full again
    assert q.nack(first, "boom", retry_in=0) == "retry"
    assert waiting(q, "a") == 3  # past the limit, not lost
    with pytest.raises(QueueFull, match="has 3 jobs waiting"):
        q.publish("a4", group="a")
    second = q.get()
    assert second is not None
    assert q.nack(second, "boom", retry_in=60) == "retry"  # back in delayed: counted
    with pytest.raises(QueueFull, match="has 3 jobs waiting"):
        q.publish("a4", group="a")
    third = q.get()
    assert third is not None
    assert q.release(third)
    fourth = q.get()
    assert fourth is not None
    redis_client.zadd(q.engine._keys.leased, {fourth.tag: 0})  # its lease ran out
    assert q.scan().recovered == 1
    fifth = q.get()
    assert fifth is not None
    assert q.nack(fifth, "boom", dead=True) == "dead"
    with pytest.raises(QueueFull, match="has 2 jobs waiting"):
        q.publish("a4", group="a")  # 2 + 1 > 2 with one of three dead
    assert q.requeue_dead(fifth.tag)
    with pytest.raises(QueueFull, match="has 3 jobs waiting"):
        q.publish("a4", group="a")
    assert waiting(q, "a") == 3


def test_jobs_that_leave_the_line_make_room(make_queue: QueueFactory) -> None:
    q = limited(make_queue, 3)
    tags = [q.publish(i, group="a") for i in range(3)]
    with pytest.raises(QueueFull):
        q.publish("x", group="a")
    assert q.delete(tags[0])
    q.publish("x", group="a")  # a deleted job's room
    assert q.cancel(tags[1])
    q.publish("y", group="a")  # a cancelled one's
    msg = q.get()
    assert msg is not None
    q.ack(msg)
    q.publish("z", group="a")  # a claimed one's
    with pytest.raises(QueueFull):
        q.publish("w", group="a")
    assert waiting(q, "a") == 3


def test_expired_jobs_make_room(make_queue: QueueFactory) -> None:
    """A job not started before its expiry ends "expired" (by scan, or by the claim that
    meets it at the head) and no longer counts."""
    q = limited(make_queue, 2)
    by_scan = q.publish("late", group="a", expires=0.05)
    at_head = q.publish("late", group="a", expires=0.05)
    with pytest.raises(QueueFull):
        q.publish("x", group="a")
    time.sleep(0.08)  # past their expiry (Redis' clock runs with ours here)
    q.scan(1)  # ends at most one: the other waits
    assert sorted([q.state(by_scan), q.state(at_head)]) == ["expired", "ready"]
    q.publish("x", group="a")  # the expired one's room
    with pytest.raises(QueueFull, match="has 2 jobs waiting"):
        q.publish("y", group="a")
    assert q.claim(5, "c")[0][0].body == "x"  # the claim ends the other one at the head
    assert [q.state(by_scan), q.state(at_head)] == ["expired", "expired"]
    q.publish("y", group="a")
    q.publish("z", group="a")
    with pytest.raises(QueueFull, match="has 2 jobs waiting"):
        q.publish("w", group="a")


def test_a_tag_used_again_by_another_group_counts_for_that_group_only(
    make_queue: QueueFactory,
) -> None:
    q = limited(make_queue, 1)
    q.publish("old", tag="t", group="a")
    assert q.delete("t")
    q.publish("new", tag="t", group="b")  # the index keeps a's entry of "t" for now
    q.publish("a", group="a")  # a's stale entry does not count: room for one
    with pytest.raises(QueueFull, match='group "b" has 1 jobs'):
        q.publish("b", group="b")


def test_concurrent_publishers_never_pass_a_group_limit(make_queue: QueueFactory) -> None:
    q = limited(make_queue, 30)
    refused: list[str] = []
    barrier = threading.Barrier(4)

    def publisher(i: int) -> None:
        barrier.wait(5)
        for n in range(25):
            group = "a" if (i + n) % 2 else "b"
            try:
                q.publish(n, group=group)
            except QueueFull:
                refused.append(group)

    threads = [threading.Thread(target=publisher, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert (waiting(q, "a"), waiting(q, "b")) == (30, 30)
    assert sorted(refused) == ["a"] * 20 + ["b"] * 20


def test_jobs_published_without_the_limit_are_not_counted(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    """Jobs written before the option was set (by this version without it, or by an
    earlier version) have no index entry: they do not count, and once they are gone the
    limit is exact."""
    old = make_queue("q", fairness="groups")
    old_tags = [old.publish(i, group="a") for i in range(5)]
    assert not redis_client.exists(old.engine._keys.gjobs)  # without the limit: no index at all
    q = limited(make_queue, 2)
    q.publish("n1", group="a")
    q.publish("n2", group="a")
    assert waiting(q, "a") == 7
    with pytest.raises(QueueFull, match="has 2 jobs waiting"):
        q.publish("n3", group="a")
    for tag in old_tags:  # the old jobs run as any other
        assert q.delete(tag)
    with pytest.raises(QueueFull):
        q.publish("n3", group="a")
    msg = q.get()
    assert msg is not None
    q.ack(msg)
    q.publish("n3", group="a")


def test_a_tag_used_again_without_the_limit_is_not_counted_by_its_old_entry(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    """A job published under the limit leaves an index entry after it ends (swept
    later); its tag published again by a process without the limit is a job that does not
    count, old entry or not (found by the state machine: publish, claim, ack, publish
    again without the limit)."""
    q = limited(make_queue, 1)
    q.publish("first", tag="u0", group="a")
    msg = q.get()
    assert msg is not None and q.ack(msg)
    assert redis_client.zcard(q.engine._keys.gjobs) == 1  # the entry outlives the job
    plain = make_queue("q", fairness="groups")
    plain.publish("again", tag="u0", group="a")
    assert waiting(q, "a") == 1  # it waits, uncounted
    q.publish("counted", group="a")  # the one job the limit allows
    with pytest.raises(QueueFull, match='group "a" has 1 jobs waiting'):
        q.publish("over", group="a")


def test_a_queue_without_the_limit_writes_no_index(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue("q", fairness="groups", max_length=1000)
    q.publish("a", group="a")
    q.publish_many(range(150), group="b")
    q.publish("o", tag="once", group="a", debounce=5)
    publish_flow([(q, FlowJob(q.prepare("w", group="w")))])
    assert not redis_client.exists(q.engine._keys.gjobs)
    assert (
        redis_client.zcard(q.engine._keys.ready) + redis_client.zcard(q.engine._keys.delayed) == 153
    )


def test_a_debounced_job_replaced_in_place_is_not_refused(make_queue: QueueFactory) -> None:
    q = limited(make_queue, 1)
    assert q.publish_once(q.prepare("v1", "k", group="a"), debounce=5) == "new"
    assert q.publish_once(q.prepare("v2", "k", group="a"), debounce=5) == "replaced"
    with pytest.raises(QueueFull):
        q.publish_once(q.prepare("other", "k2", group="a"), debounce=5)


def test_entries_of_finished_jobs_are_dropped_when_a_group_is_counted(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = limited(make_queue, 3)
    for _ in range(3):
        assert q.delete(q.publish("x", group="a"))  # no claim: no sweep either
    assert redis_client.zcard(q.engine._keys.gjobs) == 3  # an upper bound: 0 wait
    q.publish("y", group="a")  # 3 + 1 > 3: the entries are read, the finished ones dropped
    assert redis_client.zcard(q.engine._keys.gjobs) == 1


@pytest.mark.parametrize(
    "options",
    [
        {"group_max_length": 5},  # a fifo queue
        {"group_max_length": 5, "fairness": "fifo"},
        {"group_max_length": 5, "fairness": "groups", "partitions": 2},
        {"group_max_length": 0, "fairness": "groups"},
        {"group_max_length": -1, "fairness": "groups"},
        {"group_max_length": 1.5, "fairness": "groups"},
        {"group_max_length": "10", "fairness": "groups"},
        {"group_max_length": True, "fairness": "groups"},
        {"group_max_length": 1001, "fairness": "groups"},
    ],
)
def test_a_bad_group_max_length_is_a_configuration_error(options: dict[str, Any]) -> None:
    _, problems = parse({"QUEUES": {"q": options}})
    assert [p.id for p in problems] == ["django_zqueue.E021"], problems
    assert "group_max_length" in problems[0].msg
    with pytest.raises(ConfigurationError, match="group_max_length"):
        conf.queue_options("q", **options)


def test_options_made_by_hand_are_refused_on_a_fifo_queue(redis_client: redis.Redis) -> None:
    with pytest.raises(ConfigurationError, match="group_max_length needs fairness='groups'"):
        Queue("q", conf.QueueOptions(group_max_length=3), client=redis_client)


def test_the_scripts_refuse_a_bad_limit_and_write_nothing(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = make_queue("q")  # fifo: a group limit makes no sense in its mode
    call = q.engine._shards[0].publish([q.prepare("x", group="a")])
    before = snapshot(redis_client, prefix)
    for mode, limit in (("strict", 3), ("fair", -1), ("fair", 1001), ("fair", "x")):
        policy = q.engine.policy
        fields = {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy) if f.init}
        fields |= {"mode": mode, "group_max_length": limit}
        args = (pack_map(fields), *call.args[1:])
        with pytest.raises(redis.ResponseError, match=r"ZQ_BAD_ARGUMENT.*group_max_length"):
            redis_client.eval(source("publish"), len(call.keys), *call.keys, *args)
    fq = limited(make_queue, 2, name="f")
    check = fq.engine._shards[0].group_check([("a", 1)])
    a1 = entry_arg(group="a", jobs=1)
    three = dataclasses.replace(fq.engine.policy, group_max_length=3).packed
    for args in (
        (dataclasses.replace(fq.engine.policy, group_max_length=0).packed, a1),
        (dataclasses.replace(fq.engine.policy, group_max_length=1001).packed, a1),
        (b"x", a1),  # a policy that is not one
        (three, entry_arg(group="a", jobs=0)),
        (three,),
        (three, "a", 1),  # not entries: the former positional pairs
        (three, entry_arg(jobs=1)),
        (three, entry_arg(group=7, jobs=1)),
        (three, a1, a1),
        (three, entry_arg(group="a\0b", jobs=1)),
    ):
        with pytest.raises(
            redis.ResponseError, match=r"ZQ_BAD_ARGUMENT: (group_check|the queue pol)"
        ):
            redis_client.eval(source("group_check"), len(check.keys), *check.keys, *args)
    assert snapshot(redis_client, prefix) == before


def test_group_check_reads_and_writes_nothing(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = limited(make_queue, 2)
    q.publish("a", group="a")
    msg = q.get()
    assert msg is not None
    q.ack(msg)  # a finished job's entry: the check reads it and leaves it
    q.publish("a", group="a")
    before = snapshot(redis_client, prefix)
    shard = q.engine._shards[0]
    assert q.engine.run(shard.group_check([("a", 1), ("b", 2)])) == 0
    with pytest.raises(QueueFull, match='group "b" has 0 jobs waiting and 3 more'):
        q.engine.run(shard.group_check([("a", 1), ("b", 3)]))
    with pytest.raises(QueueFull, match='group "a" has 1 jobs waiting and 2 more'):
        q.engine.run(shard.group_check([("a", 2)]))
    assert snapshot(redis_client, prefix) == before


def test_an_index_of_the_wrong_type_stops_a_publish_before_it_writes(
    make_queue: QueueFactory, prefix: str, redis_client: redis.Redis
) -> None:
    q = limited(make_queue, 2)
    q.publish("a", group="a")
    redis_client.delete(q.engine._keys.gjobs)
    redis_client.set(q.engine._keys.gjobs, "oops")
    before = snapshot(redis_client, prefix)
    for publish in (
        lambda: q.publish("b", group="a"),
        lambda: q.publish_many(["c", "d"], group="b"),
        lambda: q.publish("e", tag="e", group="a", debounce=5),
        lambda: publish_flow([(q, FlowJob(q.prepare("f", group="f")))]),
    ):
        with pytest.raises(ZQueueError, match="gjobs"):
            publish()
        assert snapshot(redis_client, prefix) == before


def test_claims_sweep_the_entries_of_an_idle_groups_finished_jobs(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = limited(make_queue, 50)
    for _ in range(30):
        q.publish("x", group="idle")
    kept = [q.publish("w", group="busy", delay=60)]
    q.publish("l", group="lease")
    msgs = []
    for _ in range(31):
        msg = q.get()
        assert msg is not None
        msgs.append(msg)
    leased = [m for m in msgs if m.body == "l"]
    assert len(leased) == 1
    q.ack_many([m for m in msgs if m.body == "x"])
    assert redis_client.zcard(q.engine._keys.gjobs) == 32  # nothing counted them since
    # a claim that leases nothing sweeps 200 entries from the cursor the busy claims
    # moved (10 each): to the end, then (past the end) the cursor starts again
    for _ in range(3):
        q.claim(5, "c")
    left = {m.decode().split("\0", 1)[1] for m in redis_client.zrange(q.engine._keys.gjobs, 0, -1)}
    assert left == {*kept, leased[0].tag}  # a delayed job's and a leased job's entries stay
    assert q.state(leased[0].tag) == "leased"


def test_a_queue_without_the_limit_sweeps_nothing(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    """Entries left by an earlier setting with the limit stay: a claim of a queue without
    it never reads the index."""
    limited(make_queue, 5).publish("x", group="a")
    plain = make_queue("q", fairness="groups")
    msg = plain.get()
    assert msg is not None
    plain.ack(msg)
    plain.claim(5, "c")
    assert redis_client.zcard(plain.engine._keys.gjobs) == 1
    assert redis_client.hget(plain.engine._keys.ctr, "jsweep") is None
