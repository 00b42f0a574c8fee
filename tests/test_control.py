"""Job control in the queue core, on the real Redis: cancel (waiting and running), run
now, change priority, pause and resume (``cancel.lua``, ``run_now.lua``,
``set_priority.lua``, the pause key read by ``claim.lua``, ``touch.lua``'s cancel reply)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from django_zqueue import get_queue
from django_zqueue.engine.scripts import CANCELLED
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue

from .conftest import QueueFactory

# ------------------------------------------------------------------ cancel


def test_cancel_a_waiting_job_keeps_a_cancelled_record(q: Queue) -> None:
    ready, delayed = q.publish("r"), q.publish("d", delay=60)
    assert q.cancel_job(ready) == "waiting" and q.cancel(delayed)
    assert q.state(ready) is None and q.state(delayed) is None
    rec = q.cancelled(ready)
    assert rec is not None and rec.was == "ready" and rec.consumer is None
    assert q.cancelled(delayed) is not None and q.cancelled(delayed).was == "delayed"  # type: ignore[union-attr]
    assert q.stats()["deleted"] == 2 and "cancelled" not in q.stats()
    assert q.claim(5)[0] == []  # never delivered


def test_cancel_a_running_job_takes_its_lease_at_once(q: Queue) -> None:
    tag = q.publish("x")
    msg = q.get()
    assert msg is not None
    assert q.cancel_job(tag) == "running"
    assert q.state(tag) is None and q.counts()["inflight"] == 0
    rec = q.cancelled(tag)
    assert rec is not None and rec.was == "leased" and rec.attempts == 1
    assert q.stats()["cancelled"] == 1
    # the delivery is stale for good: its heartbeat says cancelled, its outcome changes nothing
    assert q.engine.run(q.engine.consume.touch_call(msg)) == CANCELLED
    assert q.touch(msg) is None
    assert q.ack(msg) is False and q.nack(msg, "boom", retry_in=0) is None
    assert not q.release(msg)
    assert q.scan().recovered == 0
    assert q.claim(5)[0] == [] and q.state(tag) is None


def test_a_cancelled_running_job_is_never_recovered(make_queue: QueueFactory) -> None:
    q = make_queue(visibility_timeout=1)
    tag, other = q.publish("x"), q.publish("y")
    msgs = q.claim(2)[0]
    assert len(msgs) == 2 and q.cancel(tag)
    q.engine._client.zadd(
        q.engine._keys.leased, {other: 0}
    )  # the other lease expires: scan recovers it only
    assert q.scan().recovered == 1
    assert [m.tag for m in q.claim(5)[0]] == [other]
    assert q.state(tag) is None and q.counts()["dead"] == 0


def test_touch_of_another_delivery_is_stale_not_cancelled(q: Queue) -> None:
    tag = q.publish("x")
    first = q.get()
    assert first is not None and q.cancel(tag)
    q.publish("again", tag=tag)  # the tag is free again after a cancel
    second = q.get()
    assert second is not None and second.token != first.token
    assert q.engine.run(q.engine.consume.touch_call(first)) == CANCELLED  # the cancelled delivery
    assert q.engine.run(q.engine.consume.touch_call(second)) not in (
        None,
        CANCELLED,
    )  # the new one runs on


def test_cancel_refuses_dead_and_reports_missing(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    tag = q.publish("x")
    q.nack(q.get(), "boom")  # type: ignore[arg-type]
    assert q.cancel_job(tag) == "dead" and q.state(tag) == "dead"
    assert q.cancel_job("nope") == "missing" and q.cancelled("nope") is None


def test_cancelled_record_expires_with_its_ttl(q: Queue) -> None:
    tag = q.publish("x")
    assert q.cancel_job(tag, ttl=60) == "waiting"
    ms = q.engine._client.pttl(q.engine._keys.cancelled(tag))
    assert 0 < ms <= 60_000
    with pytest.raises(InvalidArgument):
        q.cancel_job(q.publish("y"), ttl=0)


def test_cancel_script_refuses_a_bad_ttl_and_writes_nothing(q: Queue) -> None:
    tag = q.publish("x")
    call = q.engine._shard_for(tag).cancel(tag, 0)
    with pytest.raises(Exception, match="ttl_ms"):
        q.engine.run(call)
    assert q.state(tag) == "ready" and q.cancelled(tag) is None


def test_a_corrupt_cancelled_record_reads_as_absent(q: Queue) -> None:
    q.engine._client.set(q.engine._keys.cancelled("t"), "not json")
    assert q.cancelled("t") is None


# ------------------------------------------------------------------ run now


def test_run_now_moves_a_ready_job_to_the_front(q: Queue) -> None:
    tags = [q.publish(i) for i in range(3)]
    urgent = q.publish("u", priority=10)
    assert q.run_now(tags[2])
    assert q.rank(tags[2]) == 0 and q.rank(urgent) == 1
    assert q.run_now(tags[2])  # already first: unchanged
    assert q.rank(tags[2]) == 0
    assert [m.tag for m in q.claim(4)[0]] == [tags[2], urgent, tags[0], tags[1]]


def test_run_now_promotes_a_delayed_job(q: Queue) -> None:
    first = q.publish("a")
    later = q.publish("b", delay=3600)
    assert q.run_now(later)
    assert q.state(later) == "ready" and q.rank(later) == 0 and q.rank(first) == 1


def test_run_now_refuses_running_dead_and_missing(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    dead = q.publish("d")
    q.nack(q.get(), "boom")  # type: ignore[arg-type]
    running = q.publish("r")
    q.get()
    assert not q.run_now(dead) and not q.run_now(running) and not q.run_now("nope")
    assert q.state(dead) == "dead" and q.state(running) == "leased"


def test_run_now_on_an_empty_line_and_at_the_lowest_score(q: Queue) -> None:
    later = q.publish("b", delay=3600)
    assert q.run_now(later) and q.rank(later) == 0
    q.publish("floor", score=-(2**53))
    other = q.publish("c")
    with pytest.raises(Exception, match="lowest exact score"):
        q.run_now(other)
    assert q.rank(other) == 2  # nothing written


def test_run_now_on_a_partitioned_queue_goes_ahead_of_every_partition(
    make_queue: QueueFactory,
) -> None:
    q = make_queue(partitions=4)
    tags = [q.publish(i, tag=f"job-{i}") for i in range(20)]
    last = tags[-1]
    assert q.run_now(last)
    assert q.rank(last) == 0
    assert q.read.page("ready", 0, 1)[0][0] == last  # first in the global order
    assert sorted(q.rank(t) for t in tags) == list(range(20))  # (claims go round-robin)


# ------------------------------------------------------------------ priority


def test_set_priority_moves_a_ready_job_into_its_new_band_in_fifo_order(q: Queue) -> None:
    a, b, c = q.publish("a"), q.publish("b"), q.publish("c")
    high1 = q.publish("h1", priority=5)
    high2 = q.publish("h2", priority=5)
    assert q.set_priority(b, 5)
    # b entered before h1 and h2: first among priority 5
    assert [m.tag for m in q.claim(5)[0]] == [b, high1, high2, a, c]


def test_set_priority_to_zero_and_back(q: Queue) -> None:
    a = q.publish("a", priority=3)
    b = q.publish("b")
    assert q.set_priority(a, 0)
    assert q.rank(a) == 0 and q.rank(b) == 1  # FIFO among priority 0
    assert q.set_priority(b, -1) and q.rank(b) == 1 and q.rank(a) == 0
    assert q.set_priority(a, -2) and q.rank(b) == 0


def test_set_priority_in_aging_mode(make_queue: QueueFactory) -> None:
    q = make_queue(priority_mode="aging", priority_aging_seconds=60)
    a = q.publish("a")
    b = q.publish("b")
    before = q.score(b)
    assert before is not None and q.set_priority(b, 1)
    assert q.rank(b) == 0 and q.rank(a) == 1
    assert q.score(b) == before - 60_000_000  # one priority step: 60 s of waiting, exact


def test_set_priority_of_a_delayed_job_applies_when_due(q: Queue) -> None:
    plain = q.publish("p")
    later = q.publish("l", delay=3600)
    assert q.set_priority(later, 9)
    assert q.run_now(plain)  # still ready, still first
    info = q.info(later)
    assert info is not None and info.priority == 9 and info.state == "delayed"


def test_set_priority_keeps_a_raw_score_in_place(q: Queue) -> None:
    raw = q.publish("r", score=5.0)
    before = q.score(raw)
    assert q.set_priority(raw, 100) and q.score(raw) == before


def test_set_priority_refuses_bad_input_and_non_waiting_jobs(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    tag = q.publish("x")
    with pytest.raises(InvalidArgument):
        q.set_priority(tag, 1001)
    with pytest.raises(Exception, match="priority"):
        q.engine.run(q.engine._shard_for(tag).set_priority(tag, 5000))  # the script checks too
    q.get()
    assert not q.set_priority(tag, 3) and not q.set_priority("nope", 3)


def test_set_priority_refuses_a_corrupt_record(q: Queue) -> None:
    tag = q.publish("x")
    q.engine._client.hset(q.engine._keys.meta, tag, "{not json")
    assert not q.set_priority(tag, 3)
    assert q.engine._client.hget(q.engine._keys.meta, tag) == b"{not json"


# ------------------------------------------------------------------ pause


def test_a_paused_queue_takes_jobs_and_hands_out_none(q: Queue) -> None:
    q.publish("a")
    q.pause()
    assert q.is_paused()
    q.publish("b")
    msgs, hint = q.claim(5)
    assert msgs == [] and hint is None  # nothing known: wait for a wake-up, as when idle
    assert q.get(timeout=0) is None
    assert q.counts()["ready"] == 2
    q.resume()
    assert not q.is_paused()
    assert len(q.claim(5)[0]) == 2


def test_pause_does_not_promote_delayed_jobs_in_claim(q: Queue) -> None:
    q.publish("soon", delay=0.001)
    q.pause()
    import time

    time.sleep(0.01)
    assert q.claim(1)[0] == [] and q.counts()["delayed"] == 1


def test_pause_survives_a_new_queue_object_and_resume_wakes_waiters(
    q: Queue, make_queue: QueueFactory
) -> None:
    q.pause()
    again = make_queue()
    assert again.is_paused()
    q.engine._client.delete(q.engine._keys.notify)
    again.resume()
    assert q.engine._client.llen(q.engine._keys.notify) == 1


def test_pause_covers_every_partition(make_queue: QueueFactory) -> None:
    q = make_queue(partitions=3)
    for i in range(6):
        q.publish(i, tag=f"t{i}")
    q.pause()
    assert all(q.engine._client.exists(s.keys.paused) for s in q.engine._shards)
    assert q.claim(6)[0] == []
    q.resume()
    assert len(q.claim(6)[0]) == 6


def test_clear_removes_the_pause(q: Queue) -> None:
    q.pause()
    q.clear()
    assert not q.is_paused()


def test_queue_command_pause_resume_status(
    zqueue_settings: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("zqueue_queue", "pause", "default")
    assert get_queue("default").is_paused()
    call_command("zqueue_queue", "status", "default")
    assert "paused" in capsys.readouterr().out
    call_command("zqueue_queue", "resume", "default")
    assert not get_queue("default").is_paused()
    call_command("zqueue_queue", "status", "default")
    assert "running" in capsys.readouterr().out
    with pytest.raises(CommandError, match="unknown queue"):
        call_command("zqueue_queue", "pause", "nope")


def test_job_command_shows_a_cancelled_job(
    zqueue_settings: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    q = get_queue("default")
    tag = q.publish("x")
    q.get(consumer="w1")
    q.cancel(tag)
    call_command("zqueue_job", "default", tag)
    out = capsys.readouterr().out
    assert "state: cancelled" in out and "was: leased" in out and "consumer: w1" in out
    with pytest.raises(CommandError, match="no job"):
        call_command("zqueue_job", "default", "never")


def test_overview_and_metrics_show_the_pause(zqueue_settings: dict[str, object]) -> None:
    from django_zqueue import read
    from django_zqueue.ops import metrics

    q = get_queue("default")
    q.pause()
    figures = {f.name: f for f in read.overview([q.engine, get_queue("other").engine])}
    assert figures["default"].paused and not figures["other"].paused
    if metrics.available():
        text = metrics.exposition([q]).decode()
        assert 'zqueue_paused{queue="default"} 1.0' in text


def test_claim_script_reads_the_pause_key_of_its_own_shard(
    q: Queue, redis_client: redis.Redis
) -> None:
    q.publish("a")
    redis_client.set(q.engine._keys.paused, "anything")
    assert q.engine.run(q.engine._shards[0].claim(1, "c")).messages == []
    redis_client.delete(q.engine._keys.paused)
    assert len(q.engine.run(q.engine._shards[0].claim(1, "c")).messages) == 1


@pytest.mark.parametrize(
    "options", [{"fairness": "groups"}, {"fairness": "groups", "group_concurrency": 1}]
)
def test_a_paused_fair_queue_hands_out_none(
    make_queue: QueueFactory, options: dict[str, Any]
) -> None:
    """claim_fair.lua obeys the pause as claim.lua does."""
    q = make_queue("fairpause", **options)
    q.publish("a", group="g1")
    q.publish("b", group="g2")
    q.pause()
    assert q.claim(5) == ([], None)
    q.resume()
    assert len(q.claim(5)[0]) == 2
