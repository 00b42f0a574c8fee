"""Quick figures for the core queue engine, one process, on a given Redis.

    python -m bench.core_quick [--url redis://127.0.0.1:6379/0] [--n 20000] [--big 1000000]

Measures publish/s (one call per job, and publish_many), claim+ack/s (batch claim and
pipelined acks, and one-by-one get/ack), and rank/score/exists latency with --big jobs
queued. Works under its own key prefix and deletes only its own keys. Every loop is
bounded by --n / --big.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
django.setup()

import redis  # noqa: E402

from django_zqueue.conf import QueueOptions  # noqa: E402
from django_zqueue.queue import Queue  # noqa: E402


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default=os.environ.get("ZQUEUE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--big", type=int, default=1_000_000)
    a = ap.parse_args()
    client = redis.Redis.from_url(a.url)
    prefix = f"zqbench-{uuid.uuid4().hex[:8]}"
    q = Queue("bench", QueueOptions(), prefix=prefix, client=client)
    out: dict[str, float] = {}
    try:
        body = {"task": "noop", "args": [0.0], "kwargs": {}}
        t = time.perf_counter()
        for _ in range(a.n):
            q.publish(body)
        out["publish_single_per_s"] = a.n / (time.perf_counter() - t)
        q.clear()

        t = time.perf_counter()
        for i in range(0, a.n, 1000):
            q.publish_many([body] * min(1000, a.n - i))
        out["publish_many_per_s"] = a.n / (time.perf_counter() - t)

        t = time.perf_counter()
        done = 0
        while msgs := q.claim(100)[0]:
            q.ack_many(msgs)
            done += len(msgs)
        out["claim100_ack_pipelined_per_s"] = done / (time.perf_counter() - t)

        q.publish_many([body] * min(a.n, 5000))
        t = time.perf_counter()
        done = 0
        while (m := q.get()) is not None:
            q.ack(m)
            done += 1
        out["get_ack_one_by_one_per_s"] = done / (time.perf_counter() - t)
        q.clear()

        t = time.perf_counter()
        tags: list[str] = []
        for i in range(0, a.big, 1000):
            tags.extend(q.publish_many([body] * min(1000, a.big - i)))
        out["fill_big_s"] = time.perf_counter() - t
        for name, fn in (("rank", q.rank), ("score", q.score), ("exists", q.exists)):
            lat = []
            for j in range(2000):
                tag = tags[(j * 7919) % len(tags)]
                t0 = time.perf_counter()
                fn(tag)
                lat.append((time.perf_counter() - t0) * 1000)
            out[f"{name}_p50_ms_at_{a.big}"] = statistics.median(lat)
            out[f"{name}_p99_ms_at_{a.big}"] = pct(lat, 0.99)
    finally:
        q.clear()
    print(json.dumps({k: round(v, 3) for k, v in out.items()}, indent=2))


if __name__ == "__main__":
    main()
