from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from django_zqueue import conf
from django_zqueue.conf import queue_options
from django_zqueue.engine.redis import connection
from django_zqueue.queue import Queue
from django_zqueue.testing.plugin import zqueue  # noqa: F401 - the plugin's fixture

from . import redis_server
from .redis_server import redis_url

# Django's own tests/tasks suite runs separately, with its own settings
# (see tests/conformance/ and .ci/run).
collect_ignore = ["conformance"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fault-long",
        action="store_true",
        help="run the fault suite's long variants (tests/fault): more jobs, time and faults",
    )


@pytest.fixture(scope="session", autouse=True)
def _private_topology() -> Iterator[None]:
    """With ZQUEUE_TEST_TOPOLOGY=cluster|sentinel: the session's private servers are
    stopped (processes killed, directory removed) when the session ends. On a cluster
    the session must end without a single CROSSSLOT error from any node."""
    yield
    crossslot = redis_server.stop_private()
    assert crossslot == 0, f"the cluster replied {crossslot} CROSSSLOT errors"


@pytest.fixture(scope="session")
def redis_client() -> redis.Redis:
    """A client of the test Redis: redis-py's RedisCluster on a cluster, the Sentinel
    master's client with Sentinel, as django_zqueue itself would make."""
    if redis_server.TOPOLOGY == "standalone":
        return redis.Redis.from_url(redis_url())
    config, problems = conf.parse({"REDIS_URL": redis_url()})
    assert not problems, problems
    return connection.make_client(config)


@pytest.fixture(scope="session")
def zqueue_redis_url() -> str:
    """The plugin's ``zqueue`` fixture on the suite's Redis (a cluster with
    ZQUEUE_TEST_TOPOLOGY=cluster)."""
    return redis_url()


@pytest.fixture
def prefix(redis_client: redis.Redis) -> Iterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards (never FLUSHDB)."""
    p = f"zqt-{uuid.uuid4().hex[:12]}"
    yield p
    keys = list(redis_client.scan_iter(match=f"{{{p}:*", count=1000))
    if keys:
        redis_client.delete(*keys)


QueueFactory = Callable[..., Queue]


@pytest.fixture
def make_queue(prefix: str, redis_client: redis.Redis) -> QueueFactory:
    """make_queue(name="q", **options) -> a Queue under this test's prefix."""

    def make(name: str = "q", **options: Any) -> Queue:
        return Queue(name, queue_options(name, **options), prefix=prefix, client=redis_client)

    return make


@pytest.fixture
def q(make_queue: QueueFactory) -> Queue:
    return make_queue()


@pytest.fixture
def zqueue_settings(prefix: str) -> Iterator[dict[str, Any]]:
    """Settings pointing the configured queues at the test Redis and prefix."""
    value = {
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "QUEUES": {"default": {}, "other": {"max_retries": 1}},
    }
    with override_settings(ZQUEUE=value):
        yield value
    conf.reset()


def snapshot(client: redis.Redis, prefix: str) -> dict[bytes, Any]:
    """Every key under ``prefix`` with its full content, to prove nothing was written."""
    out: dict[bytes, Any] = {}
    for key in sorted(client.scan_iter(match=f"{{{prefix}:*", count=1000)):
        kind = client.type(key)
        if kind == b"zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"hash":
            out[key] = client.hgetall(key)
        elif kind == b"list":
            out[key] = client.lrange(key, 0, -1)
        else:
            out[key] = client.get(key)
    return out


@pytest.fixture
def project(prefix: str) -> Iterator[dict[str, str]]:
    """The testproject's queues under this test's prefix; returns the env for subprocesses."""
    value = {**settings.ZQUEUE, "REDIS_URL": redis_url(), "PREFIX": prefix}
    with override_settings(ZQUEUE=value):
        yield {
            **os.environ,
            "ZQUEUE_REDIS_URL": redis_url(),
            "ZQUEUE_PREFIX": prefix,
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
            "DJANGO_SETTINGS_MODULE": "testproject.settings",
        }
    conf.reset()
