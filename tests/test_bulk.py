"""Retry now (a dead job to the front of the line) and the actions on every job of a state
that matches, in chunks, while a worker claims, finishes and buries jobs between them."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from django_zqueue import InvalidArgument, Queue
from django_zqueue.engine.scripts.replies import CancelReply, DeleteReply
from django_zqueue.queue import bulk
from django_zqueue.queue.bulk import BULK_CHUNK, Bulk, BulkResult

from .conftest import QueueFactory


def bury(q: Queue, n: int, task: str = "t", prefix: str = "d") -> list[str]:
    tags = q.publish_many(
        [{"task": task, "args": [], "kwargs": {}}] * n, tags=[f"{prefix}{i}" for i in range(n)]
    )
    out = []
    while msgs := q.claim(100)[0]:
        for m in msgs:
            q.nack(m, "boom", dead=True)
            out.append(m.tag)
    assert sorted(out) == sorted(tags)
    return tags


# ---------------------------------------------------------------- retry now


def test_retry_now_puts_a_dead_job_first_and_requeue_last(make_queue: QueueFactory) -> None:
    q = make_queue()
    dead = bury(q, 2)
    ahead = [q.publish("x", priority=p) for p in (1000, 0, -5)]
    assert q.requeue_dead(dead[0], front=True)
    assert q.rank(dead[0]) == 0 and q.info(dead[0]).rank == 0  # type: ignore[union-attr]
    assert q.requeue_dead(dead[1])  # the back of its priority's line
    assert q.rank(dead[1]) == 3 and q.rank(ahead[0]) == 1
    assert not q.requeue_dead(dead[1], front=True)  # not dead any more
    msg = q.get()
    assert msg is not None and msg.tag == dead[0] and msg.attempt == 1


def test_retry_now_on_a_partitioned_queue_goes_ahead_of_every_partition(
    make_queue: QueueFactory,
) -> None:
    q = make_queue(partitions=3)
    dead = bury(q, 1)[0]
    for i in range(12):
        q.publish("x", priority=100, tag=f"r{i}")
    assert q.requeue_dead(dead, front=True)
    assert q.rank(dead) == 0


def test_requeue_dead_script_checks_below_before_writing(
    q: Queue, redis_client: redis.Redis
) -> None:
    tag = bury(q, 1)[0]
    shard = q.engine._shards[0]
    call = shard.requeue_dead(tag, True, None)
    bad = call.__class__(call.script, call.keys, (*call.args[:3], "nan"), call.result)
    with pytest.raises(Exception, match="ZQ_BAD_ARGUMENT"):
        q.engine.run(bad)
    assert q.state(tag) == "dead"
    redis_client.zadd(q.engine._keys.ready, {"low": -(2**53)})
    with pytest.raises(Exception, match="lowest exact score"):
        q.requeue_dead(tag, front=True)
    assert q.state(tag) == "dead"


# ---------------------------------------------------------------- range_after.lua


def test_range_after_walks_ties_in_member_order_from_a_removed_cursor(
    q: Queue, redis_client: redis.Redis
) -> None:
    key = q.engine._keys.dead
    members = {f"m{i:02d}": float(i // 4) for i in range(20)}  # runs of 4 equal scores
    members["\xff"] = 2.0
    redis_client.zadd(key, members)
    order = [m.decode("utf-8", "surrogateescape") for m in redis_client.zrange(key, 0, -1)]
    s = q.engine._shards[0]

    def after(cursor: tuple[float, str] | None, top: float, n: int) -> list[str]:
        return [t for t, _ in q.engine.run(s.range_after(key, cursor, top, n))]

    assert after(None, 100, 5) == order[:5]
    assert after((1.0, "m05"), 100, 3) == ["m06", "m07", "m08"]
    redis_client.zrem(key, "m06")  # a cursor that left the set still places the walk
    assert after((1.0, "m06"), 100, 2) == ["m07", "m08"]
    assert after((1.0, "m065"), 100, 2) == ["m07", "m08"]
    assert after((2.0, "m11"), 100, 1) == ["\xff"]
    assert after((2.0, "m10"), 2.0, 5) == ["m11", "\xff"]  # top: nothing of score 3
    assert after((4.0, "m19"), 100, 5) == []
    for bad in ((1.0, 0), (1.0, 1001)):
        with pytest.raises(Exception, match="ZQ_BAD_ARGUMENT"):
            q.engine.run(s.range_after(key, None, bad[0], int(bad[1])))


# ---------------------------------------------------------------- only: the state guard


def test_delete_and_cancel_with_only_leave_a_job_of_another_state_alone(q: Queue) -> None:
    s = q.engine._shards[0]
    ready = q.publish("x", tag="ready")
    assert q.engine.run(s.delete(ready, False, "dead")) is DeleteReply.ELSEWHERE
    leased = q.publish("y", tag="leased")
    q.claim(2)
    assert q.engine.run(s.cancel(leased, 1000, "ready")) is CancelReply.ELSEWHERE
    assert q.state(ready) == "leased" and q.state(leased) == "leased"
    assert q.engine.run(s.cancel(leased, 1000, "leased")) is CancelReply.RUNNING


# ---------------------------------------------------------------- all that match


def test_requeue_all_in_chunks(make_queue: QueueFactory) -> None:
    q = make_queue()
    n = 2 * BULK_CHUNK + 17
    bury(q, n)
    got = q.requeue_dead_all()
    assert got == BulkResult(done=n)
    assert q.counts()["dead"] == 0 and q.counts()["ready"] == n


def test_match_most_and_delete_all(make_queue: QueueFactory) -> None:
    q = make_queue()
    a = bury(q, 30, task="a", prefix="a")
    b = bury(q, 20, task="b", prefix="b")
    is_a = lambda job: job.body["task"] == "a"  # noqa: E731
    first = q.requeue_dead_all(is_a, most=10)
    assert first.done == 10 and first.more
    assert q.requeue_dead_all(is_a) == BulkResult(done=20)
    assert all(q.state(t) == "ready" for t in a)
    assert q.act_on_all("delete", "dead", lambda job: job.error == "boom") == BulkResult(done=20)
    assert all(q.state(t) is None for t in b)


def test_chunks_with_a_worker_between_them_act_on_each_job_once(
    make_queue: QueueFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between chunks a worker claims the requeued jobs and buries them again (new dead
    letters, after the walk's end), deletes dead letters not yet read (never seen) and
    requeues some of the chunk about to be acted on (they left: counted, not acted on)."""
    q = make_queue()
    n = 3 * BULK_CHUNK
    tags = bury(q, n)
    gone_early = set(tags[-7:])  # deleted before their chunk is read
    left = set(tags[BULK_CHUNK + 1 : BULK_CHUNK + 4])  # requeued by hand in their chunk
    acted: list[str] = []
    original = Bulk._act

    def act(self: Bulk, shard: Any, action: str, state: str, chunk: list[str]) -> BulkResult:
        if not acted:
            for t in gone_early:
                assert q.delete(t)
        for t in chunk:
            if t in left:
                assert q.requeue_dead(t)
        acted.extend(chunk)
        got = original(self, shard, action, state, chunk)
        # the worker: claims what is ready and buries it again
        while msgs := q.claim(100)[0]:
            for m in msgs:
                q.nack(m, "again", dead=True)
        return got

    monkeypatch.setattr(Bulk, "_act", act)
    got = q.requeue_dead_all()
    assert len(acted) == len(set(acted)), "no job twice"
    assert set(acted) == set(tags) - gone_early, "none skipped"
    assert got == BulkResult(done=n - len(gone_early) - len(left), left=len(left))
    # every job was requeued once, then buried again by the worker
    assert q.counts()["dead"] == n - len(gone_early)
    info = q.info(tags[0])
    assert info is not None and [e.text for e in info.errors] == ["boom", "again"]


def test_cancel_all_ready_skips_what_a_worker_claimed_meanwhile(
    make_queue: QueueFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = make_queue()
    n = 2 * BULK_CHUNK + 5
    q.publish_many(["x"] * n, tags=[f"j{i}" for i in range(n)])
    claimed: list[str] = []
    original = Bulk._act

    def act(self: Bulk, shard: Any, action: str, state: str, chunk: list[str]) -> BulkResult:
        msgs = q.claim(4)[0]  # the head of the line: this chunk's first jobs
        claimed.extend(m.tag for m in msgs)
        return original(self, shard, action, state, chunk)

    monkeypatch.setattr(Bulk, "_act", act)
    got = q.act_on_all("cancel", "ready")
    assert got == BulkResult(done=n - len(claimed), left=len(claimed))
    assert all(q.state(t) == "leased" for t in claimed)
    assert q.counts()["ready"] == 0 and q.counts()["inflight"] == len(claimed)


def test_run_now_all_delayed_and_bad_arguments(make_queue: QueueFactory) -> None:
    q = make_queue()
    q.publish("head", tag="head")
    later = [q.publish("x", delay=600, tag=f"l{i}") for i in range(5)]
    assert q.act_on_all("run_now", "delayed") == BulkResult(done=5)
    assert q.rank("head") == 5 and {q.rank(t) for t in later} == set(range(5))
    with pytest.raises(InvalidArgument):
        q.act_on_all("requeue", "ready")
    with pytest.raises(InvalidArgument):
        q.act_on_all("cancel", "dead")
    with pytest.raises(InvalidArgument):
        q.requeue_dead_all(most=0)
    assert bulk.BULK_ACTIONS["run_now"] == ("ready", "delayed")


def test_bulk_on_a_partitioned_queue(make_queue: QueueFactory) -> None:
    q = make_queue(partitions=3)
    n = BULK_CHUNK + 50
    bury(q, n)
    assert q.requeue_dead_all(front=True) == BulkResult(done=n)
    assert q.counts()["ready"] == n
