"""Celery's side of ``python -m bench.workflows``: run with an interpreter that has
``celery[redis]`` (not django_zqueue's). Prints one JSON line: Celery's plain N jobs and
its chord of N with a callback, on the given Redis db (broker and result backend), with
one worker process (``-P prefork -c 1``). Deletes its db's keys it made (by name)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import redis
from celery import Celery, chord
from celery.exceptions import TimeoutError

URL = os.environ.get("ZQBW_CELERY_URL", "redis://127.0.0.1:6379/9")
app = Celery("workflows_celery", broker=URL, backend=URL)
app.conf.broker_connection_retry_on_startup = True
DONE = "zqbw:celery:done"
#: one worker process, one pool process (as one zqueue_worker thread beside it)
WORKER = ("-P", "prefork", "-c", "1", "-l", "WARNING")


def _r() -> redis.Redis:
    return redis.Redis.from_url(URL)


@app.task
def member(i: int) -> int:
    _r().incr(DONE)
    return i


@app.task
def total(results: list[int]) -> int:
    _r().incr(DONE)
    return len(results)


def wait_for(r: redis.Redis, target: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if int(r.get(DONE) or 0) >= target:
            return True
        time.sleep(0.01)
    return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-url", required=True)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--timeout", type=float, default=300.0)
    a = ap.parse_args()
    env = {**os.environ, "ZQBW_CELERY_URL": a.redis_url, "PYTHONPATH": os.getcwd()}
    os.environ["ZQBW_CELERY_URL"] = a.redis_url
    app.conf.broker_url = app.conf.result_backend = a.redis_url
    r = redis.Redis.from_url(a.redis_url)
    celery_bin = os.path.join(os.path.dirname(sys.executable), "celery")
    worker = subprocess.Popen(
        [celery_bin, "-A", "workflows_celery", "worker", *WORKER],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    out = {}
    try:
        time.sleep(4)  # the worker's start
        r.set(DONE, 0)
        t0 = time.perf_counter()
        for i in range(0, a.n, 1000):
            from celery import group

            group(member.s(j) for j in range(i, min(a.n, i + 1000))).apply_async()
        t_enq = time.perf_counter() - t0
        ok = wait_for(r, a.n, a.timeout)
        el = time.perf_counter() - t0
        out["plain"] = {
            "enqueue_s": round(t_enq, 3),
            "total_s": round(el, 3),
            "jobs_per_s": round(a.n / el, 1),
            "drained": ok,
        }
        r.set(DONE, 0)
        t0 = time.perf_counter()
        res = chord(member.s(i) for i in range(a.n))(total.s())
        t_enq = time.perf_counter() - t0
        try:
            got = res.get(timeout=a.timeout)
        except TimeoutError:  # celery's: the callback did not come within the time box
            got = None
        el = time.perf_counter() - t0
        fired = int(r.get(DONE) or 0) - a.n
        out["chord"] = {
            "enqueue_s": round(t_enq, 3),
            "total_s": round(el, 3),
            "jobs_per_s": round((a.n + 1) / el, 1),
            "drained": got == a.n,
            "callbacks": fired,
        }
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(30)
        for key in r.scan_iter(match="celery-task-meta-*", count=1000):
            r.unlink(key)
        r.unlink(DONE)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
