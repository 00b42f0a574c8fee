"""The bad-input matrix: every case raises a clear exception and leaves Redis unchanged.

One table, driven through the public API (``@task`` enqueue, ``Queue.publish``, Django's
Tasks backend). Finer cases of ``Queue.publish`` alone are in test_queue.py; undecodable
payloads and unknown task names met by a worker are in test_worker.py and the fault suite
(R7). Redis-side conditions (down, eviction policy, read-only replica) follow the table.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from django_zqueue import (
    DuplicateJob,
    InvalidArgument,
    PayloadTooLarge,
    QueueUnavailable,
    UnknownQueue,
    conf,
    get_queue,
)
from testproject.demo import tasks

from .conftest import snapshot
from .redis_private import PrivateRedis

MB = 1 << 20


def _publish(**kwargs: Any) -> Callable[[], object]:
    return lambda: get_queue("default").publish("body", **kwargs)


def _enqueue(**options: Any) -> Callable[[], object]:
    return lambda: tasks.noop.using(**options).enqueue()


CASES: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    ("unknown queue", _enqueue(queue="nope"), UnknownQueue, "nope"),
    ("args not JSON: set", lambda: tasks.record.enqueue("x", {1, 2}), TypeError, "set"),
    ("args not JSON: object", lambda: tasks.record.enqueue("x", object()), TypeError, "object"),
    ("args not JSON: NaN", lambda: tasks.record.enqueue("x", math.nan), ValueError, "JSON"),
    ("payload over 1 MiB", lambda: tasks.record.enqueue("x", "a" * MB), PayloadTooLarge, "byte"),
    ("priority NaN", _enqueue(priority=math.nan), InvalidArgument, "priority"),
    ("priority inf", _enqueue(priority=math.inf), InvalidArgument, "priority"),
    ("priority 2**53+1", _enqueue(priority=2**53 + 1), InvalidArgument, "priority"),
    ("score NaN", _publish(score=math.nan), InvalidArgument, "score"),
    ("score -inf", _publish(score=-math.inf), InvalidArgument, "score"),
    ("score 2**53+1", _publish(score=2**53 + 1), InvalidArgument, "score"),
    ("empty tag", _enqueue(tag=""), InvalidArgument, "tag"),
    ("huge tag", _enqueue(tag="t" * 10_000), InvalidArgument, "tag"),
    ("duplicate tag", _enqueue(tag="taken"), DuplicateJob, "taken"),
    ("duplicate tag, publish", _publish(tag="taken"), DuplicateJob, "taken"),
    (
        "naive datetime under USE_TZ",
        lambda: tasks.noop.enqueue_at(datetime(2030, 1, 1)),
        InvalidArgument,
        "naive",
    ),
    ("negative max_retries", _publish(max_retries=-1), InvalidArgument, "max_retries"),
    ("delay not a number", _publish(delay="soon"), InvalidArgument, "delay"),
]


@pytest.mark.parametrize(("case", "call", "exc", "match"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_matrix(
    project: dict[str, str],
    redis_client: redis.Redis,
    prefix: str,
    case: str,
    call: Callable[[], object],
    exc: type[Exception],
    match: str,
) -> None:
    assert settings.USE_TZ
    get_queue("default").publish("already here", tag="taken")
    before = snapshot(redis_client, prefix)
    with pytest.raises(exc, match=match):
        call()
    assert snapshot(redis_client, prefix) == before


def test_django_tasks_backend_refuses_an_unconfigured_queue(
    project: dict[str, str], redis_client: redis.Redis, prefix: str
) -> None:
    """Django's Tasks framework: a task on a queue django_zqueue does not serve."""
    from django_zqueue.tasks.django_tasks.compat import AVAILABLE

    if not AVAILABLE:
        pytest.skip("Django's Tasks framework is not installed")
    from django_zqueue.tasks.django_tasks.compat import InvalidTask
    from testproject.demo import framework_tasks

    before = snapshot(redis_client, prefix)
    with pytest.raises(InvalidTask):
        framework_tasks.add.using(queue_name="nope").enqueue(1, 2)
    assert snapshot(redis_client, prefix) == before


def test_redis_down_at_enqueue_raises_within_the_socket_timeout() -> None:
    """A Redis that accepts the connection and never answers (a hung or partitioned
    server): QueueUnavailable after one socket timeout, not after retries."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        url = f"redis://127.0.0.1:{server.getsockname()[1]}/0"
        value = {**settings.ZQUEUE, "REDIS_URL": url, "SOCKET_TIMEOUT": 0.5}
        with override_settings(ZQUEUE=value):
            try:
                t = time.monotonic()
                with pytest.raises(QueueUnavailable):
                    tasks.noop.enqueue()
                elapsed = time.monotonic() - t
            finally:
                conf.reset()
    # one timeout (0.5 s); redis-py's default retries would take 10 times as long
    assert 0.4 <= elapsed < 0.5 + 2.0


def test_redis_refusing_connections_at_enqueue(tmp_path: Path) -> None:
    from django_zqueue.engine.redis.embedded import free_port

    value = {**settings.ZQUEUE, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    with override_settings(ZQUEUE=value):
        try:
            with pytest.raises(QueueUnavailable):
                tasks.noop.enqueue()
        finally:
            conf.reset()


# ------------------------------------------------------------------ a read-only replica


def _pair(tmp_path: Path) -> tuple[PrivateRedis, PrivateRedis]:
    primary = PrivateRedis(tmp_path / "primary")
    replica = PrivateRedis(tmp_path / "replica", "--replicaof", "127.0.0.1", str(primary.port))
    c = replica.client()
    deadline = time.monotonic() + 15
    while c.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "replica did not sync"
        time.sleep(0.05)
    return primary, replica


def test_readonly_replica_is_retried_until_promoted(tmp_path: Path) -> None:
    """A client left on a node that became a replica (a failover behind one address):
    READONLY means nothing was written, so the call is retried, with backoff, and goes
    through once the node is promoted; the job is written exactly once."""
    import threading

    from django_zqueue.conf import Config, queue_options
    from django_zqueue.engine.redis.connection import make_client
    from django_zqueue.queue import Queue

    primary, replica = _pair(tmp_path)
    try:
        q = Queue(
            "q",
            queue_options("q"),
            prefix="zqt-ro",
            client=make_client(Config(redis_url=replica.url)),
        )
        admin = replica.client()
        assert q.total_count() == 0  # reads are served by a replica
        promote = threading.Timer(0.5, lambda: admin.replicaof("NO", "ONE"))
        promote.start()
        t = time.monotonic()
        tag = q.publish("written once", tag="once")
        waited = time.monotonic() - t
        promote.join()
        assert tag == "once" and q.state("once") == "ready" and q.total_count() == 1
        msg = q.get()
        assert msg is not None and q.ack(msg)  # script writes go through too
        assert waited >= 0.4
        print(f"\nREADONLY publish went through {waited:.2f} s after the call (promoted at 0.5 s)")
    finally:
        replica.stop()
        primary.stop()


def test_readonly_retry_is_bounded_and_writes_nothing(tmp_path: Path) -> None:
    from django_zqueue.conf import Config, queue_options
    from django_zqueue.engine.redis.connection import READONLY_WAITS, make_client
    from django_zqueue.queue import Queue

    primary, replica = _pair(tmp_path)
    try:
        q = Queue(
            "q",
            queue_options("q"),
            prefix="zqt-ro",
            client=make_client(Config(redis_url=replica.url)),
        )
        t = time.monotonic()
        with pytest.raises(QueueUnavailable, match=r"READONLY|read only"):
            q.publish("never written")
        elapsed = time.monotonic() - t
        assert elapsed >= sum(READONLY_WAITS)
        assert elapsed < sum(READONLY_WAITS) + 5.0  # bounded
        assert replica.client().dbsize() == 0 and primary.client().dbsize() == 0
    finally:
        replica.stop()
        primary.stop()


# ------------------------------------------------------------------ eviction policy


def test_eviction_policy_is_checked_by_check_deploy_only(tmp_path: Path) -> None:
    from django.core import checks

    server = PrivateRedis(tmp_path / "lru", "--maxmemory-policy", "allkeys-lru")
    try:
        with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": server.url}):
            try:
                deploy = checks.run_checks(include_deployment_checks=True)
                plain = checks.run_checks()
            finally:
                conf.reset()
        ids = [m.id for m in deploy]
        assert "django_zqueue.W001" in ids
        assert "allkeys-lru" in next(m.msg for m in deploy if m.id == "django_zqueue.W001")
        assert not [m for m in plain if (m.id or "").startswith("django_zqueue.W")]
        server.client().config_set("maxmemory-policy", "noeviction")
        with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": server.url}):
            try:
                deploy = checks.run_checks(include_deployment_checks=True)
            finally:
                conf.reset()
        assert not [m for m in deploy if (m.id or "").startswith("django_zqueue.W")]
    finally:
        server.stop()


def test_plain_check_needs_no_redis() -> None:
    from django.core import checks

    from django_zqueue.engine.redis.embedded import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": url}):
        try:
            plain = checks.run_checks()
            deploy = checks.run_checks(include_deployment_checks=True)
        finally:
            conf.reset()
    assert not [m for m in plain if (m.id or "").startswith("django_zqueue")]
    assert "django_zqueue.W002" in [m.id for m in deploy]  # deploy says it could not check


def test_worker_start_warns_about_eviction(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    server = PrivateRedis(tmp_path / "lru", "--maxmemory-policy", "volatile-lru")
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            [sys.executable, str(root / "testproject/manage.py"), "zqueue_worker", "--burst"],
            env={
                **os.environ,
                "ZQUEUE_REDIS_URL": server.url,
                "ZQUEUE_PREFIX": "zqt-evict",
                "PYTHONPATH": str(root),
                "DJANGO_SETTINGS_MODULE": "testproject.settings",
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr
    assert "event=redis_eviction" in out.stderr and "volatile-lru" in out.stderr


def test_one_job_cancelled_and_one_job_timeout_both_zqueue_errors() -> None:
    """The worker's threads, its event-loop lane and process isolation raise the same
    two classes, exported by django_zqueue.worker and named as a job's last error
    shows them."""
    from django_zqueue import exceptions, worker
    from django_zqueue.worker import aio, isolation, leases, runner

    for cls in (exceptions.JobCancelled, exceptions.JobTimeout):
        assert issubclass(cls, exceptions.ZQueueError)
        assert f"{cls.__module__}.{cls.__name__}" == f"django_zqueue.worker.{cls.__name__}"
    assert worker.JobCancelled is exceptions.JobCancelled
    assert worker.JobTimeout is exceptions.JobTimeout
    for module in (aio, isolation, runner, leases):
        assert getattr(module, "JobCancelled", exceptions.JobCancelled) is exceptions.JobCancelled
