"""The history of finished jobs (``keep_finished``, ``finished_ttl``; lua/_history.lua),
against a real Redis: what ack, ack_many and cancel keep, how the history is bounded by
count and age (in bounded steps, also by scan), ``Queue.finished()`` and ``Queue.info()``
after the end, what it costs nothing when off, and the admin's Finished tab and job page.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from django_zqueue import conf, get_queue
from django_zqueue.engine.records import Ack
from django_zqueue.engine.records.codec import split_kept, split_record
from django_zqueue.exceptions import ConfigurationError, InvalidArgument
from django_zqueue.queue import Queue
from django_zqueue.read import MAX_ENDED_MERGED

from .conftest import QueueFactory, snapshot
from .records_util import write_record
from .redis_server import redis_url
from .test_admin import Commands, client_for, make_user

BASE = "/admin/django_zqueue/queue/"


def finish(q: Queue, n: int, *, consumer: str = "w1", result: Any = None) -> list[str]:
    """Publish ``n`` task-like jobs, claim and ack them one by one; their tags, oldest
    first."""
    tags = q.publish_many([{"task": "app.tasks.add", "args": [i, i]} for i in range(n)])
    for _ in tags:
        msg = q.get(consumer=consumer)
        assert msg is not None
        assert q.ack(msg) if result is None else q.ack(msg, result=result)
    return tags


def history_size(q: Queue) -> tuple[int, int, int]:
    k = q.engine._keys
    return (
        int(q.engine._client.zcard(k.finished)),
        int(q.engine._client.zcard(k.cancels)),
        int(q.engine._client.hlen(k.history)),
    )


# ---------------------------------------------------------------- what is kept


def test_a_succeeded_job_keeps_its_record(q: Queue) -> None:
    q.publish({"task": "app.tasks.add", "args": [2, 3]}, tag="sum", priority=4, group="g1")
    msg = q.get(consumer="host:7:abcd")
    assert msg is not None
    engine = q.engine
    assert engine.run(engine.consume.ack_call(msg, 5, 60, run_ms=42))
    info = q.info("sum")
    assert info is not None and info.state == "succeeded"
    assert info.body == {"task": "app.tasks.add", "args": [2, 3]}
    assert (info.priority, info.group, info.attempts, info.consumer) == (4, "g1", 1, "host:7:abcd")
    assert info.run_ms == 42 and info.duration_ms == 42
    assert info.result == 5 and info.result_kept
    assert info.started_at is not None and info.finished_at is not None
    assert info.started_at <= info.finished_at and info.ended_at == info.finished_at
    assert info.rank is None and info.score is None and info.died_at is None
    # the record is the history's: its end, then the record as it was; none left in meta
    fields, body = split_kept(q.engine._client.hget(q.engine._keys.history, "sum"))  # type: ignore[arg-type]
    assert body == b'{"task":"app.tasks.add","args":[2,3]}'
    assert fields["rt"] == 42 and fields["fa"] >= fields["st"] and fields["p"] == 4
    assert (
        q.engine._client.hlen(q.engine._keys.meta) == 0
        and not q.exists("sum")
        and q.state("sum") is None
    )


def test_ack_many_keeps_every_job(q: Queue) -> None:
    tags = q.publish_many([{"n": i} for i in range(30)])
    msgs, _ = q.claim(30, consumer="w2")
    batch = q.engine.batch()
    replies = q.engine.consume.add_acks(batch, [Ack(m, run_ms=i) for i, m in enumerate(msgs)])
    q.engine.send(batch)
    q.engine.consume.settle_acks(replies)
    assert all(r.result() for r in replies)
    assert history_size(q) == (30, 0, 30)
    infos = {t: q.info(t) for t in tags}
    assert all(i is not None and i.state == "succeeded" for i in infos.values())
    assert [infos[m.tag].run_ms for m in msgs] == list(range(30))  # type: ignore[union-attr]
    assert {infos[t].body["n"] for t in tags} == set(range(30))  # type: ignore[union-attr,index]


def ack_many(q: Queue, msgs: list[Any]) -> None:
    batch = q.engine.batch()
    replies = q.engine.consume.add_acks(batch, [Ack(m) for m in msgs])
    q.engine.send(batch)
    q.engine.consume.settle_acks(replies)
    assert all(r.result() for r in replies)


def test_ack_many_keeps_the_count_bound_and_one_entry_per_tag(make_queue: QueueFactory) -> None:
    """ack_many's flushes: the history never holds more than keep_finished (below 100:
    no slack), the newest kept; a tag cancelled before leaves the cancelled index when
    its next job succeeds."""
    q = make_queue(keep_finished=5)
    tags = q.publish_many([{"n": i} for i in range(12)])
    msgs, _ = q.claim(12, consumer="w")
    for i in range(0, 12, 4):
        ack_many(q, msgs[i : i + 4])
        assert history_size(q) == (min(5, i + 4), 0, min(5, i + 4))
    kept = {j.tag for j in q.finished()}  # (the jobs of one flush share their end time)
    assert set(tags[8:]) < kept < set(tags[4:])
    q.publish("first", tag="x")
    q.cancel("x")
    assert history_size(q) == (5, 1, 6)
    q.publish("second", tag="x")
    ack_many(q, q.claim(1, consumer="w")[0])
    assert history_size(q) == (5, 0, 5)
    info = q.info("x")
    assert info is not None and info.state == "succeeded" and info.body == "second"


def test_a_kept_result_and_none(q: Queue) -> None:
    (with_result,) = finish(q, 1, result={"ok": [1, 2]})
    (without,) = finish(q, 1)
    a, b = q.info(with_result), q.info(without)
    assert a is not None and a.result == {"ok": [1, 2]} and a.result_kept
    assert b is not None and b.result is None and not b.result_kept
    q.engine._client.delete(
        q.engine._keys.result(with_result)
    )  # the result's TTL ran out: the job stays
    a = q.info(with_result)
    assert a is not None and a.state == "succeeded" and not a.result_kept


def test_json_layout_records_are_kept_with_their_body(q: Queue, redis_client: redis.Redis) -> None:
    """A job written by a release before the compact records (JSON record, body hash):
    its history record is compact, with its body."""
    tag = q.publish({"task": "old.task", "args": [1]})
    fields, body = split_record(redis_client.hget(q.engine._keys.meta, tag))  # type: ignore[arg-type]
    write_record(redis_client, q.engine._keys, tag, fields, body, layout="json")
    msg = q.get(consumer="old")
    assert msg is not None and q.ack(msg)
    other = q.publish({"task": "old.task", "args": [2]})
    fields, body = split_record(redis_client.hget(q.engine._keys.meta, other))  # type: ignore[arg-type]
    write_record(redis_client, q.engine._keys, other, fields, body, layout="json")
    assert q.ack_many([q.get(consumer="old")]) == [True]  # type: ignore[list-item]
    for t, args in ((tag, [1]), (other, [2])):
        info = q.info(t)
        assert info is not None and info.state == "succeeded" and info.consumer == "old"
        assert info.body == {"task": "old.task", "args": args}
        assert split_kept(redis_client.hget(q.engine._keys.history, t))[1]  # type: ignore[arg-type]
    assert (
        redis_client.hlen(q.engine._keys.body) == 0 and redis_client.hlen(q.engine._keys.meta) == 0
    )


def test_a_cancelled_job_is_kept(q: Queue) -> None:
    running = q.publish({"task": "app.tasks.slow"}, tag="r")
    waiting = q.publish({"task": "app.tasks.slow"}, tag="w")
    msg = q.get(consumer="w9")
    assert msg is not None and msg.tag == running
    assert q.cancel(waiting) and q.cancel(running)
    w, r = q.info(waiting), q.info(running)
    assert w is not None and w.state == "cancelled" and w.was == "ready" and w.attempts == 0
    assert r is not None and r.state == "cancelled" and r.was == "leased"
    assert r.consumer == "w9" and r.finished_at is not None and r.duration_ms is None
    assert r.body == {"task": "app.tasks.slow"} and not r.result_kept
    assert q.cancelled(running) is not None  # the cancel's own record is still written
    assert history_size(q) == (0, 2, 2)


def test_a_tag_has_one_entry_in_the_history(q: Queue) -> None:
    """A tag used again: its latest end replaces the earlier one (never two entries, so
    trimming one never drops the other's record)."""
    q.publish("first", tag="x")
    q.cancel("x")
    assert history_size(q) == (0, 1, 1)
    q.publish("second", tag="x")
    info = q.info("x")
    assert info is not None and info.state == "ready"  # a live job is shown as it is
    assert [j.state for j in q.finished()] == ["cancelled"]  # its history, apart
    q.ack(q.get())  # type: ignore[arg-type]
    assert history_size(q) == (1, 0, 1)
    info = q.info("x")
    assert info is not None and info.state == "succeeded" and info.body == "second"


def test_a_history_record_written_with_no_index_is_not_shown(q: Queue) -> None:
    """info answers from the index and the record together; either alone is no job."""
    (tag,) = finish(q, 1)
    q.engine._client.zrem(q.engine._keys.finished, tag)
    assert q.info(tag) is None
    q.engine._client.zadd(q.engine._keys.finished, {"ghost": 1})
    assert q.info("ghost") is None


# ---------------------------------------------------------------- bounded


def test_bounded_by_count_newest_kept(make_queue: QueueFactory) -> None:
    q = make_queue(keep_finished=5)
    tags = finish(q, 12)
    assert history_size(q) == (5, 0, 5)
    assert [j.tag for j in q.finished(state="succeeded")] == tags[::-1][:5]
    assert q.info(tags[0]) is None and q.info(tags[-1]) is not None


def test_bounded_by_age(make_queue: QueueFactory) -> None:
    q = make_queue(finished_ttl=0.2)
    old = finish(q, 3)
    time.sleep(0.25)
    new = finish(q, 1)
    assert len(q.finished()) == 4  # the age bound is the scanner's
    q.scan()
    assert [j.tag for j in q.finished()] == new
    assert all(q.info(t) is None for t in old)
    assert history_size(q) == (1, 0, 1)


def test_scan_trims_an_idle_queues_history(make_queue: QueueFactory) -> None:
    q = make_queue(finished_ttl=0.2, scan_batch=2)
    finish(q, 5)
    q.publish("x", tag="c")
    q.cancel("c")
    time.sleep(0.25)
    first = q.scan()
    assert first.trimmed == 3 and first.more  # at most scan_batch per index and step
    while q.scan().more:
        pass
    assert history_size(q) == (0, 0, 0)


def test_each_call_trims_a_bounded_number(make_queue: QueueFactory) -> None:
    """A lowered keep_finished is reached in bounded steps: an ack removes at most its own
    room plus scan_batch entries."""
    big = make_queue(keep_finished=100, scan_batch=3)
    finish(big, 40)
    q = make_queue(keep_finished=10, scan_batch=3)
    finish(q, 1)
    assert history_size(q) == (37, 0, 37)  # 41 - (1 + 3)
    while q.scan().more:
        pass
    assert history_size(q) == (10, 0, 10)


def test_a_big_history_is_trimmed_past_a_slack(make_queue: QueueFactory) -> None:
    """keep_finished >= 100: the write path trims once the history holds 1% more (at
    most scan_batch more), so that single acks are not trimmed one by one."""
    q = make_queue(keep_finished=200, scan_batch=100)
    finish(q, 202)
    assert history_size(q)[0] == 202  # within keep + 2
    finish(q, 1)
    assert history_size(q)[0] == 200


def test_turned_off_the_history_costs_nothing_and_empties(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    on = make_queue(keep_finished=50)
    finish(on, 3)
    off = make_queue(keep_finished=0)
    before = {k: v for k, v in snapshot(redis_client, prefix).items() if b"history" in k}
    # ack, ack_many and cancel touch no key of the history (none is passed to them)
    tags = off.publish_many(["a", "b", "c"])
    assert off.ack(off.get())  # type: ignore[arg-type]
    assert off.ack_many([off.get()]) == [True]  # type: ignore[list-item]
    assert off.cancel(tags[2])
    calls = [
        off.engine.consume.ack_call(off.get() or _publish_and_get(off), None, 60),
        off.engine._shards[0].cancel("x", 1000),
        off.engine._shards[0].ack_many([]),
    ]
    for call in calls:
        assert not set(call.keys) & set(off.engine._keys.history_keys()), call.script
    after = {k: v for k, v in snapshot(redis_client, prefix).items() if b"history" in k}
    assert after == before
    # the scanner empties what an earlier setting kept
    while off.scan().more:
        pass
    assert history_size(off) == (0, 0, 0)


def _publish_and_get(q: Queue) -> Any:
    q.publish("z")
    return q.get()


def test_options_are_validated() -> None:
    from django_zqueue.conf import queue_options

    assert queue_options(keep_finished=0).keep_finished == 0
    assert queue_options().keep_finished == 10_000 and queue_options().finished_ttl == 86400
    for bad in ({"keep_finished": -1}, {"keep_finished": 1.5}, {"keep_finished": True},
                {"finished_ttl": 0}, {"finished_ttl": 10**12}):  # fmt: skip
        with pytest.raises(ConfigurationError):
            queue_options(**bad)


# ---------------------------------------------------------------- Queue.finished()


def test_finished_lists_every_ending_newest_first(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    (ok,) = finish(q, 1)
    time.sleep(0.003)
    q.publish({"task": "app.tasks.fail"}, tag="bad")
    q.nack(q.get(), "RuntimeError: no")  # type: ignore[arg-type]
    time.sleep(0.003)
    q.publish("x", tag="gone")
    q.cancel("gone")
    time.sleep(0.003)
    q.publish("late", tag="late", expires=0.001)
    time.sleep(0.01)
    q.scan()
    assert q.state("late") == "expired"
    everything = q.finished()
    assert [(j.tag, j.state) for j in everything] == [
        ("late", "expired"),
        ("gone", "cancelled"),
        ("bad", "dead"),
        (ok, "succeeded"),
    ]
    dead = q.finished(state="dead")
    assert [j.tag for j in dead] == ["bad"] and dead[0].last_error == "RuntimeError: no"
    assert dead[0].died_at is not None and everything[0].expired_at is not None
    assert [j.tag for j in q.finished(limit=2, offset=1)] == ["gone", "bad"]
    assert q.finished(offset=10) == []
    page = q.read.finished()
    assert page.counts == {"succeeded": 1, "dead": 1, "cancelled": 1, "expired": 1}
    with pytest.raises(InvalidArgument):
        q.finished(state="ready")
    with pytest.raises(InvalidArgument):
        q.finished(offset=MAX_ENDED_MERGED)  # several states merged: the first 2,000 only
    assert q.finished(state="succeeded", offset=MAX_ENDED_MERGED) == []  # one state: any depth


def test_finished_of_a_partitioned_queue(make_queue: QueueFactory) -> None:
    q = make_queue(partitions=3, keep_finished=6)
    tags = []
    for i in range(9):
        tags.append(q.publish({"n": i}))
        q.ack(q.get())  # type: ignore[arg-type]
        time.sleep(0.002)
    got = [j.tag for j in q.finished(state="succeeded")]
    assert got == [t for t in tags[::-1] if t in got] and got[0] == tags[-1]  # newest first
    assert len(got) <= 6  # each partition keeps its share (2)
    for k in q.engine._part_keys:
        assert q.engine._client.zcard(k.finished) <= 2
    assert [j.tag for j in q.finished(limit=2, offset=1)] == got[1:3]
    assert all(q.info(t) is not None for t in got)


def test_a_queue_without_the_history_keys(q: Queue) -> None:
    """Keys written before the history existed: an empty history, nothing breaks."""
    q.publish("x")
    assert q.finished() == [] and q.read.finished().counts["succeeded"] == 0
    assert q.scan().trimmed == 0


# ---------------------------------------------------------------- the admin


@pytest.fixture
def project(prefix: str) -> Iterator[dict[str, Any]]:
    value = {
        **settings.ZQUEUE,
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "ENQUEUE_ON_COMMIT": False,
    }
    with override_settings(ZQUEUE=value):
        yield value
    conf.reset()


@pytest.fixture
def ended(project: dict[str, Any]) -> dict[str, str]:
    """In "default": a job that succeeded (with a result), one cancelled, one dead."""
    q = get_queue("default")
    q.publish({"task": "app.tasks.add", "args": [1, 2], "kwargs": {}}, tag="done")
    q.ack(q.get(consumer="host:1:beef"), result={"sum": "<b>3</b>"})  # type: ignore[arg-type]
    q.publish({"task": "app.tasks.slow", "args": [], "kwargs": {}}, tag="stopped")
    q.cancel("stopped")
    q.publish({"task": "app.tasks.fail", "args": [], "kwargs": {}}, tag="broken")
    q.nack(q.get(), "ValueError: <i>bad</i>", dead=True)  # type: ignore[arg-type]
    q.publish({"task": "app.tasks.add", "args": [5, 5], "kwargs": {}}, tag="waiting")
    return {"succeeded": "done", "cancelled": "stopped", "dead": "broken"}


@pytest.mark.django_db
def test_the_finished_tab(ended: dict[str, str]) -> None:
    c = client_for(make_user("payload", "view_queue", "view_payload"))
    r = c.get(f"{BASE}q/default/?state=finished")
    assert r.status_code == 200
    html = r.content.decode()
    for tag in ("done", "stopped", "broken"):
        assert f"?id={tag}" in html
    assert "?id=waiting" not in html
    assert html.index("?id=broken") < html.index("?id=stopped") < html.index("?id=done")
    assert "ValueError: &lt;i&gt;bad&lt;/i&gt;" in html and "host:1:beef" in html
    assert "zq-state-succeeded" in html and "zq-state-cancelled" in html
    tabs = r.context["tabs"]
    assert [t["count"] for t in tabs if t["state"] == "finished"] == [3]
    filters = {f["state"]: f["count"] for f in r.context["ended_filters"]}
    assert filters == {None: 3, "succeeded": 1, "dead": 1, "cancelled": 1, "expired": 0}
    r = c.get(f"{BASE}q/default/?state=finished&ended=succeeded")
    html = r.content.decode()
    assert "?id=done" in html and "?id=broken" not in html and "?id=stopped" not in html
    # the other tabs count the finished jobs too
    r = c.get(f"{BASE}q/default/")
    assert [t["count"] for t in r.context["tabs"] if t["state"] == "finished"] == [3]


@pytest.mark.django_db
def test_the_finished_tab_pages(project: dict[str, Any]) -> None:
    q = get_queue("default")
    tags = finish(q, 30)
    c = client_for(make_user("viewer", "view_queue"))
    r = c.get(f"{BASE}q/default/?state=finished&ended=succeeded&per_page=25&page=2")
    html = r.content.decode()
    assert r.context["page"].number == 2 and f"?id={tags[0]}" in html
    assert f"?id={tags[-1]}" not in html
    assert "state=finished" in r.context["prev_url"] and "ended=succeeded" in r.context["prev_url"]
    r = c.get(f"{BASE}q/default/?state=finished&page=99")  # past the end: the last page
    assert r.context["page"].number == 1 and f"?id={tags[-1]}" in r.content.decode()


@pytest.mark.django_db
def test_job_page_after_the_end(ended: dict[str, str]) -> None:
    c = client_for(make_user("payload", "view_queue", "view_payload"))
    r = c.get(f"{BASE}q/default/job/?id=done")
    assert r.status_code == 200
    html = r.content.decode()
    assert "zq-state-succeeded" in html and "app.tasks.add" in html and "host:1:beef" in html
    assert "&lt;b&gt;3&lt;/b&gt;" in html and 'id="zq-result-value"' in html
    assert "state=finished" in r.context["state_url"]
    r = c.get(f"{BASE}q/default/job/?id=stopped")
    assert r.status_code == 200 and "zq-state-cancelled" in r.content.decode()
    # the result is payload: hidden without view_payload
    viewer = client_for(make_user("viewer", "view_queue"))
    html = viewer.get(f"{BASE}q/default/job/?id=done").content.decode()
    assert "&lt;b&gt;3&lt;/b&gt;" not in html and "zq-result" in html
    # found by the search by tag
    r = c.get(f"{BASE}search/?q=done")
    assert r.status_code == 302 and r["Location"].endswith("/job/?id=done")


@pytest.mark.django_db
def test_finished_pages_read_few_commands_and_write_nothing(
    ended: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    redis_client: redis.Redis,
    prefix: str,
) -> None:
    c = client_for(make_user("payload", "view_queue", "view_payload"))
    c.get(BASE)  # warm up
    before = snapshot(redis_client, prefix)
    for url in (
        f"{BASE}q/default/?state=finished",
        f"{BASE}q/default/?state=finished&ended=dead",
        f"{BASE}q/default/job/?id=done",
        f"{BASE}search/?q=stopped",
    ):
        counter = Commands(monkeypatch)
        c.get(url)
        assert 0 < len(counter.names) <= 50, (url, counter.names)
        assert not {"KEYS", "SCAN", "HSCAN", "ZSCAN"} & set(counter.names), url
        monkeypatch.undo()
    assert snapshot(redis_client, prefix) == before
