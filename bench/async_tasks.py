"""Tasks of ``python -m bench.async_lane`` (imported through ``ZQBENCH_TASK_MODULES``, so
the other benchmarks' workers keep no event-loop lane).

Every job ends with one INCR of the run's done counter, as the peers' jobs do; the sleeping
ones first wait ``seconds``: asynchronously (``asyncio.sleep``) or in their thread
(``time.sleep``) for the sync twin.
"""

from __future__ import annotations

import asyncio
import os
import time

import redis
import redis.asyncio as aredis

from django_zqueue import task

from .tasks import counter_keys

_sync: dict[int, redis.Redis] = {}
_async: dict[int, aredis.Redis] = {}


def _done_key() -> str:
    return counter_keys(os.environ.get("ZQUEUE_PREFIX", "zq"))[0]


def _client() -> redis.Redis:
    r = _sync.get(os.getpid())
    if r is None:
        r = _sync[os.getpid()] = redis.Redis.from_url(os.environ["ZQUEUE_REDIS_URL"])
    return r


def _aclient() -> aredis.Redis:
    loop = id(asyncio.get_running_loop())
    r = _async.get(loop)
    if r is None:
        r = _async[loop] = aredis.Redis.from_url(os.environ["ZQUEUE_REDIS_URL"])
    return r


@task(name="zqbench.anoop")
async def anoop() -> None:
    await _aclient().incr(_done_key())


@task(name="zqbench.asleep")
async def asleep(seconds: float) -> None:
    await asyncio.sleep(seconds)
    await _aclient().incr(_done_key())


@task(name="zqbench.sleep")
def sleep(seconds: float) -> None:
    time.sleep(seconds)
    _client().incr(_done_key())
