"""Finding a job by its arguments deep in a queue (``queue.read.search``).

    python -m bench.search [--n 1000000] [--at 900000]

Starts a private ``redis-server`` (nothing else on it), publishes ``--n`` small jobs
(``{"task": "zqbench.noop", "args": [i]}``) with ``publish_many`` in chunks of 1,000, the
one at rank ``--at`` holding a text no other job holds, and times finding it from the
start of the ready set:

- ``search_s``: the whole walk, ``read.search`` calls with their default budgets (100
  steps of 1,000 jobs or about a second each), each continuing from the last's cursor;
- the Redis time of one step (``search.lua`` on 1,000 jobs), from ``INFO commandstats``
  (``EVALSHA`` usec per call over the walk: no other command ran it), and the longest
  step seen from the client (a second walk, one step per call).

Every loop is bounded by ``--n``; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import redis

from ._redis import commandstats, start_private, usec_per_call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--at", type=int, default=900_000)
    a = ap.parse_args()
    if not 0 <= a.at < a.n:
        ap.error("--at must be in [0, n)")
    server = start_private()
    try:
        os.environ["ZQUEUE_REDIS_URL"] = server.url
        os.environ["ZQUEUE_PREFIX"] = "zqbench"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.django_settings")
        import django

        django.setup()
        from django_zqueue import get_queue
        from django_zqueue.read.search import search

        q = get_queue("default")
        r = redis.Redis.from_url(server.url)
        needle = "needle-7f3a"
        t0 = time.perf_counter()
        tags: list[str] = []
        for lo in range(0, a.n, 1000):
            hi = min(lo + 1000, a.n)
            bodies = [
                {"task": "zqbench.noop", "args": [i, needle] if i == a.at else [i]}
                for i in range(lo, hi)
            ]
            got = q.publish_many(bodies)
            if lo <= a.at < hi:
                tags.append(got[a.at - lo])
        fill_s = time.perf_counter() - t0
        target = tags[0]
        assert q.rank(target) == a.at

        before = commandstats(r)
        t0 = time.perf_counter()
        found, calls, steps, looked, cursor = [], 0, 0, 0, None
        for _ in range(a.n // 1000 + 2):  # bounded: one step at least per call
            res = q.read.search(needle, "ready", 1, cursor)
            calls, steps, looked = calls + 1, steps + res.steps, looked + res.looked
            found += res.matches
            if found or res.done:
                break
            cursor = res.cursor
        search_s = time.perf_counter() - t0
        after = commandstats(r)
        assert [(m.tag, m.rank) for m in found] == [(target, a.at)], found

        longest, cursor = 0.0, None
        for _ in range(a.n // 1000 + 2):
            t1 = time.perf_counter()
            res = search(q.engine, needle, "ready", 1, cursor, max_steps=1)
            longest = max(longest, time.perf_counter() - t1)
            if res.matches or res.done:
                break
            cursor = res.cursor
        # search.lua is read-only: FCALL_RO (EVALSHA with LUA_FUNCTIONS off)
        evalsha = usec_per_call(before, after, "fcall_ro") or usec_per_call(
            before, after, "evalsha"
        )
        out = {
            "n": a.n,
            "at": a.at,
            "fill_s": round(fill_s, 1),
            "search_s": round(search_s, 3),
            "search_calls": calls,
            "steps": steps,
            "jobs_looked_at": looked,
            "redis_usec_per_step": round(evalsha, 1) if evalsha else None,
            "jobs_per_s": round(looked / search_s),
            "longest_step_ms_client": round(longest * 1000, 2),
            "redis": r.info("server")["redis_version"],
        }
        json.dump(out, sys.stdout)
        print()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
