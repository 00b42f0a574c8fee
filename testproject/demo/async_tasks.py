"""``async def`` demo tasks: the async twins of :mod:`.tasks`, for the async lane's tests
(tests/test_async.py) and its benchmark. Not a ``tasks`` module: only what imports it
registers them (so the testproject's workers keep no event-loop lane by default).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from django.db.models import F

from django_zqueue import current_job, task

from .models import Article


def _ledger(path: str | None, line: str) -> None:
    if path:
        with Path(path).open("a") as f:
            f.write(line + "\n")


@task
async def anoop() -> None:
    """Does nothing, asynchronously: for throughput figures."""


@task
async def asleep(seconds: float) -> None:
    """An I/O-bound job: awaits ``seconds``."""
    await asyncio.sleep(seconds)


@task(store_result=True, result_ttl=300)
async def asum(values: list[int]) -> int:
    """A chord's callback: the sum of its members' results."""
    await asyncio.sleep(0)
    return sum(values)


@task(store_result=True, result_ttl=300)
async def aadd(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task
async def arecord(ledger: str, value: Any, pause: float = 0.0) -> str:
    """Append ``value``, this job's attempt and whether current_job() is this job."""
    job = current_job()
    await asyncio.sleep(pause)
    mine = current_job() is job  # still this job after an await, beside others
    _ledger(ledger, f"{value} attempt={job.attempt if job else 0} mine={mine}")
    return str(value)


@task(max_retries=2, retry_backoff={"base": 0, "max": 0, "jitter": 0})
async def always_fails(ledger: str | None = None) -> None:
    job = current_job()
    _ledger(ledger, f"fail attempt={job.attempt if job else 0}")
    await asyncio.sleep(0)
    raise RuntimeError("this async task always fails")


@task(max_retries=3, retry_backoff={"base": 0, "max": 0, "jitter": 0})
async def flaky(ledger: str, succeed_on: int) -> str:
    job = current_job()
    attempt = job.attempt if job else 1
    _ledger(ledger, f"flaky attempt={attempt}")
    if attempt < succeed_on:
        raise RuntimeError(f"flaky failure on attempt {attempt}")
    return "ok"


@task(timeout=0.5, max_retries=0)
async def too_slow(ledger: str | None = None) -> None:
    """Awaits far past its timeout: asyncio.timeout interrupts the await."""
    _ledger(ledger, "too_slow start")
    await asyncio.sleep(30)
    _ledger(ledger, "too_slow end")


@task(timeout=5, max_retries=0, store_result=True)
async def within_timeout() -> str:
    await asyncio.sleep(0.01)
    return "in time"


@task(max_retries=0)
async def forever(ledger: str | None = None) -> None:
    """Runs until cancelled."""
    _ledger(ledger, "forever start")
    await asyncio.sleep(3600)


@task
async def abump_views(article: Article) -> None:
    """The async ORM inside a job: a model passed by reference, then an async update."""
    await Article.objects.filter(pk=article.pk).aupdate(views=F("views") + 1)


@task(store_result=True)
async def acreate_article(title: str) -> int:
    """The async ORM: acreate and aget."""
    made = await Article.objects.acreate(title=title)
    again = await Article.objects.aget(pk=made.pk)
    return again.pk


@task(max_retries=100, retry_backoff={"base": 0, "max": 0, "jitter": 0})
async def afault_run(ledger: str, key: str, seconds: float = 0.0) -> None:
    """The fault suite's ``fault_run`` on the event-loop lane: record the run's start in
    the ledger, await ``seconds``, record its end."""
    from . import ledger as db
    from .tasks import _fault_start

    run = _fault_start(ledger, key)
    if seconds:
        await asyncio.sleep(seconds)
    db.finish(ledger, run)


#: jobs of ``apeak`` running now, and the most seen at once (one process: the lane's tests)
PEAK = {"now": 0, "most": 0}


@task
async def apeak(pause: float) -> None:
    """Count the runs of this task at once in this process (``PEAK``), for the lane's cap."""
    PEAK["now"] += 1
    PEAK["most"] = max(PEAK["most"], PEAK["now"])
    try:
        await asyncio.sleep(pause)
    finally:
        PEAK["now"] -= 1
