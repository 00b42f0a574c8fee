"""Partitioned queues on one Redis: rank latency and publish/claim throughput by N.

    python -m bench.partitions [--redis-url URL] [--jobs 100000] [--n 20000]
                               [--partitions 1,6,16] [--samples 500]

For each number of partitions N: publish ``--jobs`` jobs with ``publish_many`` (random
priorities in [-2, 2], so ranks cross priority bands), then time ``rank(tag)`` of
``--samples`` random tags (p50/p99 in µs; N > 1 is two round trips: ZSCORE+ZRANK in the
job's partition, then one ZCOUNT per other partition), ``total_count()``, and
``exists(tag)``; then on an empty queue publish ``--n`` jobs one call per job and with
``publish_many``, and drain them with ``claim(100)`` + ``ack_many`` (jobs/s). Starts a
private redis-server on a free port unless ``--redis-url`` is given (then only keys under
a fresh prefix are used and deleted at the end). Every loop is bounded by the arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
django.setup()

import redis  # noqa: E402

from bench._redis import loadavg, start_private, unlink_prefix  # noqa: E402
from django_zqueue.conf import QueueOptions  # noqa: E402
from django_zqueue.queue import Queue  # noqa: E402


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def timed_us(fn: Any, args: list[Any]) -> list[float]:
    out = []
    for a in args:
        t = time.perf_counter()
        fn(a)
        out.append((time.perf_counter() - t) * 1e6)
    return out


def one(client: redis.Redis, prefix: str, n_parts: int, a: argparse.Namespace) -> dict[str, Any]:
    q = Queue(f"b{n_parts}", QueueOptions(partitions=n_parts), prefix=prefix, client=client)
    q.clear()
    body = {"task": "noop", "args": [0], "kwargs": {}}
    rnd = random.Random(n_parts)
    tags: list[str] = []
    t = time.perf_counter()
    for i in range(0, a.jobs, 1000):
        size = min(1000, a.jobs - i)
        tags += q.publish_many([body] * size, priority=rnd.randint(-2, 2))
    fill_s = time.perf_counter() - t
    sample = rnd.sample(tags, min(a.samples, len(tags)))
    rank_us = timed_us(q.rank, sample)
    exists_us = timed_us(q.exists, sample)
    count_us = timed_us(lambda _: q.total_count(), sample[:100])
    q.clear()

    t = time.perf_counter()
    for _ in range(a.n):
        q.publish(body)
    single = a.n / (time.perf_counter() - t)
    q.clear()
    t = time.perf_counter()
    for i in range(0, a.n, 1000):
        q.publish_many([body] * min(1000, a.n - i))
    many = a.n / (time.perf_counter() - t)
    t = time.perf_counter()
    done = 0
    for _ in range(a.n):  # bounded: at most one claim per job
        msgs, _hint = q.claim(100, "bench")
        if not msgs:
            break
        q.ack_many(msgs)
        done += len(msgs)
    drain = done / (time.perf_counter() - t)
    q.clear()
    return {
        "partitions": n_parts,
        "jobs": a.jobs,
        "fill_publish_many_per_s": round(a.jobs / fill_s),
        "rank_p50_us": round(pct(rank_us, 0.5)),
        "rank_p99_us": round(pct(rank_us, 0.99)),
        "exists_p50_us": round(pct(exists_us, 0.5)),
        "total_count_p50_us": round(pct(count_us, 0.5)),
        "publish_single_per_s": round(single),
        "publish_many_per_s": round(many),
        "claim100_ack_per_s": round(drain),
        "drained": done,
    }


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.partitions")
    ap.add_argument("--redis-url", default=None)
    ap.add_argument("--jobs", type=int, default=100_000, help="jobs queued for rank (100000)")
    ap.add_argument("--n", type=int, default=20_000, help="jobs per publish/claim run (20000)")
    ap.add_argument("--partitions", default="1,6,16")
    ap.add_argument("--samples", type=int, default=500)
    a = ap.parse_args()
    server = None if a.redis_url else start_private()
    url = a.redis_url or (server.url if server else "")
    client = redis.Redis.from_url(url)
    prefix = f"zqbench-{uuid.uuid4().hex[:8]}"
    rows = []
    try:
        for n in (int(x) for x in a.partitions.split(",")):
            rows.append(one(client, prefix, n, a))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        unlink_prefix(client, f"{{{prefix}:*")
        if server is not None:
            server.stop()
    print(f"# partitions bench, loadavg {loadavg()}, redis {url}")
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
