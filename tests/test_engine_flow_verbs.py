"""The engine's workflow and durable-task verbs (``engine.flow_publish``,
``engine.durable``): typed values, the round trips each says, nothing written on a
refusal."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from django_zqueue.engine.durable import ParkedFor, Records
from django_zqueue.engine.records.links import FlowJob, Ref
from django_zqueue.engine.scripts.replies import ParkReply, SignalReply, StepReply
from django_zqueue.exceptions import DuplicateJob, QueueFull
from django_zqueue.queue import Queue

from . import redis_server
from .conftest import QueueFactory, snapshot
from .roundtrips import round_trips

one_server = pytest.mark.skipif(
    redis_server.TOPOLOGY != "standalone", reason="counts the requests to one Redis server"
)


def trips(call: Callable[[], object]) -> int:
    with round_trips() as sent:
        call()
    return len(sent)


# ---------------------------------------------------------------- durable


def test_a_run_records_a_step_parks_and_is_signalled(q: Queue) -> None:
    d = q.engine.durable
    tag = q.publish("x")
    msg = q.claim(1, "c")[0][0]
    got = d.run_records(msg)
    assert isinstance(got, Records) and got.leased and got.fields == {}
    assert d.step(msg, "s:a", "1") is StepReply.RECORDED
    assert d.step(msg, "s:a", "2") is StepReply.ALREADY
    assert d.records(tag).fields == {"s:a": "1"}
    code, _ = d.park(msg, "w:ok", 60_000)
    assert code is ParkReply.PARKED
    park = d.parked(tag)
    assert isinstance(park, ParkedFor) and (park.kind, park.name) == ("event", "ok")
    assert d.signal(tag, "ok", '"yes"') is SignalReply.WOKEN
    assert d.signal(tag, "ok", '"yes"') is SignalReply.ALREADY
    assert d.parked(tag) is None


def test_a_stale_run_records_nothing(q: Queue, redis_client: redis.Redis, prefix: str) -> None:
    q.publish("x", visibility_timeout=60)
    msg = q.claim(1, "c")[0][0]
    q.release(msg)
    before = snapshot(redis_client, prefix)
    assert not q.engine.durable.run_records(msg).leased
    assert q.engine.durable.step(msg, "s:a", "1") is StepReply.STALE
    assert snapshot(redis_client, prefix) == before


def test_a_signal_to_no_job_writes_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    before = snapshot(redis_client, prefix)
    assert q.engine.durable.signal("nobody", "ev", "1") is SignalReply.NO_JOB
    assert snapshot(redis_client, prefix) == before


@one_server
def test_parked_many_is_one_round_trip_and_none_for_nothing(make_queue: QueueFactory) -> None:
    q = make_queue(partitions=4)
    tags = [q.publish(i) for i in range(6)]
    msgs, _ = q.claim(6, "c")
    q.engine.durable.park(msgs[0], "z:nap", 60_000)
    assert trips(lambda: q.engine.durable.parked_many(tags)) == 1
    got = q.engine.durable.parked_many(tags)
    assert list(got) == [msgs[0].tag] and got[msgs[0].tag].kind == "sleep"
    assert trips(lambda: q.engine.durable.parked_many([])) == 0


# ---------------------------------------------------------------- workflows


def test_taken_names_each_taken_tag_with_its_state(make_queue: QueueFactory) -> None:
    a, b = make_queue("a"), make_queue("b", partitions=3)
    a.publish("x", tag="t1")
    b.publish("x", tag="t2", delay=60)
    w = a.engine.flow_publish
    jobs = [
        (a.engine.flow_publish, "t1"),
        (b.engine.flow_publish, "t1"),
        (b.engine.flow_publish, "t2"),
    ]
    assert w.taken(jobs) == [(0, "ready"), (2, "delayed")]
    assert w.taken([(b.engine.flow_publish, "free")]) == []


@one_server
def test_taken_is_one_round_trip_when_all_are_free(make_queue: QueueFactory) -> None:
    a, b = make_queue("a"), make_queue("b", partitions=3)
    jobs = [
        (a.engine.flow_publish, "t1"),
        (b.engine.flow_publish, "t1"),
        (b.engine.flow_publish, "t2"),
    ]
    assert trips(lambda: a.engine.flow_publish.taken(jobs)) == 1


def test_check_room_refuses_what_does_not_fit(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    q = make_queue(max_length=2)
    q.publish("x")
    w = q.engine.flow_publish
    w.check_room([(w, "n1", "")])
    before = snapshot(redis_client, prefix)
    with pytest.raises(QueueFull, match="1 jobs wait and 2 more would pass max_length 2"):
        w.check_room([(w, "n1", ""), (w, "n2", "")])
    assert snapshot(redis_client, prefix) == before


@one_server
def test_check_room_sends_nothing_without_a_limit(q: Queue) -> None:
    w = q.engine.flow_publish
    assert trips(lambda: w.check_room([(w, "n1", ""), (w, "n2", "g")])) == 0


def test_a_step_that_clashes_names_what_it_wrote(make_queue: QueueFactory) -> None:
    a, b = make_queue("a"), make_queue("b")
    b.publish("x", tag="taken")
    plain = a.prepare("y", tag="free")
    clash = b.prepare("z", tag="taken")
    written: list[Ref] = []
    with pytest.raises(DuplicateJob):
        a.engine.flow_publish.publish_step(
            [
                (a.engine.flow_publish, [FlowJob(plain, ())]),
                (b.engine.flow_publish, [FlowJob(clash, ())]),
            ],
            written,
        )
    assert written == [Ref("a", "free")]
    a.engine.flow_publish.remove("free")
    assert a.engine.reads.info("free") is None


@one_server
def test_outbox_size_is_one_round_trip_over_every_shard(make_queue: QueueFactory) -> None:
    q = make_queue(partitions=3)
    assert q.engine.flow_publish.outbox_size() == 0
    assert trips(q.engine.flow_publish.outbox_size) == 1


def test_a_waiting_job_is_published_then_linked(make_queue: QueueFactory) -> None:
    q = make_queue(partitions=2)
    parent = q.publish("p")
    w = q.engine.flow_publish
    job = FlowJob(q.prepare("k", tag="kid"), (Ref(q.name, parent),))
    assert w.publish_waiting(job) == []
    w.link_parents("kid", job.parents)
    assert q.engine.reads.link_states([Ref(q.name, "kid")]) == ["waiting"]
    assert w.publish_waiting(job) == [("kid", "waiting")]
