"""Every failed attempt's error, read back once the job has ended (succeeded or
cancelled, kept in the history of finished jobs), and no phantom entry for a job that
never failed."""

from __future__ import annotations

from pathlib import Path

import redis

from django_zqueue import Queue, get_queue
from django_zqueue.engine.records.attempts import PREFIX, decode
from django_zqueue.engine.records.codec import pack_value, unpack_one
from django_zqueue.worker import Worker
from testproject.demo import tasks

from .conftest import QueueFactory


def _fail(q: Queue, tag: str, error: str) -> None:
    msg = q.get(consumer="w1")
    assert msg is not None and msg.tag == tag
    assert q.nack(msg, error, retry_in=0) == "retry"


def test_a_job_that_never_failed_has_no_error_entry(q: Queue) -> None:
    tag = q.publish("x")
    live = q.info(tag)
    assert live is not None and live.state == "ready"
    assert live.errors == () and live.last_error is None
    msg = q.get()
    assert msg is not None
    assert q.ack(msg)
    done = q.info(tag)
    assert done is not None and done.state == "succeeded"
    assert done.errors == () and done.last_error is None


def test_an_empty_value_decodes_to_no_attempt() -> None:
    assert decode(b"") == () and decode("") == () and decode(None) == ()
    assert [e.text for e in decode(b"plain")] == ["plain"]


def test_a_failed_attempts_error_is_kept_after_the_job_succeeds(q: Queue) -> None:
    tag = q.publish("x")
    _fail(q, tag, "boom")
    msg = q.get(consumer="w2")
    assert msg is not None
    assert q.ack(msg)
    info = q.info(tag)
    assert info is not None and info.state == "succeeded"
    assert [(e.attempt, e.text, e.consumer) for e in info.errors] == [(1, "boom", "w1")]
    assert info.last_error == "boom"


def test_the_errors_are_kept_when_acked_in_a_batch(q: Queue) -> None:
    tags = [q.publish(f"x{i}") for i in range(3)]
    for tag in tags[:2]:
        _fail(q, tag, f"boom {tag}")
    msgs = [q.get() for _ in tags]
    assert all(m is not None for m in msgs)
    assert q.ack_many([m for m in msgs if m is not None]) == [True, True, True]
    for tag in tags:
        info = q.info(tag)
        assert info is not None and info.state == "succeeded"
        want = [f"boom {tag}"] if tag in tags[:2] else []
        assert [e.text for e in info.errors] == want


def test_a_real_worker_keeps_every_failed_attempts_error(
    project: dict[str, str], tmp_path: Path
) -> None:
    job = tasks.flaky.enqueue(str(tmp_path / "ledger"), 3)
    Worker(["default"], burst=True, scan_interval=0.05).run()
    info = get_queue("default").info(job.id)
    assert info is not None and info.state == "succeeded"
    assert [e.attempt for e in info.errors] == [1, 2]
    assert "not yet (attempt 1)" in info.errors[0].text
    assert "not yet (attempt 2)" in info.errors[1].text


def test_an_ended_record_with_kept_errors_reads_them(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    """info.lua's side of the contract: an `er` field in the head of a kept record (the
    errors value as it was when the job ended) is read as its errors; a value that is not
    text is ignored."""
    q = make_queue()
    tag = q.publish("x")
    _fail(q, tag, "boom")
    kept_errors = redis_client.hget(q.engine._keys.errors, tag)
    assert kept_errors is not None and kept_errors.startswith(PREFIX)
    msg = q.get()
    assert msg is not None and q.ack(msg)
    raw = redis_client.hget(q.engine._keys.history, tag)
    assert raw is not None
    head, at = unpack_one(raw)
    assert isinstance(head, dict) and "fa" in head
    record = raw[at:]

    def kept(er: object) -> bytes:  # the kept record's head, with `er`, then its record
        return pack_value({"fa": head["fa"], "er": er}) + record

    redis_client.hset(q.engine._keys.history, tag, kept(kept_errors))
    info = q.info(tag)
    assert info is not None and info.state == "succeeded" and info.body == "x"
    assert [(e.attempt, e.text) for e in info.errors] == [(1, "boom")]
    assert info.last_error == "boom"
    redis_client.hset(q.engine._keys.history, tag, kept(7))  # not text: ignored
    info = q.info(tag)
    assert info is not None and info.state == "succeeded" and info.errors == ()


def test_a_cancelled_job_keeps_its_failed_attempts_errors(q: Queue) -> None:
    """A job that failed once, then was cancelled while waiting for its retry: its
    history entry keeps that attempt's error."""
    tag = q.publish({"task": "x", "args": [], "kwargs": {}})
    _fail(q, tag, "first boom")
    assert q.cancel(tag)
    info = q.info(tag)
    assert info is not None and [e.text for e in info.errors] == ["first boom"]
