"""Tenant fairness (``fairness="groups"``): weighted fair order across group keys in one
ZSET, with the exact rank kept (docs/fairness.md). Real Redis; also run on a Cluster by
.ci/run."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest
import redis
from django.core import checks
from django.test import override_settings

from django_zqueue import conf, read, task
from django_zqueue.engine.keys import partition_of
from django_zqueue.engine.records import NewJob
from django_zqueue.engine.records.spec import pack_map
from django_zqueue.engine.scripts import ScriptError, source
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue

from .conftest import QueueFactory, snapshot
from .records_util import fields_of, to_json_layout, update_fields


def fair(make_queue: QueueFactory, name: str = "q", **options: Any) -> Queue:
    return make_queue(name, fairness="groups", **options)


def drain(q: Queue) -> list[Any]:
    """Claim one job at a time until none is left; ack each; the bodies in claim order."""
    order = []
    while True:
        msgs, _ = q.claim(1)
        if not msgs:
            return order
        order.append(msgs[0].body)
        assert q.ack(msgs[0])


def groups_of(order: list[Any]) -> list[str]:
    return [str(b).split(":")[0] for b in order]


# ---------------------------------------------------------------- weighted fair order


def test_weight_two_gets_twice_the_starts_while_both_have_work(make_queue: QueueFactory) -> None:
    q = fair(make_queue, group_weights={"b": 2})
    q.publish_many([f"a:{i}" for i in range(60)], group="a")  # a floods first
    q.publish_many([f"b:{i}" for i in range(60)], group="b")
    first = groups_of(drain(q)[:90])
    # while both have work (the first 90 starts), b gets 2 of every 3
    counts = Counter(first)
    assert abs(counts["b"] - 60) <= 1 and abs(counts["a"] - 30) <= 1
    for n in range(3, 90, 3):  # and at every prefix, not only in total
        c = Counter(first[:n])
        assert abs(c["b"] - 2 * c["a"]) <= 2, (n, c)


def test_flood_does_not_hold_a_later_group_behind_it(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    q.publish_many([f"big:{i}" for i in range(300)], group="big")
    msgs, _ = q.claim(10)  # the flood is being served
    for m in msgs:
        q.ack(m)
    small = q.publish_many([f"small:{i}" for i in range(5)], group="small")
    # the small group's jobs are interleaved at the head, not behind 290 jobs: the
    # i-th has i small and i - 1 or i big jobs ahead (an equal score goes by tag bytes)
    ranks = [q.rank(t) for t in small]
    assert ranks[0] == 0
    assert all(2 * i - 1 <= (r or 0) <= 2 * i for i, r in enumerate(ranks)), ranks
    order = groups_of(drain(q)[:10])
    assert order.count("small") == 5


def test_an_idle_group_coming_back_gets_no_burst_of_credit(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    q.publish_many([f"a:{i}" for i in range(20)], group="a")
    q.publish_many([f"b:{i}" for i in range(2)], group="b")
    drain_n(q, 40)  # b finishes early and sits idle while a runs on alone
    assert q.total_count() == 0
    q.publish_many([f"a:{i}" for i in range(100, 130)], group="a")
    for _ in range(10):
        drain_n(q, 1)  # a alone moves the virtual time on
    q.publish_many([f"b:{i}" for i in range(100, 120)], group="b")
    nxt = groups_of(drain(q)[:20])
    # b does not get the 10+ starts it "missed": it shares from now on (1:1)
    assert abs(nxt.count("b") - 10) <= 1, nxt


def drain_n(q: Queue, n: int) -> None:
    msgs, _ = q.claim(n)
    for m in msgs:
        q.ack(m)


def test_rank_is_the_number_of_jobs_claimed_before(make_queue: QueueFactory) -> None:
    rnd = random.Random(7)
    q = fair(make_queue, group_weights={"g1": 3, "g2": 0.5})
    tags = []
    for i in range(200):
        group = f"g{rnd.randrange(6)}"
        tags.append(q.publish(f"{group}:{i}", group=group, priority=rnd.choice([0, 0, 0, 2, -1])))
        if i % 37 == 36:
            drain_n(q, 5)  # virtual time moves on between publishes
    live = [t for t in tags if q.rank(t) is not None]
    ranks = {t: q.rank(t) for t in live}
    assert sorted(ranks.values()) == list(range(len(live)))
    claimed = []
    while True:
        msgs, _ = q.claim(7)
        if not msgs:
            break
        claimed.extend(m.tag for m in msgs)
        for m in msgs:
            q.ack(m)
    assert [claimed.index(t) for t in live] == [ranks[t] for t in live]


def test_priority_is_a_head_start_within_the_group(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    q.publish_many([f"a:{i}" for i in range(10)], group="a")
    q.publish_many([f"b:{i}" for i in range(10)], group="b")
    urgent = q.publish("a:urgent", group="a", priority=8)
    # 8 of a's turns earlier: ahead of a's jobs from slot 2 on, and of b's there too
    assert q.score(urgent) == 10 - 8
    order = drain(q)
    assert order.index("a:urgent") < order.index("a:3")
    assert order.index("a:urgent") > order.index("a:0")
    low = q.publish("b:low", group="b", priority=-3)  # its turn is at virtual time 9
    q.publish_many([f"b:{i}" for i in range(20, 25)], group="b")  # 10, 11, 12, ...
    assert q.score(low) == 9 + 3  # three of its group's turns later
    assert drain(q).index("b:low") in (2, 3)  # level with b:22, then by tag bytes


def test_a_raw_score_is_used_as_it_is(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    q.publish_many([f"a:{i}" for i in range(5)], group="a")
    t = q.publish("raw", group="a", score=2.5)
    assert q.score(t) == 2.5
    assert drain(q) == ["a:0", "a:1", "a:2", "raw", "a:3", "a:4"]


def test_retried_and_delayed_jobs_get_their_groups_turn(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    q.publish_many([f"a:{i}" for i in range(4)], group="a")
    msgs, _ = q.claim(1)
    assert q.nack(msgs[0], "boom", retry_in=0) == "retry"
    # back of its group (after a:3), not of the queue
    assert drain(q) == ["a:1", "a:2", "a:3", "a:0"]
    q.publish_many([f"a:{i}" for i in range(10, 13)], group="a")
    later = q.publish("b:later", group="b", delay=0.05)
    import time

    time.sleep(0.1)
    order = drain(q)
    assert order.index("b:later") <= 1  # promoted at the current virtual time
    assert q.info(later).state == "succeeded"  # type: ignore[union-attr]


def test_jobs_without_a_group_share_one_group(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    q.publish_many([f"none:{i}" for i in range(5)])
    q.publish_many([f"x:{i}" for i in range(5)], group="x")
    order = groups_of(drain(q))
    for n in range(2, 11, 2):  # one of each in every pair of turns
        assert Counter(order[:n]) == {"none": n // 2, "x": n // 2}, order


def test_fifo_queue_keeps_its_order_and_the_group(make_queue: QueueFactory) -> None:
    q = make_queue("plain")
    q.publish_many([f"a:{i}" for i in range(3)], group="a")
    t = q.publish("b:0", group="b")
    assert q.rank(t) == 3
    assert q.info(t).group == "b"  # type: ignore[union-attr]
    assert drain(q) == ["a:0", "a:1", "a:2", "b:0"]
    assert (
        q.engine._client.hlen(q.engine._keys.ctr) == 2
    )  # seq and tok: no group state in a fifo queue


# ---------------------------------------------------------------- state and memory


def test_a_big_claim_is_sent_in_calls_of_at_most_the_fair_chunk(
    make_queue: QueueFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fair claim does more per job than a fifo one: each script call leases at most
    FAIR_CLAIM_CHUNK jobs (so that a call stays short with many groups), the claim as a
    whole still gets what it asked for, in fair order."""
    from django_zqueue.engine import Shard
    from django_zqueue.queue import CLAIM_CHUNK, FAIR_CLAIM_CHUNK

    q = fair(make_queue, group_concurrency=1000)
    assert q.engine.claim_chunk == FAIR_CLAIM_CHUNK < CLAIM_CHUNK
    assert make_queue("plain").engine.claim_chunk == CLAIM_CHUNK
    for g in range(5):
        q.publish_many([f"g{g}:{i}" for i in range(30)], group=f"g{g}")
    sizes: list[int] = []
    real = Shard.claim

    def spy(self: Shard, batch: int, consumer: str = "") -> Any:
        sizes.append(batch)
        return real(self, batch, consumer)

    monkeypatch.setattr(Shard, "claim", spy)
    msgs, _ = q.claim(100)
    assert len(msgs) == 100 and sizes == [40, 40, 20]
    # the first 100 of 150 in fair order: 20 of each group
    assert Counter(groups_of([m.body for m in msgs])) == {f"g{g}": 20 for g in range(5)}
    sizes.clear()
    plan = q.engine.consume.plan_claim(100, "c")  # a worker's pipelined first call: one chunk
    assert sizes == [40] and plan.batch == 100
    assert len(q.engine.consume.claim_rest(plan, q.engine.run(plan.call))[0]) == 40


def test_drained_groups_leave_no_state(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    for g in range(50):
        q.publish_many([f"{g}:{i}" for i in range(3)], group=f"t{g}")
    fields = {f.decode() for f in q.engine._client.hkeys(q.engine._keys.ctr)}
    assert sum(f.startswith("g:") for f in fields) == 50
    drain(q)
    fields = {f.decode() for f in q.engine._client.hkeys(q.engine._keys.ctr)}
    assert not [f for f in fields if f.startswith("g:")], fields


def test_groups_whose_jobs_were_deleted_are_swept(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    tags = [q.publish(f"{g}", group=f"t{g}") for g in range(30)]
    q.publish_many(["x:0", "x:1"], group="x")
    for t in tags:
        assert q.cancel(t)
    before = {f.decode() for f in q.engine._client.hkeys(q.engine._keys.ctr)}
    assert len([f for f in before if f.startswith("g:")]) == 31
    drain_n(q, 2)  # moves the virtual time up to the cancelled groups' finish (1)
    drain_n(q, 1)  # a claim that finds nothing sweeps up to 200 fields
    fields = {f.decode() for f in q.engine._client.hkeys(q.engine._keys.ctr)}
    assert not [f for f in fields if f.startswith("g:")], fields


def test_starts_are_counted_per_group_and_minute(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    q.publish_many(["a"] * 3, group="a")
    q.publish_many(["b"] * 2, group="b")
    drain_n(q, 4)
    raw = q.engine._client.hgetall(q.engine._keys.gstarts)
    assert sum(int(v) for v in raw.values()) == 4
    # a minute later the counts move to the previous minute
    minute = int(q.engine._client.hget(q.engine._keys.ctr, "gmin"))
    q.engine._client.hset(q.engine._keys.ctr, "gmin", minute - 1)
    drain_n(q, 1)
    assert sum(int(v) for v in q.engine._client.hgetall(q.engine._keys.gstarts_prev).values()) == 4
    assert sum(int(v) for v in q.engine._client.hgetall(q.engine._keys.gstarts).values()) == 1
    # and two minutes later both are dropped
    q.publish("c", group="c")
    q.engine._client.hset(q.engine._keys.ctr, "gmin", minute - 5)
    drain_n(q, 1)
    assert not q.engine._client.exists(q.engine._keys.gstarts_prev)
    assert q.engine._client.hgetall(q.engine._keys.gstarts) == {b"c": b"1"}


def test_group_figures_biggest_first_and_bounded(make_queue: QueueFactory) -> None:
    q = fair(make_queue)
    q.publish_many(["x"] * 7, group="big")
    q.publish_many(["x"] * 3, group="mid")
    q.publish_many(["x"] * 1)
    msgs, _ = q.claim(2)
    fig = q.read.groups(top=2)
    assert fig.exact and fig.groups_seen == 3
    assert [r.group for r in fig.rows] == ["big", "mid"]
    by = {r.group: r for r in q.read.groups(top=3).rows}
    assert by["big"].ready + by["big"].inflight == 7
    assert by[""].ready + by[""].inflight == 1
    assert sum(r.inflight for r in by.values()) == 2
    assert sum(r.started for r in by.values()) == 2
    small = q.read.groups(top=5, sample=3)
    assert not small.exact
    assert sum(r.ready for r in small.rows) == 3
    with pytest.raises(InvalidArgument):
        q.read.groups(top=0)
    assert read.group_figures(q.engine).groups_seen == 3
    for m in msgs:
        q.ack(m)


def test_group_figures_count_every_waiting_job_of_each_group_set_aside_too(
    make_queue: QueueFactory,
) -> None:
    """Jobs in several states: in line, set aside by the group's limit (in delayed, not in
    line), in flight, delayed by their own delay, dead: the waiting count of a group is
    its jobs in line and set aside, exactly; delayed and dead jobs are not waiting."""
    q = fair(make_queue, group_concurrency=1)
    q.publish_many([f"a:{i}" for i in range(5)], group="a")
    q.publish_many([f"b:{i}" for i in range(3)], group="b")
    q.publish("c:later", group="c", delay=3600)
    held = claim_all(q, 10)  # one of a and one of b leased; the others of a, b set aside
    assert sorted(m.body for m in held) == ["a:0", "b:0"]
    q.publish_many([f"c:{i}" for i in range(2)], group="c")
    q.publish("d:dead", group="d")
    more = claim_all(q, 10)  # c:0 leased, c:1 set aside, d:dead leased
    assert sorted(m.body for m in more) == ["c:0", "d:dead"]
    q.nack(next(m for m in more if m.body == "d:dead"), "boom", dead=True)
    q.publish("c:2", group="c")  # in line: no claim since
    fig = q.read.groups(top=10)
    assert fig.exact
    by = {r.group: (r.waiting, r.ready, r.set_aside, r.inflight) for r in fig.rows}
    assert by == {"a": (4, 0, 4, 1), "b": (2, 0, 2, 1), "c": (2, 1, 1, 1)}  # d: dead
    assert [r.group for r in fig.rows] == ["a", "b", "c"]  # the most waiting first
    assert q.counts() == {"ready": 1, "delayed": 8, "inflight": 3, "dead": 1}
    small = q.read.groups(top=10, sample=2)  # the first 2 of the 7 set aside
    assert not small.exact and sum(r.set_aside for r in small.rows) == 2
    for m in [*held, *(m for m in more if m.body == "c:0")]:
        q.ack(m)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("group", ["", "x" * 201, 5])
def test_bad_group_raises_and_writes_nothing(
    make_queue: QueueFactory, prefix: str, group: Any
) -> None:
    q = fair(make_queue)
    before = snapshot(q.engine._client, prefix)
    with pytest.raises(InvalidArgument):
        q.publish("x", group=group)
    assert snapshot(q.engine._client, prefix) == before


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("group", "x" * 201),
        ("group", ""),
        ("group", "a\0b"),
        ("group", 5),
        ("weight", 0),
        ("weight", 1001),
        ("weight", float("nan")),
        ("weight", "w"),
    ],
)
def test_publish_script_refuses_a_bad_group_or_weight(
    make_queue: QueueFactory, prefix: str, field: str, value: Any
) -> None:
    q = fair(make_queue)
    spec = {"id": "t1", "body": b"1", "max_retries": 0, "group": "a", field: value}
    keys = q.engine._shards[0].publish([NewJob("t1", b"1")]).keys
    before = snapshot(q.engine._client, prefix)
    with pytest.raises(redis.ResponseError, match=f"ZQ_BAD_ARGUMENT.*{field}"):
        q.engine._client.eval(
            source("publish"), len(keys), *keys, q.engine.policy.packed, pack_map(spec)
        )
    assert snapshot(q.engine._client, prefix) == before


@pytest.mark.parametrize("field", [{"g": 5}, {"g": "x" * 201}, {"w": 0}, {"w": "2"}])
def test_a_corrupt_group_or_weight_buries_only_that_job(
    make_queue: QueueFactory, field: dict[str, Any]
) -> None:
    q = fair(make_queue)
    bad = q.publish("bad", group="a")
    good = q.publish("good", group="b")
    update_fields(q.engine._client, q.engine._keys, bad, **field)
    msgs, _ = q.claim(2)
    assert [m.tag for m in msgs] == [good]
    assert q.state(bad) == "dead"


def test_a_spent_virtual_time_raises_and_writes_nothing(
    make_queue: QueueFactory, prefix: str
) -> None:
    q = fair(make_queue)
    q.engine._client.hset(q.engine._keys.ctr, "vt", str(2**50 - 1))
    before = snapshot(q.engine._client, prefix)
    with pytest.raises(ScriptError, match="ZQ_SEQUENCE_EXHAUSTED"):
        q.publish("x", group="a")
    assert snapshot(q.engine._client, prefix) == before


def test_old_records_without_group_are_served(make_queue: QueueFactory) -> None:
    """Jobs written before groups existed (no g, no w) in a queue that turns fair."""
    old = make_queue("up")
    tags = old.publish_many(["old0", "old1"])
    new = fair(make_queue, "up")
    new.publish_many(["new0"], group="a")
    assert sorted(drain(new)) == ["new0", "old0", "old1"]
    assert all(new.info(t).state == "succeeded" for t in tags)  # type: ignore[union-attr]


# ---------------------------------------------------------------- settings and tasks


@pytest.mark.parametrize(
    "options",
    [
        {"fairness": "round-robin"},
        {"fairness": "groups", "group_weights": {"a": 0}},
        {"fairness": "groups", "group_weights": {"a": True}},
        {"fairness": "groups", "group_weights": {"": 1}},
        {"fairness": "groups", "group_weights": ["a"]},
        {"group_weights": {"a": 2}},
        {"fairness": "groups", "priority_mode": "aging"},
    ],
)
def test_bad_fairness_settings_are_reported(options: dict[str, Any]) -> None:
    with override_settings(ZQUEUE={"QUEUES": {"q": options}}):
        conf.reset()
        problems = conf.problems()
    conf.reset()
    assert [p.id for p in problems] == ["django_zqueue.E021"], problems
    assert problems[0].hint


def test_good_fairness_settings_pass_the_checks() -> None:
    value = {"QUEUES": {"q": {"fairness": "groups", "group_weights": {"a": 2, "b": 0.5}}}}
    with override_settings(ZQUEUE=value):
        conf.reset()
        assert not [e for e in checks.run_checks() if e.id.startswith("django_zqueue.E021")]
        o = conf.get_config().queues["q"]
    conf.reset()
    assert o.fairness == "groups" and o.group_weights == {"a": 2.0, "b": 0.5}


@task(queue="default", group=lambda tenant, n: f"tenant-{tenant}")
def export(tenant: int, n: int) -> None: ...


def test_task_group_from_the_call_and_from_using(zqueue_settings: dict[str, Any]) -> None:
    job = export.enqueue(7, 1)
    q = export.queue
    assert q.info(job.id).group == "tenant-7"  # type: ignore[union-attr]
    job2 = export.using(group="vip").enqueue(7, 2)
    assert q.info(job2.id).group == "vip"  # type: ignore[union-attr]
    job3 = export.using(group=lambda tenant, n: f"n{n}").enqueue(1, 3)
    assert q.info(job3.id).group == "n3"  # type: ignore[union-attr]
    with pytest.raises(InvalidArgument):
        export.using(group="")
    with pytest.raises(InvalidArgument):
        export.using(group=lambda tenant, n: 5).enqueue(1, 4)  # type: ignore[arg-type,return-value]


def test_weights_come_from_the_settings(make_queue: QueueFactory) -> None:
    q = fair(make_queue, group_weights={"heavy": 4})
    t = q.publish("x", group="heavy")
    meta = fields_of(q.engine._client, q.engine._keys, t)
    assert meta["g"] == "heavy" and meta["w"] == 4
    t2 = q.publish("y", group="light")
    assert "w" not in fields_of(q.engine._client, q.engine._keys, t2)


# ---------------------------------------------------------------- partitions


def test_partitioned_fair_queue_rank_and_order(make_queue: QueueFactory) -> None:
    q = fair(make_queue, "parts", partitions=3)
    tags: dict[int, list[str]] = {0: [], 1: [], 2: []}
    i = 0
    while min(len(t) for t in tags.values()) < 12:  # 12 tags in each partition
        tags[partition_of(f"t{i}", 3)].append(f"t{i}")
        i += 1
    for p in range(3):  # each partition: 10 jobs of a, then 2 of b
        q.publish_many([f"a:{p}:{j}" for j in range(10)], group="a", tags=tags[p][:10])
        q.publish_many([f"b:{p}:{j}" for j in range(2)], group="b", tags=tags[p][10:12])
    page = q.read.page("ready", 0, 100)
    assert len(page) == 36
    assert [q.rank(tag) for tag, _, _ in page] == list(range(36))
    order = groups_of(drain(q))
    # claims go round-robin over the partitions, and each keeps the fair order of its
    # share: b's two jobs in each are among its first four turns
    assert Counter(order[:12]) == {"a": 6, "b": 6}, order


# ---------------------------------------------------------------- per-group limits


def claim_all(q: Queue, batch: int = 100) -> list[Any]:
    msgs, _ = q.claim(batch)
    return msgs


def test_a_group_at_its_concurrency_waits_without_blocking_others(
    make_queue: QueueFactory,
) -> None:
    q = fair(make_queue, group_concurrency=2)
    a = q.publish_many([f"a:{i}" for i in range(10)], group="a")
    q.publish_many([f"b:{i}" for i in range(3)], group="b")
    msgs = claim_all(q, 10)
    assert sorted(m.body for m in msgs) == ["a:0", "a:1", "b:0", "b:1"]
    # the rest of a and b were set aside: waiting (delayed), no rank, still there
    assert q.state(a[5]) == "delayed" and q.rank(a[5]) is None and q.exists(a[5])
    c = q.publish_many([f"c:{i}" for i in range(3)], group="c")
    got = claim_all(q, 10)
    assert sorted(m.body for m in got) == ["c:0", "c:1"]  # c is not held behind a and b
    assert q.state(c[2]) == "delayed"
    # a slot of a frees: a's next job in its own order comes back and is claimed (a
    # waiting group is looked at every 50 ms: moved on by hand, no sleeping)
    assert q.ack(next(m for m in msgs if m.body == "a:0"))
    q.engine._client.zadd(q.engine._keys.gwait, {"a": 0})
    assert [m.body for m in claim_all(q, 10)] == ["a:2"]
    assert [m.body for m in claim_all(q, 10)] == []  # a is at 2 again, b and c at 2


def test_the_claim_sets_aside_at_most_100_jobs_per_call(make_queue: QueueFactory) -> None:
    q = fair(make_queue, group_concurrency=1)
    q.publish_many([f"a:{i}" for i in range(450)], group="a")
    assert [m.body for m in claim_all(q, 1)] == ["a:0"]
    q.publish("b:0", group="b", score=10**6)  # behind all of a
    calls, got = 0, []
    while not got:
        before = q.engine._client.zcard(q.engine._keys.gpark)
        got = claim_all(q, 1)
        calls += 1
        assert q.engine._client.zcard(q.engine._keys.gpark) - before <= 100
    assert [m.body for m in got] == ["b:0"] and calls == 5
    assert q.engine._client.zcard(q.engine._keys.gpark) == 449
    assert q.counts()["ready"] == 0 and q.counts()["delayed"] == 449


def test_group_qps_spaces_the_starts_of_one_group(make_queue: QueueFactory) -> None:
    q = fair(make_queue, group_qps=2)
    q.publish_many([f"a:{i}" for i in range(6)], group="a")
    q.publish_many([f"b:{i}" for i in range(1)], group="b")
    first, hint = q.claim(10)
    assert sorted(m.body for m in first) == ["a:0", "a:1", "b:0"]  # a bucket of 2
    nothing, hint = q.claim(10)
    assert nothing == [] and hint is not None and 0 < hint <= 0.5
    # half a second later (the bucket's clock moved back by hand: no sleeping)
    tat = float(q.engine._client.hget(q.engine._keys.grate, "a"))
    q.engine._client.hset(q.engine._keys.grate, "a", str(tat - 500))
    q.engine._client.zadd(q.engine._keys.gwait, {"a": 0})
    assert [m.body for m in claim_all(q)] == ["a:2"]


def test_finished_and_expired_jobs_free_their_slot(make_queue: QueueFactory) -> None:
    q = fair(make_queue, group_concurrency=1, visibility_timeout=1)
    q.publish_many(["a:0", "a:1", "a:2"], group="a")
    first = claim_all(q)
    assert [m.body for m in first] == ["a:0"]
    assert q.nack(first[0], "boom", retry_in=0) == "retry"  # a retry frees the slot
    q.engine._client.zadd(q.engine._keys.gwait, {"a": 0})
    second = claim_all(q)
    assert [m.body for m in second] == ["a:1"]
    # the worker dies: its lease expires and the scanner recovers it
    q.engine._client.zadd(q.engine._keys.leased, {second[0].tag: 1})
    assert q.scan().recovered == 1
    q.engine._client.zadd(q.engine._keys.gwait, {"a": 0})
    # recovered, it goes to the back of its group (as in a fifo queue): a:2 first
    assert [m.body for m in claim_all(q)] == ["a:2"]


def test_set_priority_moves_a_job_set_aside_to_its_new_place(make_queue: QueueFactory) -> None:
    """A job set aside by its group's limit comes back at the score set_priority gives it,
    as a ready job would move (it came back at its old score: a documented limit before).
    A job set aside earlier keeps its place; one whose record says nothing (set aside by
    an older release) keeps its old score, as before."""
    q = fair(make_queue, group_concurrency=1)
    tags = q.publish_many(["a:0", "a:1", "a:2", "a:3"], group="a")
    held = claim_all(q)
    assert [m.body for m in held] == ["a:0"] and q.state(tags[3]) == "delayed"
    assert q.set_priority(tags[3], 3)  # three turns forward: ahead of a:1 and a:2
    assert q.info(tags[3]).priority == 3 and q.state(tags[3]) == "delayed"  # type: ignore[union-attr]
    assert q.set_priority(tags[2], 0)  # unchanged: stays behind a:1
    order = []
    for _ in range(3):
        q.ack(held[0])
        q.engine._client.zadd(q.engine._keys.gwait, {"a": 0})  # the group's next look, now
        held = claim_all(q)
        order += [m.body for m in held]
    assert order == ["a:3", "a:1", "a:2"]


def test_a_job_set_aside_by_an_older_release_keeps_its_score(make_queue: QueueFactory) -> None:
    """The layout before `ps`: a record set aside without it. set_priority records the
    priority (True), leaves the set-aside entry alone, and the job comes back at the score
    it was set aside with, as that release did; nothing is refused as corrupt."""

    q = fair(make_queue, group_concurrency=1)
    tags = q.publish_many(["a:0", "a:1", "a:2"], group="a")
    held = claim_all(q)
    for tag in tags[1:]:  # as an older release wrote them (the JSON layout)
        to_json_layout(q.engine._client, q.engine._keys, tag)
        record = json.loads(q.engine._client.hget(q.engine._keys.meta, tag))  # type: ignore[arg-type]
        assert "ps" in record
        del record["ps"]
        q.engine._client.hset(q.engine._keys.meta, tag, json.dumps(record))
    parked = set(q.engine._client.zrange(q.engine._keys.gpark, 0, -1))
    assert q.set_priority(tags[2], 5)
    assert set(q.engine._client.zrange(q.engine._keys.gpark, 0, -1)) == parked
    order = []
    for _ in range(2):
        q.ack(held[0])
        q.engine._client.zadd(q.engine._keys.gwait, {"a": 0})
        held = claim_all(q)
        order += [m.body for m in held]
    assert order == ["a:1", "a:2"] and q.counts()["dead"] == 0


def test_a_deleted_job_set_aside_does_not_come_back(make_queue: QueueFactory) -> None:
    q = fair(make_queue, group_concurrency=1)
    tags = q.publish_many(["a:0", "a:1", "a:2"], group="a")
    held = claim_all(q)
    assert q.cancel(tags[1])
    q.ack(held[0])
    q.engine._client.zadd(q.engine._keys.gwait, {"a": 0})
    assert [m.body for m in claim_all(q)] == ["a:2"]
    assert q.info(tags[1]).state == "cancelled"  # type: ignore[union-attr]


def test_limits_removed_from_the_settings_release_the_jobs_set_aside(
    make_queue: QueueFactory,
) -> None:
    limited = fair(make_queue, "lim", group_concurrency=1)
    limited.publish_many(["a:0", "a:1", "a:2"], group="a")
    claim_all(limited)
    assert limited.engine._client.zcard(limited.engine._keys.gpark) == 2
    free = fair(make_queue, "lim")
    free.engine._client.zadd(free.engine._keys.gwait, {"a": 0})
    assert sorted(m.body for m in claim_all(free)) == ["a:1", "a:2"]


def test_idle_groups_leave_no_limit_state(make_queue: QueueFactory) -> None:
    q = fair(make_queue, group_concurrency=3, group_qps=1000)
    for g in range(40):
        q.publish(f"{g}", group=f"t{g}")
    for m in claim_all(q):
        q.ack(m)
    assert q.engine._client.zcard(q.engine._keys.ginflight) == 40  # stale entries, pruned lazily
    for _ in range(3):  # each claim checks a few entries of each kind
        claim_all(q)
    assert q.engine._client.zcard(q.engine._keys.ginflight) == 0
    assert q.engine._client.hlen(q.engine._keys.grate) == 0
    assert not [f for f in q.engine._client.hkeys(q.engine._keys.ctr) if f.startswith(b"g:")]


@pytest.mark.parametrize(
    "options",
    [
        {"group_concurrency": 2},
        {"fairness": "groups", "group_concurrency": 0},
        {"fairness": "groups", "group_concurrency": 1001},
        {"fairness": "groups", "group_concurrency": 1.5},
        {"fairness": "groups", "group_qps": -1},
        {"fairness": "groups", "group_qps": True},
        {"fairness": "groups", "group_qps": 5, "partitions": 2},
    ],
)
def test_bad_group_limits_are_reported(options: dict[str, Any]) -> None:
    with override_settings(ZQUEUE={"QUEUES": {"q": options}}):
        conf.reset()
        problems = conf.problems()
    conf.reset()
    assert [p.id for p in problems] == ["django_zqueue.E021"], problems


# ---------------------------------------------------------------- metrics


def test_metrics_give_the_top_groups_by_rank_never_by_name(make_queue: QueueFactory) -> None:
    from django_zqueue.metrics import exposition

    q = fair(make_queue, "m")
    plain = make_queue("p")
    q.publish_many(["x"] * 4, group="secret-tenant-a")
    q.publish_many(["x"] * 2, group="secret-tenant-b")
    plain.publish("x", group="c")
    text = exposition([q, plain]).decode()
    assert "secret-tenant" not in text
    assert f'zqueue_group_top_ready{{queue="{q.name}",rank="1"}} 4.0' in text
    assert f'zqueue_group_top_ready{{queue="{q.name}",rank="2"}} 2.0' in text
    assert f'zqueue_groups_seen{{queue="{q.name}"}} 2.0' in text
    assert f'queue="{plain.name}",rank=' not in text  # fifo queues: no group figures
