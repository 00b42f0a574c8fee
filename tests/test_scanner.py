"""The scanner loop (scanner.py) and the outage helpers (backoff.py): steps, backoff,
one log line per outage, Redis restarts under a running scanner and a running worker."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_zqueue import conf
from django_zqueue.engine.redis.outages import (
    ErrorLine,
    Outage,
    QueueBackoff,
    RetryDelay,
    as_error,
    is_unavailable,
)
from django_zqueue.exceptions import QueueUnavailable, ScriptError
from django_zqueue.queue import Queue, get_queue
from django_zqueue.worker.scanner import Scanner

from .redis_private import PrivateRedis


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"event={name}" in r.getMessage()]


# ------------------------------------------------------------------ helpers


def test_a_long_outage_is_said_again_every_minute_with_what_to_check(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A process whose Redis stays away (started with it down, or never back) is not
    silent for ever: one redis_lost with the fix, one redis_still_lost a minute, however
    many tries fail in between; then one redis_back."""
    caplog.set_level(logging.INFO)
    now = [0.0]
    o = Outage(logging.getLogger("test.outage"), clock=lambda: now[0], worker="w")
    for _ in range(200):  # 0.9 s apart: 180 s of an outage
        o.failed(QueueUnavailable("Error 111 connecting to 127.0.0.1:6390"))
        now[0] += 0.9
    o.ok()
    (lost,) = events(caplog, "redis_lost")
    still = events(caplog, "redis_still_lost")
    assert "fix=" in lost and "REDIS_URL" in lost and "zqueue_doctor" in lost
    assert len(still) == 2 and "outage_s=60" in still[0] and "outage_s=121" in still[1]
    (back,) = events(caplog, "redis_back")
    assert "failures=200" in back


def test_retry_delay_grows_to_its_cap_with_jitter() -> None:
    r = RetryDelay(base=0.1, cap=2.0, rand=lambda: 1.0)
    assert [round(r.next(), 3) for _ in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    low = RetryDelay(base=0.1, cap=2.0, rand=lambda: 0.0)
    assert low.next() == pytest.approx(0.05)  # jitter: half to all of the step
    r.reset()
    assert r.next() == pytest.approx(0.1)


def test_outage_logs_one_line_when_lost_and_one_when_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    o = Outage(logging.getLogger("test.outage"), worker="w")
    o.ok()
    threads = [
        threading.Thread(target=o.failed, args=(QueueUnavailable("refused"),)) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for _ in range(10):
        o.ok()
    assert len(events(caplog, "redis_lost")) == 1
    (back,) = events(caplog, "redis_back")
    assert "outage_s=" in back and "failures=8" in back


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (redis.ConnectionError("refused"), True),
        (redis.TimeoutError("timed out"), True),
        (redis.BusyLoadingError("LOADING Redis is loading"), True),
        (redis.ReadOnlyError("READONLY You can't write"), True),
        (redis.ResponseError("BUSY Redis is busy running a script"), True),
        (redis.ResponseError("MASTERDOWN Link with MASTER is down"), True),
        (redis.exceptions.ClusterError("TTL exhausted."), True),
        (redis.exceptions.TryAgainError("TRYAGAIN Multiple keys request during rehashing"), True),
        (redis.ResponseError("ZQ_BAD_ARGUMENT: claim needs ..."), False),
        (redis.ResponseError("user_script:12: attempt to index a nil value"), False),
        (ValueError("a bug"), False),
    ],
)
def test_outages_are_told_from_script_errors(error: Exception, outage: bool) -> None:
    assert is_unavailable(error) is outage
    assert isinstance(as_error(error), QueueUnavailable if outage else ScriptError)
    wrapped = QueueUnavailable("x") if outage else ScriptError("x")
    wrapped.__cause__ = error
    assert is_unavailable(wrapped) is outage


# ------------------------------------------------------------------ Scanner


def test_step_scans_until_no_more_work(make_queue: Any, redis_client: redis.Redis) -> None:
    q = make_queue(scan_batch=10)
    q.publish_many(range(35), delay=0.01)
    time.sleep(0.05)
    totals = Scanner([q]).step()
    assert totals.queues[q.name] == (35, 0, 0, 0)
    assert q.counts()["ready"] == 35


def test_step_is_bounded(make_queue: Any) -> None:
    q = make_queue(scan_batch=10)
    q.publish_many(range(35), delay=0.01)
    time.sleep(0.05)
    assert Scanner([q], max_steps=2).step().queues[q.name][0] == 20


def test_a_script_error_is_reported_as_such_and_backed_off(
    q: Queue, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue whose scan fails for an error of its own (not an outage) is left alone for
    a growing while (never a tight loop); the step goes on; ``scan_error`` is said at most
    once a second (the repeats counted), its traceback once."""

    def broken(*a: Any, **k: Any) -> Any:
        raise redis.ResponseError("user_script:1: Script attempted to access nonexistent global")

    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731
    paused = QueueBackoff(base=0.1, cap=1.0, clock=clock, rand=lambda: 1.0)
    monkeypatch.setattr(q, "scan", broken)
    s = Scanner(
        [q], paused=paused, errors=ErrorLine(logging.getLogger("django_zqueue"), 1.0, clock)
    )
    waits = []
    for _ in range(6):
        assert s.tick(2.0) == 2.0  # the step itself goes on (other queues, schedules)
        waits.append(paused.wait(q.name))
        assert s.tick(2.0) == 2.0 and paused.wait(q.name) == waits[-1]  # left alone
        now[0] += waits[-1] + 0.01
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])  # never a tight loop
    lines = events(caplog, "scan_error")
    assert 2 <= len(lines) <= 4 and not events(caplog, "redis_lost")  # ~ one a second
    assert any("repeated=" in line for line in lines[1:])
    traced = [r for r in caplog.records if "scan_error" in r.getMessage() and r.exc_info]
    assert len(traced) == 1  # the traceback once
    monkeypatch.undo()
    now[0] += 2.0
    assert s.tick(2.0) == 2.0 and paused.wait(q.name) == 0
    assert s.tick(2.0) == 2.0 and s.retry.failures == 0


def test_a_corrupt_key_stops_only_its_own_queues_scan(
    make_queue: Callable[..., Queue], redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The scan of a queue with a key of the wrong type fails; the other queue's due
    delayed jobs are promoted all the same, and the failure says the key."""
    bad, good = make_queue("bad"), make_queue("good")
    good.publish({"task": "x", "args": [], "kwargs": {}}, tag="later", delay=0.01)
    bad_key = bad.engine._keys.delayed
    redis_client.delete(bad_key)
    redis_client.set(bad_key, "junk")
    time.sleep(0.05)
    s = Scanner([bad, good])
    assert s.tick(1.0) == 1.0
    assert good.state("later") == "ready"
    (line,) = events(caplog, "scan_error")
    assert "queue=bad" in line and bad_key in line
    assert s.paused.wait("bad") > 0 and s.paused.wait("good") == 0


@pytest.fixture
def private_settings(tmp_path: Path, prefix: str) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path / "redis")
    value = {
        "REDIS_URL": server.url,
        "PREFIX": prefix,
        "QUEUES": {"default": {"visibility_timeout": 1}},
        "SOCKET_TIMEOUT": 2,
        "SOCKET_CONNECT_TIMEOUT": 1,
    }
    try:
        with override_settings(ZQUEUE=value):
            conf.reset()
            yield server
    finally:
        server.stop()
        conf.reset()


def test_scanner_runs_through_redis_restarts_and_still_recovers_leases(
    private_settings: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="django_zqueue.scanner")
    server = private_settings
    q = get_queue("default")
    s = Scanner([q], retry=RetryDelay(base=0.05, cap=0.2))
    stop = threading.Event()
    loop = threading.Thread(target=s.run, args=(stop, 0.05))
    loop.start()
    try:
        restarts = 3
        for _ in range(restarts):
            server.kill()
            time.sleep(0.5)
            assert loop.is_alive()
            server.start()
            q.publish("x")  # data is gone with the restart (no AOF): a fresh lease
            assert q.get() is not None
            deadline = time.monotonic() + 15
            while q.counts()["inflight"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert q.counts() == {"ready": 1, "delayed": 0, "inflight": 0, "dead": 0}
            q.clear()
        assert loop.is_alive()
    finally:
        stop.set()
        loop.join(10)
    assert not loop.is_alive()
    assert len(events(caplog, "redis_lost")) == restarts
    assert len(events(caplog, "redis_back")) == restarts
    assert not events(caplog, "scan_error")


def test_worker_with_redis_down_logs_one_line_each_way(
    private_settings: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    from django_zqueue.worker import Worker
    from testproject.demo import tasks

    caplog.set_level(logging.INFO)
    server = private_settings
    w = Worker(["default"], concurrency=2, scan_interval=0.05)
    runner = threading.Thread(target=w.run)
    runner.start()
    try:
        time.sleep(0.5)
        server.kill()
        time.sleep(1.5)  # ~30 heartbeats and a few scans and claims fail meanwhile
        server.start()
        deadline = time.monotonic() + 15
        while not events(caplog, "redis_back") and time.monotonic() < deadline:
            time.sleep(0.05)
        tasks.noop.enqueue()
        deadline = time.monotonic() + 15
        while w.processed < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        w.stop()
        runner.join(30)
    assert w.processed == 1
    assert len(events(caplog, "redis_lost")) == 1, events(caplog, "redis_lost")
    assert len(events(caplog, "redis_back")) == 1
    assert not events(caplog, "heartbeat_failed") and not events(caplog, "consumer_error")


# ------------------------------------------------------------------ the command


def test_command_exits_non_zero_on_a_configuration_error(zqueue_settings: Any) -> None:
    with pytest.raises(CommandError, match="unknown queue"):
        call_command("zqueue_scanner", "--once", "--queues", "nope")


def test_command_once_reports_a_pass_that_could_not_finish(private_settings: PrivateRedis) -> None:
    private_settings.kill()
    with pytest.raises(CommandError, match=r"cannot reach Redis at .*Check that Redis is running"):
        call_command("zqueue_scanner", "--once")


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_idle_event_loop_lane_rides_out_a_redis_restart(
    private_settings: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """The event-loop lane waits for work on the notify lists; Redis going away under
    that wait is an outage it rides out (one line each way), not the end of its thread:
    an ``async def`` job enqueued after the restart runs."""
    from django_zqueue.worker import Worker
    from testproject.demo import async_tasks

    caplog.set_level(logging.INFO)
    server = private_settings
    w = Worker(["default"], concurrency=1, async_concurrency=3, scan_interval=0.05)
    runner = threading.Thread(target=w.run)
    runner.start()
    try:
        time.sleep(0.5)  # idle: the lane blocks on its wake-up lists
        server.kill()
        time.sleep(1.5)
        server.start()
        deadline = time.monotonic() + 15
        while not events(caplog, "redis_back") and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(3):
            async_tasks.anoop.enqueue()
        deadline = time.monotonic() + 15
        while w.processed < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        w.stop()
        runner.join(30)
    dead = [r for r in caplog.records if "Exception in thread" in r.getMessage()]
    assert w.processed == 3 and not dead
    assert len(events(caplog, "redis_lost")) == 1, events(caplog, "redis_lost")
