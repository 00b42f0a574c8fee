"""Search as people type it (``queue.read.search``, ``search.lua``), on the real Redis:
arguments matched whatever JSON's spacing (``"user_id": 4242`` as the job page prints
it, ``"user_id":4242`` as it is stored), the field form (``user_id:4242``,
``args.0:abc``), the finished states (succeeded, cancelled, expired), the bounds of the
script's new arguments, and the admin's page showing each match's task and arguments."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from django.test import Client

from django_zqueue import get_queue
from django_zqueue.conf.bounds import MAX_FIELD_PATH_BYTES, MAX_FIELD_PATH_PARTS
from django_zqueue.engine.scripts import source
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue
from django_zqueue.read.search import field_of, parse, spacing_pattern

from .conftest import snapshot
from .records_util import to_json_layout
from .test_admin import BASE, payload_viewer, project  # noqa: F401


def tags_of(q: Queue, text: str, state: str = "ready") -> list[str]:
    r = q.read.search(text, state, 1000)
    assert r.done
    return [m.tag for m in r.matches]


def users(q: Queue) -> dict[str, str]:
    return {
        "4242": q.publish({"task": "t.mail", "args": ["abc"], "kwargs": {"user_id": 4242}}),
        "42420": q.publish({"task": "t.mail", "args": ["abcd"], "kwargs": {"user_id": 42420}}),
        "str": q.publish({"task": "t.mail", "args": [1, "x"], "kwargs": {"user_id": "4242"}}),
        "nested": q.publish({"task": "t.sync", "kwargs": {"user": {"id": 7, "ok": True}}}),
        "plain": q.publish({"user_id": 4242, "note": None}),  # not a task body
        "text": q.publish("user_id: 4242"),  # a JSON string, not an object
    }


def test_the_spacing_does_not_matter(q: Queue, redis_client: redis.Redis) -> None:
    u = users(q)
    as_stored = tags_of(q, '"user_id":4242')
    assert set(as_stored) == {u["4242"], u["42420"], u["plain"]}  # a substring: 42420 too
    for typed in (
        '"user_id": 4242',
        '"user_id" :  4242',
        '"user_id":\n    4242',
        ' "user_id": 4242',
    ):
        assert tags_of(q, typed) == as_stored, typed
    assert tags_of(q, '{"user_id": 4242, "note": null}') == [u["plain"]]
    assert tags_of(q, '["abc"], "kwargs": {"user_id"') == [u["4242"]]
    assert tags_of(q, '"user_id": 4242}') == [u["4242"]]  # the closing brace: 4242 only
    # a body stored with spaces (a JSON-layout record written by another producer)
    spaced = q.publish({"task": "t.old"})
    to_json_layout(redis_client, q.engine._keys, spaced)
    redis_client.hset(q.engine._keys.body, spaced, '{"task": "t.old", "kwargs": {"user_id": 99}}')
    assert tags_of(q, '"user_id":99') == [spaced] == tags_of(q, '"user_id": 99')


def test_the_field_form(q: Queue) -> None:
    u = users(q)
    # by value, and as text (the string body holds "user_id: 4242")
    assert set(tags_of(q, "user_id:4242")) == {u["4242"], u["str"], u["plain"], u["text"]}
    assert set(tags_of(q, 'user_id:"4242"')) == {u["4242"], u["str"], u["plain"]}
    assert set(tags_of(q, "user_id:4242.0")) == {u["4242"], u["plain"]}  # numerically
    assert tags_of(q, "kwargs.user_id:42420") == [u["42420"]]
    assert tags_of(q, "args.0:abc") == [u["4242"]]  # not "abcd": a value, not a substring
    assert tags_of(q, "args.1:x") == [u["str"]] and tags_of(q, "args.0:1") == [u["str"]]
    assert tags_of(q, "user.id:7") == [u["nested"]] == tags_of(q, "kwargs.user.id:7")
    assert tags_of(q, "user.ok:true") == [u["nested"]] and tags_of(q, "user.ok:false") == []
    assert tags_of(q, "note:null") == [u["plain"]]
    assert tags_of(q, "user:7") == [] and tags_of(q, "args.5:abc") == []  # a table; past the end
    assert tags_of(q, "user_id:") == [u["text"]]  # no value: a text, found in a string
    assert set(tags_of(q, "user_id: 4242")) == {u["4242"], u["str"], u["plain"], u["text"]}


def test_a_body_that_is_not_json_is_matched_by_text_only(
    q: Queue, redis_client: redis.Redis
) -> None:
    tag = q.publish({"task": "t", "kwargs": {"user_id": 5}})
    to_json_layout(redis_client, q.engine._keys, tag)
    redis_client.hset(q.engine._keys.body, tag, b'\xff{"user_id":5 not json')
    assert tags_of(q, "user_id:5") == [] and tags_of(q, '"user_id": 5') == [tag]


def test_finished_states_are_searched(make_queue: Any) -> None:
    q = make_queue("hist", keep_finished=100)
    done = q.publish({"task": "t.mail", "kwargs": {"user_id": 4242}})
    other = q.publish({"task": "t.mail", "kwargs": {"user_id": 1}})
    gone = q.publish({"task": "t.mail", "kwargs": {"user_id": 4242}})
    expiring = q.publish({"task": "t.mail", "kwargs": {"user_id": 4242}}, expires=0.05)
    msgs = {m.tag: m for m in q.claim(3)[0]}
    for m in msgs.values():
        q.ack(m, {"sent": True})
    q.publish({"task": "t.mail", "kwargs": {"user_id": 4242}}, tag="c1")
    assert q.cancel("c1")
    assert tags_of(q, "user_id:4242", "succeeded") == [t for t in msgs if t in (done, gone)]
    assert tags_of(q, '"user_id": 1', "succeeded") == [other]
    assert tags_of(q, '"user_id": 4242', "cancelled") == ["c1"]
    assert tags_of(q, "user_id:4242", "ready") == [expiring]
    time.sleep(0.1)  # the expiry passes (no timed assertion: the scan moves it)
    q.scan()
    assert q.state(expiring) == "expired"
    assert tags_of(q, "user_id:4242", "expired") == [expiring]
    # a kept record without its record (only the map of its end): matched by its tag
    hist = q.engine._keys.history
    q.engine._client.hset(hist, gone, b"\x81\xa2fa\x01")
    assert tags_of(q, "user_id:4242", "succeeded") == [done]
    assert tags_of(q, gone, "succeeded") == [gone]


def test_parse() -> None:
    assert parse("plain text").pattern is False and parse("plain text").needle == b"plain text"
    assert spacing_pattern('"a": 1') == '%"a%"%s*%:%s*1'
    assert spacing_pattern("[1, [2]]") == "%[%s*1%s*%,%s*%[%s*2%s*%]%s*%]"  # never two gaps
    assert spacing_pattern("100%.-x:") == "100%%%.%-x%s*%:"
    assert spacing_pattern("a\0:b") is None and spacing_pattern("no structure") is None
    assert field_of("args.0:abc") == ("args.0", "abc")
    assert field_of('user_id: "42"') == ("user_id", "42")
    assert field_of('"user_id": 42') is None and field_of("9x:1") is None
    parts = MAX_FIELD_PATH_PARTS
    assert field_of("a." + ".".join("b" * (parts - 1)) + ":1") is not None
    assert field_of("a." + ".".join("b" * parts) + ":1") is None  # one part too many: text only
    assert field_of("a" * (MAX_FIELD_PATH_BYTES + 1) + ":1") is None  # too long: text only
    with pytest.raises(InvalidArgument):
        parse("")


@pytest.mark.parametrize(
    "extra",
    [
        ("x",),  # an unknown kind
        ("p",),  # the text "%" is no pattern Lua reads
        ("", ".".join("a" * (MAX_FIELD_PATH_PARTS + 1)), "1"),  # a path of one part too many
        ("", "a" * 201, "1"),  # a path too long
        ("", "...", "1"),  # a path of no segment
        ("", "", "", "2"),  # kept is 0 or 1
    ],
)
def test_the_script_refuses_its_new_bounds_writing_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str, extra: tuple[str, ...]
) -> None:
    q.publish({"a": 1})
    before = snapshot(redis_client, prefix)
    keys = (q.engine._keys.ready, q.engine._keys.meta, q.engine._keys.body)
    with pytest.raises(redis.ResponseError, match="ZQ_BAD_ARGUMENT"):
        redis_client.eval(source("search"), 3, *keys, "%", "", "", 10, 10, *extra)
    assert snapshot(redis_client, prefix) == before


def test_the_old_arguments_still_search_plainly(q: Queue, redis_client: redis.Redis) -> None:
    """A caller of five arguments (an older client) gets the plain substring search."""
    tag = q.publish({"a": "50%"})
    keys = (q.engine._keys.ready, q.engine._keys.meta, q.engine._keys.body)
    reply = redis_client.eval(source("search"), 3, *keys, "50%", "", "", 10, 10)
    assert reply[5] == tag.encode()


@pytest.mark.django_db
def test_admin_search_shows_task_and_arguments_and_finished_states(
    project: dict[str, Any],  # noqa: F811
    payload_viewer: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    ready = q.publish({"task": "t.mail", "args": ["<b>x</b>"], "kwargs": {"user_id": 4242}})
    q.publish({"task": "t.mail", "kwargs": {"user_id": 4243}})
    url = f"{BASE}q/default/find/"
    r = payload_viewer.get(url, {"text": '"user_id": 4242', "state": "ready"})
    assert r.status_code == 200
    (row,) = r.context["rows"]
    assert row["m"].tag == ready and row["task"] == "t.mail"
    assert row["args"] == '{"args": ["<b>x</b>"], "kwargs": {"user_id": 4242}}'
    html = r.content.decode()
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert [
        row["m"].tag for row in payload_viewer.get(url, {"text": "user_id:4242"}).context["rows"]
    ] == [ready]
    (m,), _ = q.claim(1)
    q.ack(m, None)
    r = payload_viewer.get(url, {"text": "user_id:4242", "state": "succeeded"})
    assert [row["m"].tag for row in r.context["rows"]] == [ready]
    assert 'value="succeeded" selected' in r.content.decode()
    assert r.context["rows"][0]["task"] == "t.mail"
