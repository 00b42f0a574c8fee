"""A persistent error that is not an outage (a corrupt shared key) costs a worker one
clear log line per second at most, naming the key when Redis says WRONGTYPE and the fix,
and the consumer's retry delay grows while the error lasts. No timed assertion: the
throttle's clock is a fixed one, and the loop's waits are counted, not waited."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis

from django_zqueue import get_queue
from django_zqueue.engine.redis.outages import QueueBackoff, Throttle
from django_zqueue.exceptions import ScriptError
from django_zqueue.queue import Queue
from django_zqueue.worker import Worker
from django_zqueue.worker.consumer import Consumer
from django_zqueue.worker.scanner import Scanner


def test_the_throttle_lets_one_line_through_per_interval() -> None:
    now = [0.0]
    t = Throttle(1.0, clock=lambda: now[0])
    assert t.due("a") == 0
    assert [t.due("a") for _ in range(50)] == [None] * 50
    assert t.due("b") == 0  # another kind of error has its own line
    now[0] = 0.999
    assert t.due("a") is None
    now[0] = 1.0
    assert t.due("a") == 51  # the next line says how many were held back


def counted_waits(w: Worker, n: int) -> list[float]:
    """Make the worker's waits return at once, counted; it stops after ``n`` of them."""
    waits: list[float] = []

    def wait(timeout: float | None = None) -> bool:
        waits.append(timeout or 0.0)
        if len(waits) >= n:
            w.stopping.set()
        return w.stopping.is_set()

    w.stopping.wait = wait  # type: ignore[method-assign]
    return waits


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "event=consumer_error" in r.getMessage()]


def test_a_wrong_typed_key_is_one_line_naming_it(
    project: dict[str, str], redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Every claim that finds work fails: one line in the same second, naming the key and
    the fix; the queue is left alone for a growing while (0.1 s doubling up to 5 s), and
    an empty claim of it in between does not bring the delay back to its base."""
    q: Queue = get_queue("default")
    for i in range(30):
        q.publish({"task": "x", "args": [i], "kwargs": {}})
    redis_client.delete(q.engine._keys.leased)
    redis_client.set(q.engine._keys.leased, "garbage")  # every claim that finds work fails
    w = Worker(["default"], scanner=False)
    w.errors = Throttle(1.0, clock=lambda: 0.0)  # every failure within the same second
    now = [0.0]
    w.paused = QueueBackoff(base=0.1, cap=5.0, clock=lambda: now[0], rand=lambda: 1.0)
    c = Consumer(w)
    waits = []
    with caplog.at_level(logging.ERROR, logger="django_zqueue"):
        for _ in range(12):
            queue, msgs, hints = c.claim(5)
            assert queue is None and msgs == [] and hints
            waits.append(w.paused.wait("default"))
            assert c.claim(5)[0] is None  # left alone meanwhile: no claim, no line
            now[0] += waits[-1]
    lines = errors_logged(caplog)
    assert len(lines) == 1, lines
    assert f"{q.engine._keys.leased} (string, not zset)" in lines[0]
    assert "zqueue_doctor" in lines[0] and "--repair" in lines[0]
    assert waits[:6] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2])
    assert waits[-1] == pytest.approx(5.0)  # backed off up to its cap, never a tight loop
    w.paused.ok("default", proved=False)  # an empty claim proves little: not reset
    assert w.paused.failed("default") == pytest.approx(5.0)


def test_the_retry_delay_grows_though_claims_without_work_succeed(
    project: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A corrupt key fails only the claims that find work: the empty ones in between
    succeed, and must not bring the delay back to its base each time."""
    w = Worker(["default"], scanner=False)
    w.errors = Throttle(1.0, clock=lambda: 0.0)
    calls = [0]

    def claim(self: Consumer, budget: int) -> tuple[Any, list[Any], list[float]]:
        calls[0] += 1
        if calls[0] % 2:
            raise ScriptError("script claim failed: WRONGTYPE Operation against a key")
        return None, [], [0.0]  # nothing ready, nothing to wait for

    monkeypatch.setattr(Consumer, "claim", claim)
    waits = counted_waits(w, 12)
    Consumer(w)._loop()
    assert len(waits) == 12
    assert waits[-1] >= 2.5, waits


def test_the_scanner_names_a_wrong_typed_key(
    q: Queue, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    redis_client.set(q.engine._keys.leased, "garbage")
    with caplog.at_level(logging.ERROR, logger="django_zqueue"):
        wait = Scanner([q]).tick(1.0)
    assert wait > 0
    (line,) = [r.getMessage() for r in caplog.records if "event=scan_error" in r.getMessage()]
    assert f"{q.engine._keys.leased} (string, not zset)" in line and "zqueue_doctor" in line
