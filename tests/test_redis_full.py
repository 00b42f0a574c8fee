"""Redis at maxmemory (an ``OOM`` reply) is a :class:`RedisFull` with the fix, from a
script, a pipeline or a plain command; and ``resume`` either resumed (and says so when its
wake-up was refused) or raises having done nothing. On a private server (never the shared
one): its ``maxmemory`` is set to 1 byte, so that every write that may grow memory is
refused."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from django_zqueue import RedisFull, ZQueueError
from django_zqueue.backoff import as_error
from django_zqueue.conf import queue_options
from django_zqueue.queue import Queue

from .redis_private import PrivateRedis


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PrivateRedis]:
    s = PrivateRedis(tmp_path / "full")
    yield s
    s.stop()


@pytest.fixture
def full(server: PrivateRedis) -> Iterator[tuple[Queue, redis.Redis]]:
    """A queue with a job waiting, on a server then set to refuse writes."""
    client = server.client()
    q = Queue("q", queue_options("q"), prefix="full", client=client)
    q.publish({"task": "x", "args": [], "kwargs": {}}, tag="waiting")
    client.config_set("maxmemory", 1)  # (noeviction: the default policy)
    yield q, client
    client.config_set("maxmemory", 0)
    client.close()


def assert_full(exc: BaseException) -> None:
    assert isinstance(exc, RedisFull) and isinstance(exc, ZQueueError)
    assert "maxmemory" in str(exc) and "raise maxmemory" in str(exc)


def test_a_script_refused_at_maxmemory_raises_redis_full(full: tuple[Queue, redis.Redis]) -> None:
    q, _ = full
    with pytest.raises(RedisFull) as publish:
        q.publish({"task": "x", "args": [], "kwargs": {}}, tag="more")
    assert_full(publish.value)
    with pytest.raises(RedisFull) as scan:
        q.scan()
    assert_full(scan.value)


def test_a_pipeline_reply_at_maxmemory_is_redis_full(full: tuple[Queue, redis.Redis]) -> None:
    _, client = full
    pipe = client.pipeline(transaction=False)
    pipe.set("{full:q}:x", "1")
    (reply,) = pipe.execute(raise_on_error=False)
    assert_full(as_error(reply))


def test_pause_at_maxmemory_raises_and_did_nothing(full: tuple[Queue, redis.Redis]) -> None:
    q, _ = full
    with pytest.raises(RedisFull) as got:
        q.pause()
    assert_full(got.value)
    assert q.is_paused() is False


def test_resume_at_maxmemory_resumes_and_says_its_wake_up_was_refused(
    server: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    client = server.client()
    q = Queue("q", queue_options("q"), prefix="full", client=client)
    q.pause()
    client.config_set("maxmemory", 1)
    try:
        with caplog.at_level(logging.WARNING, logger="django_zqueue"):
            q.resume()  # the resume is done: no error
        assert q.is_paused() is False
        assert any("event=resume_wake_failed" in r.getMessage() for r in caplog.records)
    finally:
        client.config_set("maxmemory", 0)
        client.close()
