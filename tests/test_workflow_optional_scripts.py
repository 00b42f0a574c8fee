"""The scripts' side of optional parents and batches: ``wf_publish`` writes a waiting
job's ``opt`` (the places that take any end), ``wf_resolve`` counts a failed parent at
such a place with a failure marker (once, however often replayed; taken back when the
parent is revived, replaced when it then succeeds), and each end leaves its reason in
the outbox (``_wf_mark.lua``): raw replies and keys as Redis holds them."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from django_zqueue.engine.records import NewJob
from django_zqueue.engine.records.links import FlowJob, Kid, Ref, Resolution
from django_zqueue.exceptions import ScriptArgumentError
from django_zqueue.queue import Queue

from .conftest import snapshot
from .test_scripts import raw


def job(tag: str) -> NewJob:
    return NewJob(tag, b'"x"')


def waiting(q: Queue, tag: str, n: int, **links: Any) -> None:
    """Job ``tag`` waiting for parents p1..pn (not published: ends are sent by hand)."""
    parents = tuple(Ref(q.name, f"p{i}") for i in range(1, n + 1))
    assert raw(q, q.engine._shards[0].wf_publish([FlowJob(job(tag), parents, **links)])) == [0]


def resolve(q: Queue, *entries: Resolution) -> list[Any]:
    return list(raw(q, q.engine._shards[0].wf_resolve(list(entries))))


def test_wf_publish_writes_opt_for_a_waiting_job_only(q: Queue, redis_client: redis.Redis) -> None:
    waiting(q, "all", 2, any_end=True)
    waiting(q, "some", 3, optional=(3, 1))
    waiting(q, "none", 1)
    lone = FlowJob(job("lone"), kids=(Kid(q.name, "all", 1),), any_end=True)
    assert raw(q, q.engine._shards[0].wf_publish([lone])) == [0]
    assert redis_client.hget(q.engine._keys.wf("all"), "opt") == b"*"
    assert redis_client.hget(q.engine._keys.wf("some"), "opt") == b"[1, 3]"
    assert redis_client.hget(q.engine._keys.wf("none"), "opt") is None
    assert redis_client.hget(q.engine._keys.wf("lone"), "opt") is None  # no parents: no places


class BadOpt(FlowJob):
    def link_fields(self) -> dict[str, Any]:
        return {**super().link_fields(), "opt": 5}


def test_wf_publish_refuses_an_opt_that_is_not_text(q: Queue, redis_client: redis.Redis) -> None:
    before = snapshot(redis_client, q.prefix)
    bad = BadOpt(job("b"), (Ref(q.name, "p1"),))
    with pytest.raises(ScriptArgumentError, match="opt must be text"):
        q.engine.run(q.engine._shards[0].wf_publish([FlowJob(job("ok")), bad]))
    assert snapshot(redis_client, q.prefix) == before


def test_a_failed_optional_parent_counts_once_with_its_reason(
    q: Queue, redis_client: redis.Redis
) -> None:
    waiting(q, "c", 2, optional=(2,))
    fail = Resolution("c", 2, "0", "cancelled", "p2")
    for _ in range(3):  # replayed: counted once
        assert resolve(q, fail) == [0, 0, 0]
    wf = q.engine._keys.wf("c")
    assert redis_client.hget(wf, "r2") == b"!cancelled" and redis_client.hget(wf, "got") == b"1"
    assert q.state("c") == "waiting"
    assert resolve(q, Resolution("c", 1, "1", "7", "p1")) == [1, 0, 0]
    assert q.state("c") == "ready" and q.passed_results("c") == [7, None]


def test_an_old_dispatchers_failure_without_reason_reads_dead(
    q: Queue, redis_client: redis.Redis
) -> None:
    waiting(q, "c", 1, any_end=True)
    assert resolve(q, Resolution("c", 1, "0", "", "p1")) == [1, 0, 0]
    assert redis_client.hget(q.engine._keys.wf("c"), "r1") == b"!dead"


def test_a_failed_required_parent_kills_whatever_the_optional_ones(
    q: Queue, redis_client: redis.Redis
) -> None:
    waiting(q, "c", 2, optional=(2,))
    assert resolve(q, Resolution("c", 1, "0", "dead", "p1")) == [0, 1, 0]
    assert q.state("c") == "dead"
    # an optional failure on the dead job is kept as a marker, nothing else changes
    errors = redis_client.hget(q.engine._keys.errors, "c")
    assert resolve(q, Resolution("c", 2, "0", "expired", "p2")) == [0, 0, 0]
    assert q.state("c") == "dead" and redis_client.hget(q.engine._keys.errors, "c") == errors
    assert redis_client.hget(q.engine._keys.wf("c"), "r2") == b"!expired"


def test_a_revived_optional_parent_takes_its_marker_back_and_a_success_replaces_it(
    q: Queue, redis_client: redis.Redis
) -> None:
    waiting(q, "c", 2, any_end=True)
    wf = q.engine._keys.wf("c")
    resolve(q, Resolution("c", 1, "0", "dead", "p1"))
    assert resolve(q, Resolution("c", 1, "r", "", "p1")) == [0, 0, 0]
    assert redis_client.hget(wf, "r1") is None and redis_client.hget(wf, "got") == b"0"
    assert resolve(q, Resolution("c", 1, "r", "", "p1")) == [0, 0, 0]  # replay: no change
    assert redis_client.hget(wf, "got") == b"0"
    resolve(q, Resolution("c", 1, "0", "dead", "p1"))
    resolve(q, Resolution("c", 1, "1", '"ok"', "p1"))  # revived and succeeded since
    assert redis_client.hget(wf, "r1") == b'"ok"' and redis_client.hget(wf, "got") == b"1"
    resolve(q, Resolution("c", 1, "0", "dead", "p1"))  # a stale failure after it: no change
    assert redis_client.hget(wf, "r1") == b'"ok"'


def test_a_corrupt_opt_makes_no_place_optional(q: Queue, redis_client: redis.Redis) -> None:
    waiting(q, "c", 1, optional=(1,))
    redis_client.hset(q.engine._keys.wf("c"), "opt", "{not json")
    assert resolve(q, Resolution("c", 1, "0", "dead", "p1")) == [0, 1, 0]
    assert q.state("c") == "dead"


def test_each_end_leaves_its_reason_in_the_outbox(q: Queue, redis_client: redis.Redis) -> None:
    kid = (Kid(q.name, "w", 1),)
    jobs = [FlowJob(NewJob(t, b'"x"'), kids=kid) for t in ("del", "can", "nack")]
    jobs.append(FlowJob(q.prepare("x", "exp", expires=0.02), kids=kid))
    assert raw(q, q.engine._shards[0].wf_publish(jobs)) == [0]
    shard = q.engine._shards[0]
    q.engine.run(shard.delete("del", False))  # the scripts alone: no dispatch after them
    q.engine.run(shard.cancel("can", 60_000))
    time.sleep(0.05)  # past the expiry of "exp"
    q.scan()
    msgs, _ = q.claim(5)
    assert [m.tag for m in msgs] == ["nack"]
    assert q.nack(msgs[0], "e", dead=True) == "dead"
    res = redis_client.hgetall(q.engine._keys.wf_res)
    assert res == {b"del": b"0deleted", b"can": b"0cancelled", b"exp": b"0expired", b"nack": b"0"}
