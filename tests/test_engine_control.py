"""The engine's control, claiming and set-publishing verbs (``engine.control``,
``engine.claims``, ``engine.sets``) and the one-job reads of ``engine.reads``
(``rank``, ``score``, ``state``, ``result``), which the queue asks.

- Each verb returns typed values (enums, booleans, dataclasses), on one shard and on
  several, and answers as the ``Queue`` method over it.
- Each verb is the round trips it says; given nothing, it sends nothing.
- Worst input: a cancel record or a kept result that is not what this version wrote.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from django_zqueue.engine.control import BulkEntry, BulkOutcome, CancelledJob
from django_zqueue.engine.scripts.replies import CancelReply
from django_zqueue.exceptions import CorruptResult
from django_zqueue.queue import Queue

from . import redis_server
from .conftest import QueueFactory
from .roundtrips import round_trips

DAY_MS = 86_400_000


@pytest.fixture(params=[1, 3], ids=["one-shard", "partitioned"])
def q(request: pytest.FixtureRequest, make_queue: QueueFactory) -> Queue:
    return make_queue(partitions=request.param)


def trips(act: Callable[[], object]) -> int:
    with round_trips() as sent:
        act()
    return len(sent)


def bury(q: Queue, tags: list[str]) -> None:
    q.publish_many([{"n": i} for i in range(len(tags))], tags=tags)
    while msgs := q.claim(100)[0]:
        for m in msgs:
            q.nack(m, f"boom {m.tag}", dead=True)
    assert all(q.state(t) == "dead" for t in tags)


# ---------------------------------------------------------------- typed values


def test_one_job_control_verbs(q: Queue) -> None:
    c = q.engine.control
    q.publish_many(["a", "b", "c"], tags=["a", "b", "c"])
    assert c.cancel("a", DAY_MS) is CancelReply.WAITING
    assert c.cancel("a", DAY_MS) is CancelReply.MISSING
    rec = c.cancelled("a")
    assert isinstance(rec, CancelledJob) and rec.tag == "a" and rec.was == "ready"
    assert rec.attempts == 0 and rec.consumer is None and rec == q.cancelled("a")
    assert c.cancelled("b") is None
    assert c.set_priority("c", 5) is True and c.set_priority("nope", 5) is False
    assert c.run_now("b") is True and c.run_now("nope") is False
    assert q.rank("b") == 0 and q.engine.reads.rank("b") == 0
    assert c.delete("b") is True and c.delete("b") is False
    assert q.state("b") is None


def test_requeue_and_purge_dead(q: Queue) -> None:
    c = q.engine.control
    bury(q, ["d0", "d1", "d2"])
    assert c.requeue_dead("d0") is True and c.requeue_dead("d0") is False
    assert c.requeue_dead("d1", front=True) is True
    assert q.rank("d1") == 0 and q.state("d0") == "ready"
    assert c.purge_dead(1) == 1 and q.state("d2") is None
    assert c.purge_dead(1) == 0


def test_pause_resume_and_scan(q: Queue) -> None:
    c = q.engine.control
    assert c.is_paused() is False
    c.pause()
    assert c.is_paused() is True and q.is_paused() is True
    q.publish("x", tag="x")
    assert q.claim(1)[0] == []
    c.resume()
    assert c.is_paused() is False
    assert [m.tag for m in q.engine.claims.claim(1, "me")[0]] == ["x"]
    got = c.scan(10)
    assert got == q.scan(10) and got.more is False


def test_the_one_job_reads(q: Queue) -> None:
    r = q.engine.reads
    q.publish_many(["a", "b"], tags=["a", "b"])
    assert [r.rank("a"), r.rank("b"), r.rank("nope")] == [0, 1, None]
    assert r.score("a") == q.score("a") and r.score("nope") is None
    assert r.state("a") == "ready" and r.state("nope") is None
    msg = q.claim(1)[0][0]
    assert q.ack(msg, result={"ok": [1]})
    assert r.result(msg.tag) == {"ok": [1]} == q.result(msg.tag)
    with pytest.raises(LookupError, match="no result kept"):
        r.result("never")


def test_the_bulk_walk_verbs(q: Queue) -> None:
    c = q.engine.control
    tags = [f"d{i}" for i in range(9)]
    bury(q, tags)
    seen: list[BulkEntry] = []
    for shard in range(c.shard_count):
        top = c.state_top(shard, "dead")
        if top is None:
            continue
        first = c.range_after(shard, "dead", None, top, 2)
        rest = c.range_after(shard, "dead", (first[-1][1], first[-1][0]), top, 100)
        entries = first + rest
        assert len({t for t, _ in entries}) == len(entries)
        assert [s for _, s in entries] == sorted(s for _, s in entries)
        seen += c.listed(shard, "dead", entries, [t for t, _ in entries])
    assert sorted(e.tag for e in seen) == tags
    assert all(e.error == f"boom {e.tag}" and e.body == {"n": int(e.tag[1:])} for e in seen)
    out = c.act(seen[0].shard, "delete", "dead", [seen[0].tag, "nope"], DAY_MS)
    assert out == BulkOutcome([seen[0].tag], 0, [])
    assert c.act(0, "delete", "dead", [], DAY_MS) == BulkOutcome([], 0, [])
    assert c.state_top(0, "waiting") is None


def test_the_set_verbs_build_calls_without_sending(q: Queue) -> None:
    s = q.engine.sets
    jobs = [q.prepare(i, tag=f"j{i}") for i in range(6)]
    for job in jobs:
        assert s.shard_index(job.tag) == q.engine._shard_for(job.tag).index
    index = s.shard_index("j0")
    mine = [j for j in jobs if s.shard_index(j.tag) == index]
    assert trips(lambda: s.publish_call(index, mine)) == 0
    assert q.engine.run(s.publish_call(index, mine)) == []
    assert all(q.state(j.tag) == "ready" for j in mine)


# ---------------------------------------------------------------- round trips


@pytest.mark.skipif(redis_server.TOPOLOGY != "standalone", reason="counts one Redis server")
def test_each_verb_is_its_round_trips(q: Queue) -> None:
    c, r = q.engine.control, q.engine.reads
    one = q.partitions == 1
    q.publish_many(["a", "b", "c"], tags=["a", "b", "c"])
    assert trips(c.pause) == 1
    assert trips(c.is_paused) == 1
    assert trips(c.resume) == 1
    assert trips(lambda: c.cancelled("a")) == 1
    assert trips(lambda: c.set_priority("a", 1)) == 1
    assert trips(lambda: c.run_now("a")) == (1 if one else 2)  # the other heads first
    assert trips(lambda: c.scan(10)) == 1
    assert trips(lambda: r.rank("b")) == (1 if one else 2)
    assert trips(lambda: r.score("b")) == 1
    assert trips(lambda: r.state("b")) == 1
    assert trips(lambda: c.state_top(0, "ready")) == 1
    assert trips(lambda: c.range_after(0, "ready", None, 1e18, 10)) == 1
    assert trips(lambda: c.listed(0, "ready", [("a", 0.0)], ["a"])) == 1
    assert trips(lambda: c.listed(0, "ready", [], [])) == 0
    assert trips(lambda: c.act(0, "delete", "dead", [], DAY_MS)) == 0
    assert trips(lambda: c.act(0, "cancel", "ready", ["zz"], DAY_MS)) == 1
    assert trips(lambda: q.engine.claims.wait(0.01)) == 1
    assert trips(lambda: c.cancel("zz", DAY_MS)) == 1  # nothing cancelled: nobody told


# ---------------------------------------------------------------- worst input


def test_a_cancel_record_not_of_this_version_reads_as_absent(
    q: Queue, redis_client: redis.Redis
) -> None:
    key = q.engine._keys_for("x").cancelled("x")
    for junk in (b"not json", b"[1, 2]", b'{"at": "soon"}', b'{"was": "ready"}'):
        redis_client.set(key, junk)
        assert q.engine.control.cancelled("x") is None


def test_a_kept_result_that_is_not_json_names_its_key(q: Queue, redis_client: redis.Redis) -> None:
    key = q.engine._keys_for("x").result("x")
    redis_client.set(key, b"\xff{")
    with pytest.raises(CorruptResult, match="is not JSON"):
        q.engine.reads.result("x")
