"""The history of finished jobs, filtered (``Queue.finished(task=, error=, text=, since=,
until=)``, ``queue.read.finished_matching``) on the real Redis: by task, state, error
text, arguments (whatever the spacing, the field form) and the time a job ended; deep in
the history, bounded, and refusing bad filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.test import Client

from django_zqueue import get_queue
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue
from django_zqueue.read.finished_filter import (
    FinishedFilter,
    read_finished_filtered,
    text_matcher,
)

from .conftest import QueueFactory
from .test_admin import BASE, payload_viewer, project, viewer  # noqa: F401


def history(make_queue: QueueFactory) -> tuple[Queue, dict[str, str]]:
    q = make_queue("hist", keep_finished=10_000)
    tags = {
        "mail": q.publish({"task": "shop.mail", "kwargs": {"user_id": 4242}}),
        "mail2": q.publish({"task": "shop.mail", "kwargs": {"user_id": 7}}),
        "sync": q.publish({"task": "shop.sync", "args": ["abc", 1]}),
        "dead": q.publish({"task": "shop.pay", "kwargs": {"user_id": 4242}}),
    }
    msgs = {m.tag: m for m in q.claim(4)[0]}
    for name in ("mail", "mail2", "sync"):
        q.ack(msgs[tags[name]], None)
    q.nack(msgs[tags["dead"]], "CardDeclined: insufficient funds", dead=True)
    return q, tags


def test_filters_by_task_state_error_and_arguments(make_queue: QueueFactory) -> None:
    q, t = history(make_queue)
    assert {i.tag for i in q.finished(task="MAIL")} == {t["mail"], t["mail2"]}
    assert [i.tag for i in q.finished(task="shop.", state="dead")] == [t["dead"]]
    assert [i.tag for i in q.finished(error="carddeclined")] == [t["dead"]]
    assert {i.tag for i in q.finished(text='"user_id": 4242')} == {t["mail"], t["dead"]}
    assert {i.tag for i in q.finished(text="user_id:4242", state="succeeded")} == {t["mail"]}
    assert [i.tag for i in q.finished(text="args.0:abc")] == [t["sync"]]
    assert q.finished(text="args.0:ab") == [] and q.finished(task="nope") == []
    got = q.finished(task="shop.mail", text="user_id:7")
    assert [i.tag for i in got] == [t["mail2"]] and got[0].state == "succeeded"
    assert len(q.finished()) == 4  # no filter: the page as before


def test_filters_by_the_time_a_job_ended(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q, t = history(make_queue)
    now = datetime.now(UTC)
    # one job ended three hours ago (its score in the history's index moved back)
    three_h = (now - timedelta(hours=3)).timestamp() * 1000
    redis_client.zadd(q.engine._keys.finished, {t["sync"]: three_h})
    assert [i.tag for i in q.finished(until=now - timedelta(hours=2))] == [t["sync"]]
    recent = {i.tag for i in q.finished(since=now - timedelta(hours=1))}
    assert recent == {t["mail"], t["mail2"], t["dead"]}
    found = q.finished(text="args.0:abc", since=now - timedelta(hours=4))
    assert [i.tag for i in found] == [t["sync"]]
    with pytest.raises(InvalidArgument):
        q.finished(since=datetime(2026, 1, 1))  # naive
    with pytest.raises(InvalidArgument):
        q.finished(since=now, until=now - timedelta(seconds=1))


def test_deep_in_the_history_and_bounded(make_queue: QueueFactory) -> None:
    q = make_queue("deep", keep_finished=10_000)
    first = q.publish({"task": "t.old", "kwargs": {"user_id": 4242}})
    q.publish_many([{"task": "t.new", "args": [i]} for i in range(999)])
    for _ in range(10):
        msgs, _ = q.claim(100)
        for m in msgs:
            q.ack(m, None)
    flt = FinishedFilter(text="user_id:4242")
    got = read_finished_filtered(q.engine, flt, "succeeded", 10, budget_s=60)
    assert got.looked == 1000 and not got.more and [j.tag for j in got.jobs] == [first]
    cut = read_finished_filtered(
        q.engine, FinishedFilter(task="t.old"), "succeeded", max_looked=400
    )
    assert cut.jobs == [] and cut.looked == 400 and cut.more and cut.next_offset == 400
    rest = read_finished_filtered(
        q.engine, FinishedFilter(task="t.old"), "succeeded", offset=400, budget_s=60
    )
    assert [j.tag for j in rest.jobs] == [first]
    limited = q.read.finished_matching(FinishedFilter(task="t.new"), "succeeded", 5)
    assert len(limited.jobs) == 5 and limited.more and limited.looked == 5
    # every state: merged pages (a long budget: a loaded machine must not cut it short)
    merged = read_finished_filtered(q.engine, FinishedFilter(task="t.old"), None, 5, budget_s=60)
    assert [j.tag for j in merged.jobs] == [first], (merged.looked, merged.more)


@pytest.mark.parametrize(
    "kwargs",
    [{"task": "x" * 201}, {"error": "x" * 201}, {"text": "x" * 1001}, {"text": ""}],
)
def test_bad_filters_are_refused(make_queue: QueueFactory, kwargs: dict[str, Any]) -> None:
    q = make_queue("bad")
    if kwargs.get("text") == "":
        assert q.finished(**kwargs) == []  # an empty filter is no filter
        return
    with pytest.raises(InvalidArgument):
        q.finished(**kwargs)


def test_the_python_matcher_agrees_with_the_script() -> None:
    body = {"task": "t", "args": ["abc", None, True], "kwargs": {"user_id": 4242, "n": None}}
    for text, want in [
        ('"user_id": 4242', True),
        ('"user_id" :4242,', True),
        ("user_id:4242.0", True),
        ('user_id:"4242"', True),
        ("args.0:abc", True),
        ("args.1:null", True),
        ("args.2:true", True),
        ("n:null", True),
        ("args.0:ab", False),
        ("user_id:42", False),
        ("kwargs:1", False),
        ("T", False),
    ]:
        assert text_matcher(text)("tag", body) is want, text
    assert text_matcher("tag")("a-tag", "x")  # the tag too


# ---------------------------------------------------------------- the Finished tab


@pytest.mark.django_db
def test_the_finished_tab_finds_a_job_of_three_hours_ago_by_an_argument(
    project: dict[str, Any],  # noqa: F811
    payload_viewer: Client,  # noqa: F811
    viewer: Client,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    q = get_queue("default")
    old = q.publish({"task": "shop.mail", "kwargs": {"user_id": 4242}})
    q.publish_many([{"task": "shop.mail", "kwargs": {"user_id": i}} for i in range(300)])
    for _ in range(4):
        for m in q.claim(100)[0]:
            q.ack(m, None)
    three_h = (datetime.now(UTC) - timedelta(hours=3)).timestamp() * 1000
    redis_client.zadd(q.engine._keys.finished, {old: three_h})
    url = f"{BASE}q/default/"
    r = payload_viewer.get(url, {"state": "finished", "args": '"user_id": 4242'})
    assert r.status_code == 200
    assert [row.tag for row in r.context["page"].rows] == [old]
    html = r.content.decode()
    assert "1 job found among the 301 newest read." in html and 'id="zq-history-filter"' in html
    r = payload_viewer.get(url, {"state": "finished", "args": "user_id:4242", "since": "1h"})
    assert r.context["page"].rows == []  # it ended three hours ago
    r = payload_viewer.get(url, {"state": "finished", "args": "user_id:4242", "since": "24h"})
    assert [row.tag for row in r.context["page"].rows] == [old]
    r = payload_viewer.get(url, {"state": "finished", "task": "shop.mail", "ended": "succeeded"})
    assert len(r.context["page"].rows) == 50 and r.context["history"].more_url
    more = payload_viewer.get(r.context["history"].more_url)
    assert len(more.context["page"].rows) == 50
    assert not {x.tag for x in more.context["page"].rows} & {x.tag for x in r.context["page"].rows}
    # the arguments filter is payload: without view_payload it is not offered nor applied
    r = viewer.get(url, {"state": "finished", "args": "user_id:4242"})
    assert r.context["history"] is None and 'name="args"' not in r.content.decode()
    r = payload_viewer.get(url, {"state": "finished", "args": "x" * 1001})
    assert r.status_code == 200 and "search needs a text" in r.content.decode()


def test_an_arguments_text_pages_its_matches_newest_first(make_queue: QueueFactory) -> None:
    """With a text, the state's set is searched by search.lua, then the other filters;
    ``offset`` counts matches."""
    q = make_queue("pages", keep_finished=10_000)
    tags = q.publish_many(
        [
            {"task": "t.even" if i % 2 == 0 else "t.odd", "kwargs": {"lang": "en"}}
            for i in range(120)
        ]
    )
    for m in q.claim(120)[0]:
        q.ack(m, None)
    flt = FinishedFilter(text='"lang": "en"')
    seen: list[str] = []
    offset = 0
    for _ in range(5):
        got = read_finished_filtered(q.engine, flt, "succeeded", 50, offset, budget_s=60)
        seen += [j.tag for j in got.jobs]
        if not got.more:
            break
        offset = got.next_offset
    assert len(seen) == 120 == len(set(seen)) and set(seen) == set(tags)
    ended = [
        j.ended_ms
        for j in read_finished_filtered(q.engine, flt, "succeeded", 120, budget_s=60).jobs
    ]
    assert ended == sorted(ended, reverse=True)
    both = FinishedFilter(task="t.even", text='"lang":"en"')
    got = read_finished_filtered(q.engine, both, None, 1000, budget_s=60)
    assert {j.tag for j in got.jobs} == set(tags[0::2]) and not got.more
