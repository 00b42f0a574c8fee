"""Redis memory per queued job, both ways the peers' harness counts it.

    python -m bench.memory [--n 100000] [--json-layout]

Starts a private ``redis-server`` (nothing else on it), enqueues ``--n`` benchmark jobs
(``zqbench.noop(0.0)``, the job body of ``python -m bench``) with ``enqueue_many`` in
chunks of 1,000, and reports:

- ``used_memory`` delta / n, after the server settles;
- the RESTORE method of the shared harness: every key DUMPed, the server emptied, the
  keys RESTOREd one by one, ``used_memory`` delta / n.

``--json-layout`` writes the jobs as releases before the compact record did
(``COMPACT_RECORDS = False``), for the same-run comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import redis

from ._redis import start_private, used_memory


def settled(client: redis.Redis) -> int:
    time.sleep(1.0)  # background frees and the incremental rehash of the big dicts
    return used_memory(client)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--json-layout", action="store_true")
    a = ap.parse_args()
    server = start_private()
    try:
        os.environ["ZQUEUE_REDIS_URL"] = server.url
        os.environ["ZQUEUE_PREFIX"] = "zqbench"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.django_settings")
        import django
        from django.conf import settings

        django.setup()
        if a.json_layout:
            settings.ZQUEUE = {**settings.ZQUEUE, "COMPACT_RECORDS": False}
            from django_zqueue import conf

            conf.reset()
        from django_zqueue import get_queue

        from .tasks import noop

        r = redis.Redis.from_url(server.url)
        noop.enqueue_many([(0.0,)] * 10)  # scripts loaded, connection open
        r.flushdb()
        before = settled(r)
        clients_before = int(r.info("memory").get("mem_clients_normal", 0))
        for i in range(0, a.n, 1000):
            noop.enqueue_many([(0.0,)] * min(1000, a.n - i))
        after = settled(r)
        clients_after = int(r.info("memory").get("mem_clients_normal", 0))
        queued = get_queue("default").total_count()
        items = [(k, r.dump(k), r.pttl(k)) for k in r.scan_iter(count=1000)]
        r.flushdb()
        empty = settled(r)
        for k, v, ttl in items:
            if v is not None:
                r.restore(k, ttl if ttl and ttl > 0 else 0, v)
        restored = settled(r)
        out = {
            "n": a.n,
            "queued": queued,
            "layout": "json" if a.json_layout else "compact",
            "used_memory_bytes_per_job": round((after - before) / a.n, 1),
            "restore_bytes_per_job": round((restored - empty) / a.n, 1),
            # what the connections' buffers add to the delta (clients, not data)
            "clients_bytes_per_job": round((clients_after - clients_before) / a.n, 1),
            "keys": len(items),
            "redis": r.info("server")["redis_version"],
        }
        json.dump(out, sys.stdout)
        print()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
