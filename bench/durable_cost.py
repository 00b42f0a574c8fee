"""What a durable step costs, beside a plain job, in one run on a private Redis.

    python -m bench.durable_cost [--n 2000]

For ``--n`` jobs each: a plain job's claim + ack (two round trips), the first durable
step of a run (it reads the job's records, then records the step: two round trips) and
each further step (one round trip); client-side time per operation (median and p99,
ms). Also the
Redis memory of a parked job's records (one step and one wait), ``MEMORY USAGE`` of its
hash, in bytes. Every loop is bounded by ``--n``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from typing import Any

import redis

from ._redis import start_private


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def stats(xs: list[float]) -> dict[str, float]:
    p50, p99 = statistics.median(xs), pct(xs, 0.99)
    return {"p50_ms": round(p50 * 1000, 3), "p99_ms": round(p99 * 1000, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    a = ap.parse_args()
    server = start_private()
    try:
        os.environ["ZQUEUE_REDIS_URL"] = server.url
        os.environ["ZQUEUE_PREFIX"] = "zqbench"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.django_settings")
        import django

        django.setup()
        from django_zqueue import durable, get_queue
        from django_zqueue.exceptions import Parked
        from django_zqueue.tasks.context import JobContext, set_current_job

        r = redis.Redis.from_url(server.url)
        q = get_queue("default")
        n = a.n
        plain: list[float] = []
        q.publish_many(list(range(n)))
        for _ in range(n):
            t0 = time.perf_counter()
            (msg,), _hint = q.claim(1, "bench")
            q.ack(msg)
            plain.append(time.perf_counter() - t0)
        q.publish_many(list(range(n)))
        first: list[float] = []
        more: list[float] = []
        for _ in range(n):
            (msg,), _hint = q.claim(1, "bench")
            set_current_job(JobContext(msg, q, "bench"))
            try:
                t0 = time.perf_counter()
                durable.step("a", int, 1)
                t1 = time.perf_counter()
                durable.step("b", int, 2)
                t2 = time.perf_counter()
            finally:
                set_current_job(None)
            first.append(t1 - t0)
            more.append(t2 - t1)
            q.ack(msg)
        tag = q.publish("parked")
        (msg,), _hint = q.claim(1, "bench")
        set_current_job(JobContext(msg, q, "bench"))
        try:
            durable.step("charge", lambda: {"id": "ch_1"})
            with contextlib.suppress(Parked):
                durable.wait_for("approved", timeout=3600)
        finally:
            set_current_job(None)
        out: dict[str, Any] = {
            "n": n,
            "plain_claim_and_ack": stats(plain),
            "first_step_of_a_run": stats(first),
            "each_further_step": stats(more),
            "parked_records_hash_bytes": r.memory_usage(q.engine._keys_for(tag).steps(tag)),
            "redis": r.info("server")["redis_version"],
        }
        json.dump(out, sys.stdout)
        print()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
