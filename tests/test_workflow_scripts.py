"""The workflow scripts one by one (wf_publish, wf_link, wf_resolve, wf_clear) and the
hooks in ack, nack, scan and delete: raw replies as Redis sends them, bad arguments
refused before any write, replays harmless, corrupt records left alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from django_zqueue.engine.records import NewJob
from django_zqueue.engine.records.links import FlowJob, Kid, Ref, Resolution
from django_zqueue.engine.records.spec import JobSpec
from django_zqueue.engine.scripts import entry_arg
from django_zqueue.exceptions import ScriptArgumentError
from django_zqueue.queue import Queue

from .conftest import snapshot
from .records_util import fields_of
from .test_scripts import raw


def job(tag: str) -> NewJob:
    return NewJob(tag, b'"x"')


def test_wf_publish_writes_waiting_jobs_and_links(q: Queue, redis_client: redis.Redis) -> None:
    parent = FlowJob(job("a"), kids=(Kid(q.name, "b", 1),))
    child = FlowJob(job("b"), parents=(Ref(q.name, "a"),))
    assert raw(q, q.engine._shards[0].wf_publish([child, parent])) == [0]
    assert q.state("a") == "ready" and q.state("b") == "waiting"
    assert fields_of(redis_client, q.engine._keys, "a")["k"] == 1
    assert fields_of(redis_client, q.engine._keys, "b")["n"] == 1
    assert q.links("b") == ((Ref(q.name, "a"),), (), 1, 0)
    assert q.links("a").kids == (Kid(q.name, "b", 1),)  # type: ignore[union-attr]
    # a clash: the tag's state, nothing written
    before = snapshot(redis_client, q.prefix)
    assert raw(q, q.engine._shards[0].wf_publish([FlowJob(job("c")), child])) == [
        1,
        b"b",
        b"waiting",
    ]
    # a tag twice in one call, and a ready one: each named with its state, in call order
    twice = [FlowJob(job("e")), FlowJob(job("a")), FlowJob(job("e"))]
    assert raw(q, q.engine._shards[0].wf_publish(twice)) == [1, b"a", b"ready", b"e", b"batch"]
    assert snapshot(redis_client, q.prefix) == before


@pytest.mark.parametrize(
    "bad",
    [
        FlowJob(NewJob("d", b"1", JobSpec(delay_ms=5000)), parents=(Ref("q", "a"),)),
        FlowJob(job("d"), parents=tuple(Ref("q", str(i)) for i in range(10_001))),
    ],
)
def test_wf_publish_refuses_bad_jobs_before_writing(
    q: Queue, redis_client: redis.Redis, bad: FlowJob
) -> None:
    before = snapshot(redis_client, q.prefix)
    with pytest.raises(ScriptArgumentError):
        q.engine.run(q.engine._shards[0].wf_publish([FlowJob(job("ok")), bad]))
    assert snapshot(redis_client, q.prefix) == before


def test_wf_link_by_state(q: Queue, redis_client: redis.Redis) -> None:
    shard = q.engine._shards[0]
    kid = json.dumps([q.name, "k", 1])
    assert raw(q, shard.wf_link("nope", kid, 10)) == b""
    q.publish("x", tag="p", max_retries=0)
    assert raw(q, shard.wf_link("p", kid, 10)) == b"linked"
    msg = q.get()
    assert msg is not None and q.nack(msg, "e") == "dead"
    assert raw(q, shard.wf_link("p", kid, 10)) == b"dead"
    with pytest.raises(ScriptArgumentError):
        q.engine.run(shard.wf_link("p", kid, 2))  # the most dependents: two already
    with pytest.raises(ScriptArgumentError):
        q.engine.run(shard.wf_link("p", "not json", 10))
    redis_client.hset(q.engine._keys.meta, "p", "{broken")
    assert raw(q, shard.wf_link("p", kid, 10)) == b"corrupt"


def test_wf_resolve_counts_each_parent_once(q: Queue, redis_client: redis.Redis) -> None:
    child = FlowJob(job("c"), parents=(Ref(q.name, "p1"), Ref(q.name, "p2")))
    q.engine.run(q.engine._shards[0].wf_publish([child]))
    one = Resolution("c", 1, "1", '"r1"', "p1")
    for _ in range(3):
        assert raw(q, q.engine._shards[0].wf_resolve([one, one])) == [0, 0, 0]
    assert q.state("c") == "waiting"
    two = Resolution("c", 2, "1", "2", "p2")
    assert raw(q, q.engine._shards[0].wf_resolve([two])) == [1, 0, 0]
    assert raw(q, q.engine._shards[0].wf_resolve([two, one])) == [0, 0, 0]  # in line: left alone
    assert q.passed_results("c") == ["r1", 2]
    assert redis_client.zcard(q.engine._keys.ready) == 1


def test_wf_resolve_buries_and_revives(q: Queue) -> None:
    kids = (Kid(q.name, "d", 1),)
    c = FlowJob(job("c"), parents=(Ref(q.name, "p"),), kids=kids)
    d = FlowJob(job("d"), parents=(Ref(q.name, "c"),))
    q.engine.run(q.engine._shards[0].wf_publish([c, d]))
    fail = Resolution("c", 1, "0", "", "p")
    assert raw(q, q.engine._shards[0].wf_resolve([fail])) == [0, 1, 0, b"c"]
    assert raw(q, q.engine._shards[0].wf_resolve([fail])) == [0, 0, 0]  # dead already
    assert q.info("c").last_error == "dependency p failed"  # type: ignore[union-attr]
    assert q.dispatch(["c"]) == 1
    assert q.state("d") == "dead"
    ok = Resolution("c", 1, "1", "5", "p")
    assert raw(q, q.engine._shards[0].wf_resolve([ok])) == [1, 0, 1, b"c"]
    assert q.state("c") == "ready" and q.state("d") == "dead"
    q.dispatch(["c"])  # its 'r' entry: d waits again
    assert q.state("d") == "waiting"


def test_wf_resolve_refuses_bad_entries_before_writing(q: Queue, redis_client: Any) -> None:
    q.engine.run(q.engine._shards[0].wf_publish([FlowJob(job("c"), parents=(Ref(q.name, "p"),))]))
    before = snapshot(redis_client, q.prefix)
    for bad in (
        Resolution("c", 0, "1", "1", "p"),
        Resolution("c", 10_001, "1", "1", "p"),
        Resolution("c", 1, "x", "", "p"),
        Resolution("", 1, "1", "1", "p"),
    ):
        with pytest.raises(ScriptArgumentError):
            q.engine.run(q.engine._shards[0].wf_resolve([Resolution("c", 1, "1", "1", "p"), bad]))
    good = q.engine._shards[0].wf_resolve([Resolution("c", 1, "1", "1", "p")])
    whole = {"child": "c", "place": 1, "end": "1", "result": "1", "parent": "p"}
    assert good.args[1] == entry_arg(**whole)  # each entry one map, read by name
    for args in (
        (*good.args, good.args[1]),  # an entry without its wf key
        (good.args[0], b"x"),  # not a map
        (good.args[0], entry_arg(**{**whole, "parent": None})),  # no parent
        (good.args[0], entry_arg(**{**whole, "result": 5})),  # a result that is no text
        good.args[:1],  # no entry
        (b"x", good.args[1]),  # a policy that is not one
    ):
        with pytest.raises(ScriptArgumentError):
            q.engine.run(good._replace(args=args))
    assert snapshot(redis_client, q.prefix) == before


def test_wf_clear_only_the_entry_it_read(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("x", tag="p", max_retries=0)
    q.publish("y", tag="c", depends_on=["p"])
    msg = q.get()
    assert msg is not None and raw(q, q.engine._shards[0].ack(msg, "", 0, None, "7")) == 2
    (entry,) = q.engine.flow.read_outbox(["p"])
    assert entry[1] == b"17"
    assert raw(q, q.engine._shards[0].wf_clear("p", b"0")) == 0  # replaced meanwhile: kept
    assert q.outbox_size() == 1
    assert raw(q, q.engine._shards[0].wf_clear("p", b"17")) == 1
    assert q.outbox_size() == 0 and not redis_client.exists(q.engine._keys.wf("p"))


def test_hooks_leave_entries_only_for_workflow_jobs(q: Queue) -> None:
    q.publish("plain", tag="plain", max_retries=0)
    msg = q.get()
    assert msg is not None and raw(q, q.engine._shards[0].ack(msg, "", 0, None)) == 1
    q.publish("x", tag="p", max_retries=0)
    q.publish("y", tag="c", depends_on=["p"])
    msg = q.get()
    assert msg is not None
    assert raw(q, q.engine._shards[0].nack(msg, "e", 0, True)) == 3  # dead, and an entry
    assert q.engine.flow.read_outbox(["p"])[0][1] == b"0"


def test_scan_buries_an_expired_workflow_job_with_an_entry(
    q: Queue, redis_client: redis.Redis
) -> None:
    q.publish("x", tag="p", max_retries=0)
    q.publish("y", tag="c", depends_on=["p"])
    assert q.get() is not None
    redis_client.zadd(q.engine._keys.leased, {"p": 1})
    assert q.scan().buried == 1
    assert q.engine.flow.drain() == 1
    assert q.state("c") == "dead"
