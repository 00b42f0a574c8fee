"""An outage before a task's function is called never costs an attempt: what a job reads
from Redis before its call (a workflow job's passed results, a Django task's result
record) failing for an outage gives the job back unrun (``release.lua``), and it runs
once Redis answers, however few retries it has."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import override_settings

from django_zqueue import chain, conf, get_queue, task
from django_zqueue.exceptions import QueueUnavailable
from django_zqueue.queue import Queue
from django_zqueue.queue.flow import Flows
from django_zqueue.worker import Worker
from django_zqueue.worker.leases import Leases
from django_zqueue.worker.outcome import Released
from django_zqueue.worker.runner import Runner

runs: list[Any] = []


@task(store_result=True)
def first(x: int) -> int:
    runs.append(("first", x))
    return x + 1


@task(max_retries=0, store_result=True)
def once(x: int) -> int:
    runs.append(("once", x))
    return x * 10


@task(max_retries=0, store_result=True, isolation="process")
def once_isolated(x: int) -> int:
    return x * 10


@task(max_retries=0, store_result=True)
async def once_async(x: int) -> int:
    runs.append(("once_async", x))
    return x * 10


@pytest.fixture(autouse=True)
def _settings(zqueue_settings: dict[str, Any]) -> Iterator[None]:
    runs.clear()
    with override_settings(ZQUEUE={**zqueue_settings, "QUEUES": {"default": {}}}):
        conf.reset()
        yield
    conf.reset()


def closed_port() -> int:
    """A local port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def outage_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The first read of passed results fails as Redis down would; the next ones work.
    Each read adds a line to the file returned (a file: a forked child reads too)."""
    reads = tmp_path / "reads"
    reads.touch()
    real = Flows.passed_results

    def flaky(self: Flows, tag: str) -> list[Any]:
        with reads.open("a") as f:
            f.write("read\n")
        if len(reads.read_text().splitlines()) == 1:
            raise QueueUnavailable("Redis is unavailable: Connection refused")
        return real(self, tag)

    monkeypatch.setattr(Flows, "passed_results", flaky)
    return reads


def burst(**kwargs: Any) -> Worker:
    """Burst workers until one runs nothing (a release puts the job back in line)."""
    last = Worker(["default"], burst=True, scan_interval=0.05, **kwargs)
    for _ in range(5):
        if not last.run():
            break
        last = Worker(["default"], burst=True, scan_interval=0.05, **kwargs)
    return last


def test_a_real_outage_reading_passed_results_releases_the_job() -> None:
    flow = chain(first.s(1), once.s()).enqueue()
    q = get_queue("default")
    assert Worker(["default"], burst=True, max_jobs=1).run() == 1
    msgs, _ = q.claim(1, "w-test")
    assert [m.tag for m in msgs] == [flow.jobs[1].id]
    msg = msgs[0]
    assert msg.attempt == 1
    # the same queue through a client of a Redis that is not there
    down = Queue(
        "default",
        q.options,
        prefix=q.prefix,
        client=redis.Redis(port=closed_port(), socket_connect_timeout=0.5),
    )
    runner = Runner("w-test", Leases("w-test", [q], 1))
    with ThreadPoolExecutor(1) as pool:  # a worker's thread (no test database there)
        out = pool.submit(runner.run, down, msg).result()
    assert isinstance(out, Released), out
    assert runs == [("first", 1)]  # the function was not called
    assert q.release(msg) is True  # what the consumer sends for a Released
    info = q.info(msg.tag)
    assert info is not None and info.state == "ready" and info.attempts == 0
    burst()
    assert runs == [("first", 1), ("once", 2)]
    assert flow.result() == 20


@pytest.mark.parametrize("lane", [0, 4], ids=["thread", "event-loop-lane"])
def test_an_outage_reading_passed_results_costs_no_attempt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lane: int
) -> None:
    reads = outage_once(monkeypatch, tmp_path)
    step = once_async if lane else once
    flow = chain(first.s(1), step.s()).enqueue()
    w = burst(async_concurrency=lane)
    # read, refused by the outage; read again on the next claim
    assert len(reads.read_text().splitlines()) == 2
    ran = step.name.rsplit(".", 1)[-1]
    expected = [("first", 1), (ran, 2)]
    assert runs == expected
    assert flow.result() == 20
    assert get_queue("default").counts()["dead"] == 0
    assert w.failed == 0


def test_an_outage_in_an_isolated_job_costs_no_attempt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reads = outage_once(monkeypatch, tmp_path)  # (the child inherits it)
    flow = chain(first.s(1), once_isolated.s()).enqueue()
    burst()
    assert len(reads.read_text().splitlines()) == 2  # in two children
    assert flow.result() == 20
    assert get_queue("default").counts()["dead"] == 0
