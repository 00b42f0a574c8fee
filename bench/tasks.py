"""Benchmark tasks, imported by the worker's autodiscovery (``bench`` is an installed app
under :mod:`bench.django_settings`).

``zqbench.noop(t)`` is the job of ``python -m bench``. It does what the shared harness's
``benchlib.job_record(t)`` does, on keys under this run's prefix instead of ``bench:*``
in a db of its own (so a run on a shared Redis touches only its own keys): with ``t == 0``
one INCR of the done counter; with ``t > 0`` also an RPUSH of ``now - t`` to the latency
list, in one round trip.

``zqbench.orm_insert(label, i)`` is the job of ``python -m bench.orm``: one ORM INSERT.

``ZQBENCH_TASK_MODULES`` (comma-separated) names more modules to import here: the shared
harness's peer folder (``bench/peers/zqueue``) sets it to ``tasks``, its own
``@task`` whose body is ``benchlib.job_record(t)``.
"""

from __future__ import annotations

import importlib
import os
import time
from typing import Any

import redis

from django_zqueue import task

_clients: dict[int, redis.Redis] = {}


def counter_keys(prefix: str) -> tuple[str, str]:
    """(done counter, latency list) of a run with ZQUEUE_PREFIX ``prefix``."""
    return f"{{{prefix}}}:bench:done", f"{{{prefix}}}:bench:lat"


def split_key(prefix: str) -> str:
    """The totals of :func:`timed_noop` of a run with ZQUEUE_PREFIX ``prefix``."""
    return f"{{{prefix}}}:bench:split"


def _client() -> redis.Redis:
    """One connection per process (fork-safe), like benchlib's job connection."""
    pid = os.getpid()
    r = _clients.get(pid)
    if r is None:
        r = redis.Redis.from_url(os.environ["ZQUEUE_REDIS_URL"])
        _clients.clear()
        _clients[pid] = r
    return r


@task(name="zqbench.noop")
def noop(t: float = 0.0) -> None:
    now = time.time()
    done, lat = counter_keys(os.environ.get("ZQUEUE_PREFIX", "zq"))
    r = _client()
    if t:
        p = r.pipeline(transaction=False)
        p.rpush(lat, now - t)
        p.incr(done)
        p.execute()
    else:
        r.incr(done)


#: the running totals of :func:`timed_noop` in this process: jobs, their own wall and CPU
#: time, and the process's clocks at the first job's start (``python -m bench.job_share``)
_split: dict[str, Any] = {}


@task(name="zqbench.timed_noop")
def timed_noop() -> None:
    """The benchmark's job (:func:`noop` with ``t == 0``: one INCR) that also times itself:
    after each 500th job its process's totals go to ``{prefix}:bench:split`` (jobs, the
    jobs' own wall and CPU time, the process's wall and CPU time since its first job
    started), so ``python -m bench.job_share`` can tell a worker's time for its jobs from
    its time for itself."""
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    if not _split:
        _split.update(n=0, wall=0.0, cpu=0.0, since=(wall0, time.process_time()))
    noop()
    _split["wall"] += time.perf_counter() - wall0
    _split["cpu"] += time.thread_time() - cpu0
    _split["n"] += 1
    if _split["n"] % 500 == 0:
        since_wall, since_cpu = _split["since"]
        totals = {
            "jobs": _split["n"],
            "job_wall": _split["wall"],
            "job_cpu": _split["cpu"],
            "span_wall": time.perf_counter() - since_wall,
            "span_cpu": time.process_time() - since_cpu,
        }
        _client().hset(split_key(os.environ.get("ZQUEUE_PREFIX", "zq")), mapping=totals)


@task(name="zqbench.member")
def member(i: int = 0) -> int:
    """A workflow member: counts itself done and returns ``i`` (passed on)."""
    _client().incr(counter_keys(os.environ.get("ZQUEUE_PREFIX", "zq"))[0])
    return i


@task(name="zqbench.total")
def total(results: list[int]) -> int:
    """A chord's callback: counts itself done."""
    _client().incr(counter_keys(os.environ.get("ZQUEUE_PREFIX", "zq"))[0])
    return len(results)


@task(name="zqbench.completed")
def completed(summary: dict[str, Any]) -> int:
    """A batch's on_complete: counts itself done."""
    _client().incr(counter_keys(os.environ.get("ZQUEUE_PREFIX", "zq"))[0])
    return len(summary["succeeded"])


@task(name="zqbench.orm_insert")
def orm_insert(label: str, i: int) -> None:
    """The job of ``python -m bench.orm``: one ORM INSERT (a demo Article)."""
    from testproject.demo.models import Article

    Article.objects.create(title=f"{label} {i}")
    if os.environ.get("ZQBENCH_ORM_CLOSE"):  # the "connection per job" row: as before
        from django.db import connection

        connection.close()


for _name in filter(None, os.environ.get("ZQBENCH_TASK_MODULES", "").split(",")):
    importlib.import_module(_name.strip())
