"""Every attempt's error: lua/_attempts.lua writes them, attempts.py reads them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User

from django_zqueue import Queue, get_queue
from django_zqueue.engine.records.attempts import (
    ATTEMPT_HEAD,
    ATTEMPT_TAIL,
    ATTEMPTS_KEPT,
    PREFIX,
    decode,
)

from .conftest import QueueFactory
from .test_admin import BASE, client_for, make_user, project  # noqa: F401


def _fail(q: Queue, tag: str, error: str) -> str:
    q.engine._client.zadd(q.engine._keys.delayed, {tag: 0}, xx=True)  # due now, if it waits
    msg = q.get(consumer="w1")
    assert msg is not None and msg.tag == tag
    return q.nack(msg, error, retry_in=0)


def test_each_attempt_keeps_its_error_number_time_and_consumer(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=2)
    tag = q.publish("x")
    assert _fail(q, tag, "first") == "retry"
    assert _fail(q, tag, "second") == "retry"
    assert _fail(q, tag, "third") == "dead"
    info = q.info(tag)
    assert info is not None and info.state == "dead"
    assert [(e.attempt, e.text) for e in info.errors] == [(1, "first"), (2, "second"), (3, "third")]
    assert info.last_error == "third"
    assert all(e.at_ms and e.at is not None and e.consumer == "w1" for e in info.errors)
    assert info.errors[0].at_ms <= info.errors[-1].at_ms  # type: ignore[operator]
    # the listing shows the last one
    listing = q.read.listing("dead", errors=True)
    assert listing.jobs[0].error == "third"


def test_at_most_the_last_attempts_are_kept(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=ATTEMPTS_KEPT + 3)
    tag = q.publish("x")
    for i in range(ATTEMPTS_KEPT + 3):
        assert _fail(q, tag, f"e{i + 1}") == "retry"
    info = q.info(tag)
    assert info is not None and len(info.errors) == ATTEMPTS_KEPT
    assert [e.attempt for e in info.errors] == list(range(4, ATTEMPTS_KEPT + 4))
    assert info.last_error == f"e{ATTEMPTS_KEPT + 3}"


def test_a_long_error_keeps_its_start_and_end(q: Queue) -> None:
    tag = q.publish("x")
    text = "H" * 2000 + "é" * 3000 + "the end"  # é: 2 bytes, cuts fall on characters
    _fail(q, tag, text)
    info = q.info(tag)
    assert info is not None
    kept = info.errors[-1].text
    assert kept.startswith("H" * 1024) and kept.endswith("éthe end")
    assert "bytes cut …]" in kept and "\ufffd" not in kept
    head, _, tail = kept.partition("\n[… ")
    assert len(head.encode()) <= ATTEMPT_HEAD
    assert len(tail.partition("…]\n")[2].encode()) <= ATTEMPT_TAIL


def test_a_plain_text_error_of_the_older_form_reads_as_one_attempt(
    q: Queue, redis_client: redis.Redis
) -> None:
    tag = q.publish("x")
    msg = q.get()
    assert msg is not None
    q.nack(msg, "", dead=True)
    redis_client.hset(q.engine._keys.errors, tag, "ValueError: written by the older version")
    info = q.info(tag)
    assert info is not None and info.last_error == "ValueError: written by the older version"
    assert len(info.errors) == 1 and info.errors[0].attempt is None and info.errors[0].at is None
    assert q.read.listing("dead", errors=True).jobs[0].error == info.last_error
    # a new failure keeps it as the first entry
    assert q.requeue_dead(tag)
    _fail(q, tag, "again")
    info = q.info(tag)
    assert info is not None
    assert [(e.attempt, e.text) for e in info.errors] == [
        (None, "ValueError: written by the older version"),
        (1, "again"),
    ]
    raw = redis_client.hget(q.engine._keys.errors, tag)
    assert raw is not None and raw.startswith(PREFIX)


def test_lease_expiry_records_an_attempt(q: Queue, redis_client: redis.Redis) -> None:
    tag = q.publish("x")
    msg = q.get(consumer="w2")
    assert msg is not None
    redis_client.zadd(q.engine._keys.leased, {tag: 0}, xx=True)
    q.scan()
    info = q.info(tag)
    assert info is not None and len(info.errors) == 1
    e = info.errors[0]
    assert e.attempt == 1 and e.consumer == "w2" and e.text.startswith("lease expired")


def test_decode_is_lenient() -> None:
    assert decode(None) == ()
    assert decode(b"zqa1:not json")[0].text == "zqa1:not json"
    assert decode(b"zqa1:[]")[0].text == "zqa1:[]"
    good = PREFIX + json.dumps([{"e": "x", "n": 2, "t": 5, "c": "w"}, 3]).encode()
    assert [(e.text, e.attempt, e.at_ms, e.consumer) for e in decode(good)] == [("x", 2, 5, "w")]
    assert decode(b"\xffbad")[0].text == "\ufffdbad"


# ---------------------------------------------------------------- the admin's job page


@pytest.mark.django_db
def test_the_job_page_lists_every_kept_attempt(project: dict[str, Any]) -> None:  # noqa: F811
    q = get_queue("default")
    tag = q.publish({"task": "t", "args": [], "kwargs": {}}, tag="tries")
    for i in range(2):
        q.engine._client.zadd(q.engine._keys.delayed, {tag: 0}, xx=True)
        msg = q.get(consumer=f"host:{i}")
        assert msg is not None
        q.nack(msg, f"ValueError: try {i + 1} <b>\nTraceback line", retry_in=0, dead=i == 1)
    root = client_for(User.objects.create_superuser("root", "r@example.com", "pw"))
    page = root.get(f"{BASE}q/default/job/", {"id": tag}).content.decode()
    assert 'id="zq-attempts"' in page and "Errors of the last 2 attempts kept" in page
    assert page.index("ValueError: try 2 &lt;b&gt;") < page.index("ValueError: try 1 &lt;b&gt;")
    assert "host:0" in page and "host:1" in page
    looker = client_for(make_user("looker", "view_queue"))
    hidden = looker.get(f"{BASE}q/default/job/", {"id": tag}).content.decode()
    assert 'id="zq-attempts"' not in hidden and "ValueError" not in hidden


def test_the_lua_helper_and_the_python_reader_agree_on_the_limits() -> None:
    from django_zqueue.engine.records import attempts
    from django_zqueue.engine.scripts import lua_file

    lua = lua_file("_attempts")
    for name in ("ATTEMPTS_KEPT", "ATTEMPT_HEAD", "ATTEMPT_TAIL"):
        assert f"local {name} = {getattr(attempts, name)}\n" in lua
    assert f"local ATTEMPTS_PREFIX = '{attempts.PREFIX.decode()}'\n" in lua
