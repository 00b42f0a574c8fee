"""Chunk tasks: a handler called with many jobs' items at once, each job keeping its own
tag, rank, result, retries and cancel (``tasks/chunk.py``, ``worker/chunks.py``)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from django_zqueue import Chunk, ChunkFailed, current_chunk, get_queue, task
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.worker import Worker

from .conftest import snapshot

CALLS: list[list[Any]] = []  # the items of each handler call, in order
CALLED_AT: list[float] = []  # the wall-clock time of each call
FAIL_ONCE: set[int] = set()  # items that fail on their first attempt


@task(store_result=True, chunk=Chunk(size=100, wait=0.2))
def doubled(items: list[int]) -> list[int]:
    CALLS.append(list(items))
    CALLED_AT.append(time.time())
    return [x * 2 for x in items]


@task(chunk=Chunk(size=50, wait=1.0))
def gathered(items: list[int]) -> None:
    CALLS.append(list(items))
    CALLED_AT.append(time.time())


@task(
    store_result=True,
    max_retries=3,
    retry_backoff={"base": 0, "max": 0, "jitter": 0},
    chunk=Chunk(size=10, wait=0.1),
)
def picky(items: list[int]) -> list[str]:
    CALLS.append(list(items))
    members = current_chunk()
    assert members is not None and len(members) == len(items)
    failing = {i: ValueError(f"item {x}") for i, x in enumerate(items) if x in FAIL_ONCE}
    for x in items:
        FAIL_ONCE.discard(x)
    results = [f"ok {x}" for x in items]
    if failing:
        raise ChunkFailed(failing, results)
    return results


@task(chunk=Chunk(size=5, wait=0.1), max_retries=0)
def wrong_count(items: list[int]) -> list[int]:
    return [1]


@task(chunk=Chunk(size=100, wait=30.0))
def slow_to_fill(items: list[int]) -> None:
    CALLS.append(list(items))


@pytest.fixture(autouse=True)
def _fresh(zqueue_settings: dict[str, Any]) -> None:
    CALLS.clear()
    CALLED_AT.clear()
    FAIL_ONCE.clear()


def drain() -> None:
    Worker(["default"], burst=True, scan_interval=0.05, prefetch=20).run()


def test_ten_thousand_jobs_of_size_100_make_100_calls_each_job_its_own_result() -> None:
    jobs = doubled.enqueue_many([(i,) for i in range(10_000)])
    drain()
    assert 99 <= len(CALLS) <= 101
    assert all(len(c) <= 100 for c in CALLS)
    assert sorted(x for c in CALLS for x in c) == list(range(10_000))
    for i in (0, 1, 4242, 9999):
        assert jobs[i].result() == 2 * i
    assert get_queue("default").stats()["acked"] == 10_000


def test_seven_jobs_make_one_call_once_the_first_has_waited() -> None:
    """A running worker (not a burst run, which calls what it holds as it ends)."""
    t0 = time.time()
    gathered.enqueue_many([(i,) for i in range(7)])
    w = Worker(["default"], scan_interval=0.05, prefetch=20)
    t = threading.Thread(target=w.run)
    t.start()
    deadline = time.monotonic() + 10
    while not CALLS and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    w.stop()
    t.join(10)
    assert [list(range(7))] == CALLS
    assert CALLED_AT[0] - t0 >= 1.0  # never before `wait` has passed since it took them


def test_only_the_failed_members_retry() -> None:
    FAIL_ONCE.update({2, 5, 7})
    jobs = picky.enqueue_many([(i,) for i in range(10)])
    drain()
    assert CALLS[0] == list(range(10))
    assert sorted(x for c in CALLS[1:] for x in c) == [2, 5, 7]  # the 3, once more
    for i, job in enumerate(jobs):
        assert job.result() == f"ok {i}"
        info = job.info()
        assert info is None or info.state == "succeeded"
    q = get_queue("default")
    assert q.stats()["retried"] == 3 and q.stats()["acked"] == 10


def test_a_handler_that_returns_the_wrong_count_fails_every_member_clearly() -> None:
    jobs = wrong_count.enqueue_many([(i,) for i in range(3)])
    drain()
    q = get_queue("default")
    assert q.counts()["dead"] == 3
    info = q.info(jobs[0].id)
    assert info is not None and "a list of one result per item (3)" in (info.last_error or "")


def test_each_waiting_member_keeps_its_exact_rank() -> None:
    jobs = doubled.enqueue_many([(i,) for i in range(5)])
    assert [j.rank() for j in jobs] == [0, 1, 2, 3, 4]


def test_a_stopping_worker_gives_back_what_it_holds_unrun() -> None:
    jobs = slow_to_fill.enqueue_many([(i,) for i in range(5)])
    q = get_queue("default")
    w = Worker(["default"], scan_interval=0.05, prefetch=20)
    t = threading.Thread(target=w.run)
    t.start()
    deadline = time.monotonic() + 10
    while q.counts()["inflight"] < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert q.counts()["inflight"] == 5  # held, waiting for more (wait=30 s)
    w.stop()
    t.join(10)
    assert not t.is_alive()
    assert CALLS == []
    assert q.counts()["ready"] == 5
    for job in jobs:
        info = job.info()
        assert info is not None and info.attempts == 0


def test_bad_calls_and_options_are_refused(redis_client: redis.Redis, prefix: str) -> None:
    before = snapshot(redis_client, prefix)
    with pytest.raises(TypeError, match="chunk task: each job is one item"):
        doubled.enqueue(1, 2)
    with pytest.raises(TypeError, match="chunk task"):
        doubled.enqueue(x=1)
    with pytest.raises(TypeError, match=r"\(call 1\)"):
        doubled.enqueue_many([(1,), (1, 2)])
    assert snapshot(redis_client, prefix) == before
    for bad in ({"size": 0}, {"size": 1001}, {"size": 5, "wait": 0}, {"size": True}):
        with pytest.raises(InvalidArgument, match="Chunk"):
            Chunk(**bad)

    async def coro(items: list[int]) -> None: ...

    with pytest.raises(InvalidArgument, match="async def"):
        task(name="t.achunk", chunk=Chunk(size=2))(coro)
    with pytest.raises(InvalidArgument, match="isolation"):
        task(name="t.pchunk", chunk=Chunk(size=2), isolation="process")(lambda items: None)
    with pytest.raises(InvalidArgument, match="cron"):
        task(name="t.cchunk", chunk=Chunk(size=2), cron="* * * * *")(lambda items: None)
    with pytest.raises(InvalidArgument, match="Chunk"):
        task(name="t.xchunk", chunk=5)(lambda items: None)
    with pytest.raises(InvalidArgument, match="at least one"):
        ChunkFailed({})
