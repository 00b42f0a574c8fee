"""The core Queue API on a real Redis, one behaviour per test."""

from __future__ import annotations

import math
import os
import socket
import string
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.test import override_settings

from django_zqueue import (
    DuplicateJob,
    InvalidArgument,
    PayloadTooLarge,
    Queue,
    QueueFull,
    QueueUnavailable,
)
from django_zqueue.conf import PRIORITY_BAND, Config, QueueOptions
from django_zqueue.engine.redis.connection import make_client
from django_zqueue.engine.scripts import SequenceExhausted

from .conftest import QueueFactory, snapshot
from .records_util import set_body
from .scripts_util import lose_scripts


def claim_all(q: Queue) -> list[str]:
    out = []
    while msgs := q.claim(50)[0]:
        out.extend(m.tag for m in msgs)
    return out


def expire_leases(client: redis.Redis, q: Queue) -> None:
    """Simulate the passing of every lease deadline (the harness rewrites the deadline)."""
    for tag in client.zrange(q.engine._keys.leased, 0, -1):
        client.zadd(q.engine._keys.leased, {tag: 0}, xx=True)


# ---------------------------------------------------------------- publish


def test_publish_returns_tag_and_stores_job(q: Queue) -> None:
    tag = q.publish({"hello": "world"})
    assert isinstance(tag, str) and len(tag) == 12
    info = q.info(tag)
    assert info is not None
    assert info.state == "ready" and info.rank == 0 and info.body == {"hello": "world"}
    assert info.attempts == 0 and info.max_retries == 3
    assert abs(info.enqueued_at - datetime.now(UTC)) < timedelta(seconds=5)
    assert q.exists(tag) and q.total_count() == 1


def test_duplicate_tag_is_rejected_in_every_live_state(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    q.publish("ready", tag="r")
    q.publish("delayed", tag="d", delay=60)
    q.publish("leased", tag="l", priority=9)
    assert q.get().tag == "l"  # type: ignore[union-attr]
    for tag, state in (("r", "ready"), ("d", "delayed"), ("l", "leased")):
        before = snapshot(redis_client, prefix)
        with pytest.raises(DuplicateJob) as err:
            q.publish("other body", tag=tag)
        assert err.value.tags == [tag] and err.value.states == [state]
        assert snapshot(redis_client, prefix) == before
    assert q.info("r").body == "ready"  # type: ignore[union-attr]


def test_duplicate_tag_of_a_dead_job_is_rejected(q: Queue) -> None:
    q.publish("x", tag="t")
    q.nack(q.get(), "bad", dead=True)  # type: ignore[arg-type]
    with pytest.raises(DuplicateJob) as err:
        q.publish("y", tag="t")
    assert err.value.states == ["dead"]


def test_tag_is_free_again_after_ack_or_delete(q: Queue) -> None:
    q.publish(1, tag="t")
    q.ack(q.get())  # type: ignore[arg-type]
    q.publish(2, tag="t")
    assert q.delete("t")
    q.publish(3, tag="t")
    assert q.info("t").body == 3  # type: ignore[union-attr]


def test_priority_then_fifo_order(q: Queue) -> None:
    tags = [q.publish(i, priority=p) for i, p in enumerate([0, 5, 0, -3, 5, 1000, -1000])]
    expected = [tags[5], tags[1], tags[4], tags[0], tags[2], tags[3], tags[6]]
    assert [q.rank(t) for t in expected] == list(range(7))
    assert claim_all(q) == expected


def test_rank_counts_jobs_claimed_before(q: Queue) -> None:
    tags = [q.publish(i) for i in range(5)]
    assert q.rank(tags[3]) == 3
    q.get()
    assert q.rank(tags[3]) == 2
    q.publish("urgent", priority=1)
    assert q.rank(tags[3]) == 3
    assert q.rank("no-such-tag") is None


def test_strict_scores_encode_priority_bands(q: Queue) -> None:
    a = q.publish("a")
    b = q.publish("b", priority=2)
    sa, sb = q.score(a), q.score(b)
    assert sa is not None and sb is not None
    assert sa == 1.0  # first sequence number, priority 0
    assert sb == 2 - 2 * PRIORITY_BAND
    assert q.score("missing") is None


def test_raw_score_jumps_the_queue(q: Queue) -> None:
    first = q.publish("first")
    jumper = q.publish("jumper", score=0)
    assert q.score(jumper) == 0.0 and q.rank(jumper) == 0 and q.rank(first) == 1
    late = q.publish("late", score=2**53)
    assert q.rank(late) == 2 and q.score(late) == float(2**53)


def test_aging_mode_lets_old_low_priority_jobs_through(make_queue: QueueFactory) -> None:
    q = make_queue(priority_mode="aging", priority_aging_seconds=0.05)
    old = q.publish("old", priority=0)
    time.sleep(0.12)  # > 2 priority steps of waiting
    new_hi = q.publish("new", priority=2)
    new_lo = q.publish("new0", priority=0)
    assert q.rank(old) == 0 and q.rank(new_hi) == 1 and q.rank(new_lo) == 2
    fresh_hi = q.publish("fresh", priority=10)
    assert q.rank(fresh_hi) == 0  # 10 steps = 0.5 s beats 0.12 s of waiting
    assert claim_all(q) == [fresh_hi, old, new_hi, new_lo]


def test_aging_mode_is_fifo_within_a_priority(make_queue: QueueFactory) -> None:
    q = make_queue(priority_mode="aging")
    tags = q.publish_many(range(300))
    assert claim_all(q) == tags


def test_delay_and_run_at_use_redis_time(q: Queue) -> None:
    soon = q.publish("soon", delay=0.3)
    later = q.publish("later", run_at=datetime.now(UTC) + timedelta(hours=1))
    now = q.publish("now", delay=-5)
    past = q.publish("past", run_at=datetime.now(UTC) - timedelta(days=1))
    assert q.state(soon) == "delayed" and q.rank(soon) is None
    assert q.state(later) == "delayed"
    assert q.state(now) == "ready" and q.state(past) == "ready"
    info = q.info(later)
    assert info is not None and info.run_at is not None
    assert abs(info.run_at - (datetime.now(UTC) + timedelta(hours=1))) < timedelta(seconds=5)
    assert [m.tag for m in q.claim(10)[0]] == [now, past]
    msgs, hint = q.claim(10)
    assert msgs == [] and hint is not None and 0 < hint <= 0.3
    time.sleep(hint + 0.02)
    assert [m.tag for m in q.claim(10)[0]] == [soon]  # promoted by the claim itself


def test_delay_accepts_timedelta(q: Queue) -> None:
    tag = q.publish("x", delay=timedelta(minutes=5))
    assert q.state(tag) == "delayed"


def test_publish_many_one_call_keeps_order(q: Queue) -> None:
    tags = q.publish_many([{"n": i} for i in range(10)], priority=3)
    assert [q.rank(t) for t in tags] == list(range(10))
    assert q.publish_many([]) == []


def test_publish_many_with_tags_and_delay(q: Queue) -> None:
    tags = q.publish_many(["a", "b"], tags=["ta", "tb"], delay=60)
    assert tags == ["ta", "tb"]
    assert q.counts()["delayed"] == 2


def test_publish_many_is_all_or_nothing(q: Queue, redis_client: redis.Redis, prefix: str) -> None:
    q.publish("x", tag="taken")
    before = snapshot(redis_client, prefix)
    with pytest.raises(DuplicateJob) as err:
        q.publish_many(["a", "b", "c"], tags=["new1", "taken", "new2"])
    assert err.value.tags == ["taken"] and err.value.published == []
    with pytest.raises(DuplicateJob) as err2:
        q.publish_many(["a", "b"], tags=["same", "same"])
    assert err2.value.states == ["batch"]
    assert snapshot(redis_client, prefix) == before


def test_spent_sequence_raises_and_writes_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    band = 2**42
    q.publish("warm")
    q.publish("later", delay=0.001)
    redis_client.hset(q.engine._keys.ctr, "seq", band - 2)
    q.publish("last number")
    before = snapshot(redis_client, prefix)
    for call in (lambda: q.publish("x"), lambda: q.publish_many(["y", "z"])):
        with pytest.raises(SequenceExhausted, match="ZQ_SEQUENCE_EXHAUSTED"):
            call()
        assert snapshot(redis_client, prefix) == before
    time.sleep(0.01)
    with pytest.raises(SequenceExhausted, match="ZQ_SEQUENCE_EXHAUSTED"):
        q.scan()  # the due delayed job cannot be given a number: it stays delayed
    assert q.counts()["delayed"] == 1 and q.counts()["ready"] == 2


def test_publish_many_over_one_chunk(q: Queue, redis_client: redis.Redis, prefix: str) -> None:
    tags = q.publish_many(range(2500))
    assert len(tags) == 2500 == q.total_count()
    assert q.rank(tags[-1]) == 2499
    own = [f"t{i}" for i in range(1500)]
    q.publish("x", tag="t1400")
    before = snapshot(redis_client, prefix)
    with pytest.raises(DuplicateJob) as err:
        q.publish_many(range(1500), tags=own)
    assert err.value.tags == ["t1400"] and err.value.published == []
    assert snapshot(redis_client, prefix) == before


def test_publish_many_drawn_tags_are_not_checked_first_and_a_clash_is_still_refused(
    q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tags the queue draws skip the clash check of a multi-chunk publish (no HMGET of
    the records first); a drawn tag that meets a job's (a 72-bit coincidence, forced
    here) is refused by its chunk's script, its job not written and the job it met left
    as it was, and the exception lists what the other chunks wrote."""
    from django_zqueue.engine import records
    from django_zqueue.engine.writes import Writes

    checked: list[int] = []
    check = Writes._precheck_tags
    monkeypatch.setattr(
        Writes,
        "_precheck_tags",
        lambda self, tags: (checked.append(len(tags)), check(self, tags)),
    )
    q.publish_many(range(150), tags=[f"g{i}" for i in range(150)])
    assert checked == [150]  # tags given: checked first
    tags = q.publish_many(range(250))
    assert len(set(tags)) == 250 and q.counts()["ready"] == 400
    assert checked == [150]  # drawn: not
    q.publish("mine", tag="met")
    pool = records._tag_pool
    monkeypatch.setattr(records, "_tag_pool", pool[:0])
    drawn = [f"d{i}" for i in range(250)]
    drawn[150] = "met"  # the 151st job, in the second chunk of 100
    records._tag_pool.extend(reversed(drawn))  # (popped from the end)
    with pytest.raises(DuplicateJob) as err:
        q.publish_many(range(250))
    assert err.value.tags == ["met"]
    assert sorted(err.value.published) == sorted(drawn[:100] + drawn[200:])
    assert q.counts()["ready"] == 400 + 1 + 150
    assert q.state("d120") is None and q.info("met").body == "mine"  # type: ignore[union-attr]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"body": object()}, TypeError),
        ({"body": {1, 2}}, TypeError),
        ({"body": float("nan")}, ValueError),
        ({"body": "x" * 2000}, PayloadTooLarge),
        ({"tag": ""}, InvalidArgument),
        ({"tag": "x" * 257}, InvalidArgument),
        ({"tag": "é" * 129}, InvalidArgument),  # 258 bytes
        ({"tag": 5}, InvalidArgument),
        ({"priority": math.nan}, InvalidArgument),
        ({"priority": math.inf}, InvalidArgument),
        ({"priority": 2**53 + 1}, InvalidArgument),
        ({"priority": 1001}, InvalidArgument),
        ({"priority": 1.5}, InvalidArgument),
        ({"priority": True}, InvalidArgument),
        ({"score": math.nan}, InvalidArgument),
        ({"score": -math.inf}, InvalidArgument),
        ({"score": 2**53 + 1}, InvalidArgument),
        ({"score": -(2.0**54)}, InvalidArgument),
        ({"score": "1"}, InvalidArgument),
        ({"delay": math.inf}, InvalidArgument),
        ({"delay": "5"}, InvalidArgument),
        ({"run_at": datetime(2030, 1, 1)}, InvalidArgument),  # naive while USE_TZ
        ({"run_at": "2030-01-01"}, InvalidArgument),
        ({"delay": 1, "run_at": datetime(2030, 1, 1, tzinfo=UTC)}, InvalidArgument),
        ({"max_retries": -1}, InvalidArgument),
        ({"visibility_timeout": 0}, InvalidArgument),
    ],
)
def test_bad_input_raises_and_writes_nothing(
    make_queue: QueueFactory,
    redis_client: redis.Redis,
    prefix: str,
    kwargs: dict[str, Any],
    exc: type[Exception],
) -> None:
    q = make_queue(max_payload_bytes=1000)
    q.publish("existing")
    before = snapshot(redis_client, prefix)
    args = {"body": "ok", **kwargs}
    with pytest.raises(exc):
        q.publish(**args)
    with pytest.raises(exc):
        q.publish_many(
            ["fine", args["body"]],
            **{k: v for k, v in kwargs.items() if k in ("priority", "delay", "run_at")},
        ) if set(kwargs) & {"body", "priority", "delay", "run_at"} else q.publish(**args)
    assert snapshot(redis_client, prefix) == before


def test_naive_run_at_is_local_time_without_use_tz(q: Queue) -> None:
    with override_settings(USE_TZ=False, TIME_ZONE="UTC"):
        tag = q.publish("x", run_at=datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1))
    assert q.state(tag) == "delayed"


def test_publish_many_tag_count_must_match(q: Queue) -> None:
    with pytest.raises(InvalidArgument, match="one tag per body"):
        q.publish_many(["a", "b"], tags=["x"])


# ---------------------------------------------------------------- claim, ack, nack


def test_get_claims_with_lease_and_token(q: Queue) -> None:
    tag = q.publish({"n": 1}, priority=4)
    msg = q.get(consumer="w1")
    assert msg is not None
    assert (msg.tag, msg.body, msg.attempt, msg.priority) == (tag, {"n": 1}, 1, 4)
    assert msg.lease_deadline > datetime.now(UTC) + timedelta(seconds=290)
    info = q.info(tag)
    assert info is not None and info.state == "leased" and info.consumer == "w1"
    assert q.exists(tag) and q.rank(tag) is None
    assert q.get() is None


def test_ack_removes_job_and_record(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    q = make_queue(keep_finished=0)  # no history of finished jobs: nothing is left
    q.publish("x")
    msg = q.get()
    assert msg is not None and q.ack(msg)
    assert not q.exists(msg.tag) and q.info(msg.tag) is None
    leftover = {k for k, v in snapshot(redis_client, prefix).items() if v}
    assert leftover == {
        q.engine._keys.ctr.encode(),
        q.engine._keys.stats.encode(),
        q.engine._keys.notify.encode(),
    }


def test_ack_keeps_the_job_in_the_history(q: Queue) -> None:
    """By default a job that succeeded stays in the history of finished jobs: info still
    answers (state "succeeded"), its record and body are in the history, none in meta."""
    q.publish({"task": "app.tasks.x", "args": [1]})
    msg = q.get(consumer="w1")
    assert msg is not None and q.ack(msg, result={"ok": 1})
    info = q.info(msg.tag)
    assert info is not None and info.state == "succeeded" and not q.exists(msg.tag)
    assert info.body == {"task": "app.tasks.x", "args": [1]} and info.consumer == "w1"
    assert info.result == {"ok": 1} and info.result_kept and info.attempts == 1
    assert info.finished_at is not None and info.started_at is not None
    assert (
        q.engine._client.hlen(q.engine._keys.meta) == 0
        and q.engine._client.zcard(q.engine._keys.finished) == 1
    )


def test_ack_many(q: Queue) -> None:
    q.publish_many(range(5))
    msgs, _ = q.claim(5)
    assert q.ack_many(msgs) == [True] * 5
    assert q.ack_many(msgs) == [False] * 5
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}


def test_stale_token_is_rejected_everywhere(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    q.publish("x")
    first = q.get()
    assert first is not None
    expire_leases(redis_client, q)
    assert q.scan().recovered == 1
    second = q.get()
    assert second is not None and second.token != first.token and second.attempt == 2
    before = snapshot(redis_client, prefix)
    assert q.ack(first) is False
    assert q.nack(first, "late") is None
    assert q.touch(first, progress=0.5) is None
    assert snapshot(redis_client, prefix) == before
    assert q.ack(second)


def test_stale_token_rejected_while_back_in_line(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("x")
    first = q.get()
    assert first is not None
    expire_leases(redis_client, q)
    q.scan()
    assert q.state(first.tag) == "ready"
    assert q.ack(first) is False and q.state(first.tag) == "ready"


def test_expired_but_unrecovered_lease_can_still_ack(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("x")
    msg = q.get()
    assert msg is not None
    expire_leases(redis_client, q)
    assert q.ack(msg) is True


def test_nack_retries_with_backoff_then_dies(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=2, retry_backoff={"base": 10, "max": 100, "jitter": 0})
    tag = q.publish("x")
    msg = q.get()
    assert msg is not None and q.nack(msg, "first failure") == "retry"
    info = q.info(tag)
    assert info is not None and info.state == "delayed" and info.last_error == "first failure"
    assert info.run_at is not None
    wait = (info.run_at - datetime.now(UTC)).total_seconds()
    assert 9 < wait <= 10  # base * 2**0
    q.nack(q.get() or _promote(q, tag), "2nd", retry_in=0)
    assert q.state(tag) == "ready"
    msg3 = q.get()
    assert msg3 is not None and msg3.attempt == 3
    assert q.nack(msg3, "third") == "dead"
    info = q.info(tag)
    assert info is not None and info.state == "dead" and info.last_error == "third"
    assert info.attempts == 3 and info.died_at is not None
    assert not q.exists(tag)
    assert q.counts()["dead"] == 1


def _promote(q: Queue, tag: str) -> Any:
    q.engine._client.zadd(q.engine._keys.delayed, {tag: 0}, xx=True)
    return q.get()


def test_nack_dead_now(q: Queue) -> None:
    tag = q.publish("x")
    assert q.nack(q.get(), "unknown task", dead=True) == "dead"  # type: ignore[arg-type]
    assert q.state(tag) == "dead"


def test_retry_goes_to_back_of_its_priority(q: Queue) -> None:
    a, b = q.publish("a"), q.publish("b")
    msg = q.get()
    assert msg is not None and msg.tag == a
    q.nack(msg, retry_in=0)
    assert q.rank(b) == 0 and q.rank(a) == 1


def test_touch_extends_lease_and_records_progress(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue(visibility_timeout=1)
    tag = q.publish("x")
    msg = q.get()
    assert msg is not None
    deadline = q.touch(msg, extend=60, progress=0.25, note="a quarter")
    assert deadline is not None and deadline > datetime.now(UTC) + timedelta(seconds=55)
    info = q.info(tag)
    assert info is not None and info.progress is not None
    assert info.progress["v"] == 0.25 and info.progress["n"] == "a quarter"
    with pytest.raises(InvalidArgument):
        q.touch(msg, progress=1.5)


def test_per_job_visibility_timeout(q: Queue) -> None:
    q.publish("x", visibility_timeout=2)
    msg = q.get()
    assert msg is not None
    assert msg.lease_deadline < datetime.now(UTC) + timedelta(seconds=3)


def test_expired_lease_is_recovered_or_buried(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue(max_retries=1)
    tag = q.publish("x")
    q.get()
    expire_leases(redis_client, q)
    assert q.scan().recovered == 1
    info = q.info(tag)
    assert info is not None and info.state == "ready" and info.attempts == 1
    assert info.last_error is not None and "lease expired" in info.last_error
    q.get()
    expire_leases(redis_client, q)
    result = q.scan()
    assert result.buried == 1 and q.state(tag) == "dead"
    assert q.stats()["expired"] == 2


def test_one_scan_step_recovers_and_buries_many(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue(max_retries=1)
    tags = q.publish_many(range(6))
    q.claim(4, "c")  # attempt 1 of 2: retried after expiry
    expire_leases(redis_client, q)
    result = q.scan()
    assert (result.recovered, result.buried) == (4, 0)
    assert sorted(q.rank(t) for t in tags) == list(range(6))  # one line, no gaps
    assert [q.rank(t) for t in tags[4:]] == [0, 1]  # the untouched ones stay ahead
    for t in tags[:4]:
        info = q.info(t)
        assert info is not None and info.state == "ready" and info.attempts == 1
        assert info.last_error is not None and "attempt 1 of 2" in info.last_error
    q.claim(2, "c")  # the two untouched jobs: attempt 1
    claimed, _ = q.claim(4, "c")  # the four retried ones: attempt 2 of 2
    assert {m.tag for m in claimed} == set(tags[:4])
    expire_leases(redis_client, q)
    result = q.scan()
    assert (result.recovered, result.buried) == (2, 4)
    dead = q.dead_letters(limit=10)
    assert {j.tag for j in dead} == set(tags[:4])
    scores = [s for _, s in redis_client.zrange(q.engine._keys.dead, 0, -1, withscores=True)]
    assert len(set(scores)) == 4  # each death keeps its own place in order
    assert q.counts() == {"ready": 2, "delayed": 0, "inflight": 0, "dead": 4}
    assert q.stats()["expired"] == 10 and q.stats()["dead"] == 4
    assert q.stats()["retried"] == 6


def test_big_claim_is_sent_as_short_calls_in_rank_order(q: Queue) -> None:
    tags = q.publish_many(range(600))
    msgs, hint = q.claim(555, "c")
    assert hint is None and [m.tag for m in msgs] == tags[:555]
    assert len({m.token for m in msgs}) == 555
    assert q.counts()["inflight"] == 555 and q.rank(tags[555]) == 0
    rest, _ = q.claim(1000, "c")
    assert [m.tag for m in rest] == tags[555:]
    assert q.claim(1000, "c") == ([], None)


def test_real_lease_expiry(make_queue: QueueFactory) -> None:
    q = make_queue(visibility_timeout=1)  # the shortest lease allowed
    tag = q.publish("x")
    assert q.get() is not None
    assert q.scan().recovered == 0
    time.sleep(1.1)
    assert q.scan().recovered == 1 and q.state(tag) == "ready"


# ---------------------------------------------------------------- global limits


def test_concurrency_limit_is_global(make_queue: QueueFactory) -> None:
    q = make_queue(concurrency=3)
    other_consumer = make_queue(concurrency=3)  # same queue, another client object
    q.publish_many(range(10))
    assert len(q.claim(2)[0]) == 2
    got = other_consumer.claim(10)[0]
    assert len(got) == 1
    assert q.claim(10)[0] == []
    q.ack(got[0])
    assert len(q.claim(10)[0]) == 1


def test_qps_limit_is_a_token_bucket(make_queue: QueueFactory) -> None:
    q = make_queue(qps=5)
    q.publish_many(range(20))
    assert len(q.claim(100)[0]) == 5  # burst of one second's worth
    msgs, hint = q.claim(100)
    assert msgs == [] and hint is not None and 0 < hint <= 0.2
    time.sleep(0.45)
    assert 1 <= len(q.claim(100)[0]) <= 3


def test_ack_wakes_waiters_when_concurrency_limited(make_queue: QueueFactory) -> None:
    q = make_queue(concurrency=1)
    q.publish_many(range(2))
    first = q.get()
    assert first is not None
    assert q.get() is None  # the limit holds
    q.engine._client.delete(q.engine._keys.notify)
    q.ack(first)
    assert (
        q.engine._client.llen(q.engine._keys.notify) == 1
    )  # the freed slot wakes a waiting consumer
    second = q.get()
    assert second is not None


# ---------------------------------------------------------------- waiting


def test_get_wakes_on_publish(q: Queue) -> None:
    q.engine._client.delete(q.engine._keys.notify)
    threading.Timer(0.2, q.publish, args=("late",)).start()
    msg = q.get(timeout=4)
    assert msg is not None and msg.body == "late"


def test_get_times_out_empty(q: Queue) -> None:
    t0 = time.monotonic()
    assert q.get(timeout=0.3) is None
    assert time.monotonic() - t0 >= 0.25


def test_subscribe_yields_in_batches_until_idle(q: Queue) -> None:
    tags = q.publish_many(range(25))
    got = [m.tag for m in q.subscribe(batch_size=10, timeout=0.2)]
    assert got == tags


def test_subscribe_wakes_for_a_delayed_job(q: Queue) -> None:
    tag = q.publish("later", delay=0.3)
    got = [m.tag for m in q.subscribe(timeout=1.0)]
    assert got == [tag]


# ---------------------------------------------------------------- inspection and removal


def test_counts_and_stats(q: Queue) -> None:
    q.publish_many(range(3))
    q.publish("d", delay=60)
    msg = q.get()
    assert q.counts() == {"ready": 2, "delayed": 1, "inflight": 1, "dead": 0}
    q.ack(msg)  # type: ignore[arg-type]
    stats = q.stats()
    assert stats["enqueued"] == 4 and stats["claimed"] == 1 and stats["acked"] == 1


def test_delete_by_state(q: Queue) -> None:
    r, d = q.publish("r"), q.publish("d", delay=60)
    leased = q.publish("l", priority=1)
    assert q.get().tag == leased  # type: ignore[union-attr]
    assert q.delete(r) and q.delete(d)
    assert not q.delete(leased) and q.state(leased) == "leased"
    assert not q.delete("nope")
    assert q.info(r) is None and q.info(d) is None


def test_dead_letters_requeue_and_purge(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    tags = q.publish_many(range(5))
    for i in range(5):
        msg = q.get()
        assert msg is not None and q.nack(msg, f"boom {i}") == "dead"
    page = q.dead_letters(limit=2)
    assert [i.tag for i in page] == [tags[4], tags[3]]
    assert page[0].last_error == "boom 4"
    assert [i.tag for i in q.dead_letters(offset=2, limit=10)] == tags[2::-1]
    assert q.requeue_dead(tags[0]) and not q.requeue_dead(tags[0])
    info = q.info(tags[0])
    assert info is not None and info.state == "ready" and info.attempts == 0
    assert q.purge_dead() == 4
    assert q.counts()["dead"] == 0 and q.info(tags[1]) is None


def test_dead_letters_bounded_by_count(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0, dead_letter_max=3)
    tags = q.publish_many(range(6))
    for _ in range(6):
        q.nack(q.get(), "x")  # type: ignore[arg-type]
    assert [i.tag for i in q.dead_letters()] == tags[:2:-1]
    assert q.info(tags[0]) is None  # record removed with the letter


def test_dead_letters_bounded_by_age(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0, dead_letter_ttl=0.2)
    tag = q.publish("x")
    q.nack(q.get(), "x")  # type: ignore[arg-type]
    assert q.state(tag) == "dead"
    time.sleep(0.3)
    assert q.scan().trimmed == 1 and q.info(tag) is None


def test_scan_is_bounded(make_queue: QueueFactory, redis_client: redis.Redis) -> None:
    q = make_queue()
    q.publish_many(range(25), delay=60)
    for tag in redis_client.zrange(q.engine._keys.delayed, 0, -1):
        redis_client.zadd(q.engine._keys.delayed, {tag: 0}, xx=True)
    first = q.scan(limit=10)
    assert first.promoted == 10 and first.more
    q.scan(limit=10)
    last = q.scan(limit=10)
    assert last.promoted == 5 and not last.more
    assert q.total_count() == 25


def test_undecodable_body_is_delivered_raw(q: Queue) -> None:
    q.publish("x", tag="t")
    set_body(q.engine._client, q.engine._keys, "t", b"\xff not json")
    msg = q.get()
    assert msg is not None and msg.body is None and msg.raw_body == b"\xff not json"


def test_clear_removes_every_key(q: Queue, redis_client: redis.Redis, prefix: str) -> None:
    q.publish_many(range(3))
    q.get()
    q.clear()
    assert snapshot(redis_client, prefix) == {}


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "unix:///nonexistent/redis.sock"])
def test_redis_unreachable_raises_queue_unavailable(url: str) -> None:
    config = Config(redis_url=url, socket_timeout=0.5, socket_connect_timeout=0.5)
    q = Queue("q", QueueOptions(), prefix="zqt-down", client=make_client(config))
    with pytest.raises(QueueUnavailable) as err:
        q.publish("x")
    assert isinstance(err.value.__cause__, redis.ConnectionError)
    with pytest.raises(QueueUnavailable):
        q.rank("x")


def test_silent_redis_times_out_as_queue_unavailable() -> None:
    """A server that accepts connections but never answers: the socket timeout applies."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(5)
        port = server.getsockname()[1]
        config = Config(
            redis_url=f"redis://127.0.0.1:{port}/0", socket_timeout=0.3, socket_connect_timeout=0.3
        )
        q = Queue("q", QueueOptions(), prefix="zqt-down", client=make_client(config))
        with pytest.raises(QueueUnavailable) as err:
            q.total_count()
        assert isinstance(err.value.__cause__, redis.TimeoutError)


def test_script_flush_is_survived(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("a")
    lose_scripts(redis_client)
    assert q.get() is not None


def test_ack_keeps_result_with_ttl(q: Queue, redis_client: redis.Redis) -> None:
    tag = q.publish("x")
    msg = q.get()
    assert msg is not None and q.ack(msg, result={"sum": 3}, result_ttl=60)
    assert q.result(tag) == {"sum": 3}
    assert 55_000 < redis_client.pttl(q.engine._keys.result(tag)) <= 60_000
    with pytest.raises(LookupError):
        q.result("other")


def test_release_returns_job_without_counting_the_attempt(q: Queue) -> None:
    tag = q.publish("x")
    msg = q.get()
    assert msg is not None and q.release(msg)
    info = q.info(tag)
    assert info is not None and info.state == "ready" and info.attempts == 0
    assert q.release(msg) is False
    again = q.get()
    assert again is not None and again.attempt == 1


def test_release_keeps_the_place_in_line(q: Queue) -> None:
    tags = q.publish_many(range(5))
    msgs, _ = q.claim(3, "c")
    q.publish("later")
    assert all(q.release(m) for m in reversed(msgs))
    assert [q.rank(t) for t in tags] == [0, 1, 2, 3, 4]
    assert [m.tag for m in q.claim(5, "c")[0]] == tags


def test_cancel_waiting_and_running_jobs_not_dead_ones(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    ready, delayed = q.publish("r"), q.publish("d", delay=60)
    dead = q.publish("x", priority=5)
    q.nack(q.get(), "boom")  # type: ignore[arg-type]
    leased = q.publish("l", priority=5)
    q.get()
    assert q.cancel(ready) and q.cancel(delayed)
    assert not q.cancel(dead) and q.state(dead) == "dead"
    assert q.cancel(leased) and q.state(leased) is None  # a running job: see test_control


def test_touch_default_uses_the_jobs_own_visibility_timeout(q: Queue) -> None:
    q.publish("short", visibility_timeout=2)
    q.publish("default")
    short, default = q.claim(2)[0]
    d1, d2 = q.touch(short), q.touch(default)
    assert d1 is not None and d2 is not None
    assert d1 < datetime.now(UTC) + timedelta(seconds=3)
    assert d2 > datetime.now(UTC) + timedelta(seconds=290)


def test_death_under_concurrency_limit_wakes_a_waiter(make_queue: QueueFactory) -> None:
    q = make_queue(concurrency=1, max_retries=0)
    q.publish_many(range(2))
    first = q.get()
    assert first is not None
    q.engine._client.delete(q.engine._keys.notify)
    q.nack(first, "boom")
    assert q.engine._client.llen(q.engine._keys.notify) == 1


def test_per_minute_series(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    q.publish_many(range(5))
    for m in q.claim(3)[0][:2]:
        q.ack(m)
    q.nack(q.get() or q.claim(1)[0][0], "x")  # type: ignore[arg-type]
    rows = q.minutes(3)
    assert [r["minute"] for r in rows] == sorted(r["minute"] for r in rows)
    now = rows[-1]
    assert now["enqueued"] == 5 and now["acked"] == 2 and now["failed"] == 1
    assert now["dead"] == 1 and now["ready"] == 1  # the current minute: the depth now
    q.scan()  # the scanner samples the depth into the ring
    secs, _ = q.engine._client.time()
    raw = {k.decode(): int(v) for k, v in q.engine._client.hgetall(q.engine._keys.stats).items()}
    slot = (int(secs) // 60) % 64
    assert raw[f"m{slot}"] == int(secs) // 60 and raw[f"r{slot}"] == 1
    assert "e" not in q.stats() and q.stats()["enqueued"] == 5
    # the ring stays bounded: at most 64 slots x 7 fields besides the counters
    assert q.engine._client.hlen(q.engine._keys.stats) <= 64 * 7 + 20


def test_series_slot_is_reset_when_reused(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("x")
    rows = q.minutes(1)
    slot = rows[-1]["minute"] % 64
    redis_client.hset(
        q.engine._keys.stats, mapping={f"m{slot}": rows[-1]["minute"] - 64, f"e{slot}": 99}
    )
    q.publish("y")
    assert q.minutes(1)[-1]["enqueued"] == 1  # stale slot of an hour ago was reset


def test_pipelines_survive_script_flush_without_running_twice(
    q: Queue, redis_client: redis.Redis
) -> None:
    q.publish_many(range(3))
    msgs, _ = q.claim(3)
    lose_scripts(redis_client)
    assert q.ack_many(msgs) == [True, True, True]  # replayed once after NOSCRIPT
    assert q.stats()["acked"] == 3  # each ack ran exactly once
    assert q.ack_many(msgs) == [False, False, False]


def test_plain_evalsha_pipeline_sends_no_script_exists(q: Queue, redis_client: redis.Redis) -> None:
    q.publish_many(range(5))
    msgs, _ = q.claim(5)
    before = redis_client.info("commandstats").get("cmdstat_script|exists", {}).get("calls", 0)
    q.ack_many(msgs)
    after = redis_client.info("commandstats").get("cmdstat_script|exists", {}).get("calls", 0)
    assert after == before


def test_generated_tags_never_start_with_a_dash() -> None:
    from django_zqueue.queue import new_tag

    tags = [new_tag() for _ in range(3000)]  # base64url would start ~1 in 64 with "-"
    assert all(len(t) == 12 and not t.startswith("-") for t in tags)
    assert all(set(t) <= set(string.ascii_letters + string.digits + "._") for t in tags)
    assert len(set(tags)) == 3000


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_generated_tags_differ_across_threads_and_a_forked_child() -> None:
    """Tags come from a per-process pool: threads popping it at once never get the same
    one, and a child forked with a full pool does not hand out the parent's."""
    from django_zqueue.queue import new_tag

    new_tag()  # the pool is full now (255 left), and the child inherits a copy of it
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: 300 tags to the parent, then exit at once
        try:
            os.write(write, " ".join(new_tag() for _ in range(300)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child = f.read().split()
    os.waitpid(pid, 0)
    got: list[list[str]] = [[] for _ in range(4)]

    def take(out: list[str]) -> None:
        out.extend(new_tag() for _ in range(2000))

    threads = [threading.Thread(target=take, args=(out,)) for out in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mine = [t for out in got for t in out]
    assert len(child) == 300 and len(set(mine)) == len(mine) == 8000
    assert not set(child) & set(mine)


def test_the_wake_up_list_is_filled_to_its_cap_and_never_past_it(q: Queue) -> None:
    """A publish pushes a token per job up to the cap, less the tokens not yet taken: a
    list at its cap (no consumer waiting) is only read, and a bulk publish never leaves
    more than the cap (nothing to trim)."""
    cap = q.engine.policy.notify_cap
    client, notify = q.engine._client, q.engine._keys.notify
    client.delete(notify)
    q.publish_many(range(3))
    assert client.llen(notify) == 3
    q.publish_many(range(cap + 10))
    assert client.llen(notify) == cap
    client.lpop(notify, 2)  # two consumers woke
    q.publish("one")
    assert client.llen(notify) == cap - 1
    q.publish_many(range(50))
    assert client.llen(notify) == cap
    client.rpush(notify, *["1"] * 4)  # more than the cap, as an older version left it
    q.publish("x")
    assert client.llen(notify) == cap + 4  # left as found: consumers take the extra tokens
    assert q.counts()["ready"] == 3 + cap + 10 + 1 + 50 + 1


@pytest.mark.parametrize("mode", ["strict", "aging"])
def test_one_job_on_a_tag_in_use_writes_nothing_whatever_its_state(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str, mode: str
) -> None:
    """One job claims its tag by writing its record (HSETNX, no read before it): a tag in
    use in any state is refused with that state, its record and every key left as they
    were, and no sequence number is spent."""
    q = make_queue(priority_mode=mode, max_retries=0)
    q.publish("x", tag="dead")
    q.nack(q.claim(1)[0][0], "boom")  # dead: no retries left
    q.publish("l", tag="leased")
    assert q.claim(1)[0][0].tag == "leased"
    q.publish("r", tag="ready")
    q.publish("d", tag="delayed", delay=60)
    assert {t: q.state(t) for t in ("ready", "delayed", "leased", "dead")} == {
        "ready": "ready",
        "delayed": "delayed",
        "leased": "leased",
        "dead": "dead",
    }
    before = snapshot(redis_client, prefix)
    for tag in ("ready", "delayed", "leased", "dead"):
        with pytest.raises(DuplicateJob) as err:
            q.publish("again", tag=tag)
        assert err.value.states == [tag]
        with pytest.raises(DuplicateJob):
            q.publish("again", tag=tag, delay=30, priority=4)
    assert snapshot(redis_client, prefix) == before
    q.publish("new", tag="fresh")
    assert q.state("fresh") == "ready"


def test_one_job_on_a_full_queue_writes_nothing(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    q = make_queue(max_length=2)
    q.publish("a", tag="a")
    q.publish("b", tag="b", delay=60)
    before = snapshot(redis_client, prefix)
    for tag in ("c", "a"):  # a new tag, and one in use: full either way, nothing written
        with pytest.raises(QueueFull):
            q.publish("c", tag=tag)
    assert snapshot(redis_client, prefix) == before
