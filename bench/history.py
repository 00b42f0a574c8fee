"""The history of finished jobs: Redis memory per kept job, and what it adds to an ack.

    python -m bench.history [--n 20000] [--rounds 300] [--json]

Starts a private ``redis-server`` (nothing else on it) and, under its own prefix:

- **memory**: publishes ``--n`` jobs with the task layer's body
  (``{"task": "bench.tasks.noop", "args": [0.0], "kwargs": {}}``), claims them as a
  worker does (consumer ``host:pid:abcd``) and acks them with ``ack_many`` (100 per
  call, with a run time), once with ``keep_finished = n`` and once with 0; the
  ``used_memory`` difference after the server settles, divided by ``n``, is the memory
  of one kept job (its record in ``history``, its entry in ``finished``);
- **ack cost**: ``--rounds`` rounds of 100 jobs published, claimed in one ``claim`` call,
  then acked with one ``ack_many`` call (the worker's flush), and of one job acked with
  ``ack.lua``: the Redis time of the claim and of the ack call (``INFO commandstats``,
  reset before each; the script calls, FCALL or EVALSHA) and the ack's round trip as the
  client sees it, p50 and p95, then the claim and the ack per job of a batch of 100;
  for ``keep_finished`` 0 (off), 10,000,000 (a history still filling: nothing to trim)
  and 10,000 with a full history (calls trim: an ``ack_many`` of 100 about as many as it
  adds, one ``ack`` in 100 about 100), the three taking turns round by round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import redis

from ._redis import commandstats, script_usec, start_private, used_memory

T = TypeVar("T")

BODY = {"task": "bench.tasks.noop", "args": [0.0], "kwargs": {}}
CONSUMER = "bench-host:12345:abcd"


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def settled(client: redis.Redis) -> int:
    time.sleep(1.0)  # background frees and the incremental rehash of the big dicts
    return used_memory(client)


def make_queue(client: redis.Redis, name: str, keep: int) -> Any:
    from django_zqueue.conf import queue_options
    from django_zqueue.queue import Queue

    return Queue(name, queue_options(name, keep_finished=keep), prefix="zqbench", client=client)


def run_through(q: Any, n: int) -> None:
    """Publish, claim and ack (ack_many, 100 per call) ``n`` jobs."""
    from django_zqueue.engine.records import Ack

    for i in range(0, n, 1000):
        q.publish_many([BODY] * min(1000, n - i))
        left = min(1000, n - i)
        while left:
            msgs, _ = q.claim(min(100, left), consumer=CONSUMER)
            batch = q.engine.batch()
            replies = q.engine.consume.add_acks(batch, [Ack(m, run_ms=3) for m in msgs])
            q.engine.send(batch)
            q.engine.consume.settle_acks(replies)
            left -= len(msgs)


def memory(client: redis.Redis, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {"n": n}
    for keep in (n, 0):
        client.flushdb()
        q = make_queue(client, f"mem{keep}", keep)
        run_through(q, 10)  # scripts loaded, connection open
        client.flushdb()
        before = settled(client)
        run_through(q, n)
        out[f"keep_{'n' if keep else 0}_bytes"] = settled(client) - before
        if keep:
            out["kept"] = int(client.zcard(q.engine._keys.finished))
            raw = client.hget(
                q.engine._keys.history, client.zrange(q.engine._keys.finished, 0, 0)[0]
            )
            out["record_bytes"] = len(raw or b"")
    out["bytes_per_kept_job"] = round((out["keep_n_bytes"] - out["keep_0_bytes"]) / n, 1)
    client.flushdb()
    return out


SETTINGS = (("off", 0, False), ("filling", 10_000_000, False), ("full (trims)", 10_000, True))


def ack_cost(client: redis.Redis, rounds: int) -> list[dict[str, Any]]:
    """Redis time and round trip of one ack_many call of 100 jobs, then of one ack.lua, for
    each of SETTINGS, the settings taking turns round by round (so that a busy machine
    slows them alike)."""
    from django_zqueue.engine.records import Ack

    client.flushdb()
    queues = []
    for label, keep, full in SETTINGS:
        q = make_queue(client, f"ack{len(queues)}", keep)
        if full:
            run_through(q, keep + 1000)  # the history is full: calls trim
        queues.append((label, keep, q))
    times: dict[str, dict[str, list[float]]] = {
        label: {k: [] for k in ("claim_us", "claim_rt", "many_us", "many_rt", "one_us", "one_rt")}
        for label, *_ in SETTINGS
    }

    def timed(label: str, kind: str, call: Callable[[], T]) -> T:
        client.config_resetstat()
        t = time.perf_counter()
        got = call()
        times[label][f"{kind}_rt"].append((time.perf_counter() - t) * 1e6)
        times[label][f"{kind}_us"].append(script_usec(commandstats(client))[1])
        return got

    for _ in range(rounds):  # a worker's batch: 100 jobs claimed, then acked in one call
        for label, _keep, q in queues:
            q.publish_many([BODY] * 100)
            msgs, _ = timed(label, "claim", partial(q.claim, 100, consumer=CONSUMER))
            acks = q.engine._shards[0].ack_many([Ack(m, run_ms=3) for m in msgs])
            timed(label, "many", partial(q.engine.run, acks))
    for _ in range(rounds):  # Queue.ack: one job a call
        for label, _keep, q in queues:
            q.publish(BODY)
            msg = q.get(consumer=CONSUMER)
            timed(label, "one", partial(q.engine.run, q.engine.consume.ack_call(msg, run_ms=3)))

    def figures(v: list[float]) -> dict[str, float]:
        return {"p50": round(statistics.median(v), 1), "p95": round(pct(v, 0.95), 1)}

    out = []
    for label, keep, q in queues:
        t = times[label]
        out.append(
            {
                "keep_finished": keep,
                "history": label,
                "kept_at_end": int(client.zcard(q.engine._keys.finished)),
                "claim_100_redis_us": figures(t["claim_us"]),
                "ack_many_100_redis_us": figures(t["many_us"]),
                "ack_many_100_round_trip_us": figures(t["many_rt"]),
                "ack_redis_us": figures(t["one_us"]),
                "ack_round_trip_us": figures(t["one_rt"]),
            }
        )
    client.flushdb()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="jobs for the memory figure")
    ap.add_argument("--rounds", type=int, default=300, help="ack calls timed per setting")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not (1000 <= a.n <= 1_000_000 and 10 <= a.rounds <= 10_000):
        ap.error("1,000 <= --n <= 1,000,000 and 10 <= --rounds <= 10,000")
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.django_settings")
    import django

    django.setup()
    server = start_private()
    try:
        client = redis.Redis.from_url(server.url)
        out: dict[str, Any] = {"redis": client.info("server")["redis_version"]}
        out["memory"] = memory(client, a.n)
        out["ack"] = ack_cost(client, a.rounds)
    finally:
        server.stop()
    if a.json:
        json.dump(out, sys.stdout, indent=2)
        print()
        return
    m = out["memory"]
    print(f"Redis {out['redis']}, private server")
    print(
        f"memory: {m['bytes_per_kept_job']} bytes of used_memory per kept job "
        f"({m['n']:,} jobs; record {m['record_bytes']} bytes with its body)"
    )
    print(f"{'history':16} {'ack_many(100) Redis us':>24} {'round trip us':>16}"
          f" {'ack Redis us':>14} {'round trip us':>14}")  # fmt: skip
    for r in out["ack"]:
        many, many_rt = r["ack_many_100_redis_us"], r["ack_many_100_round_trip_us"]
        one, one_rt = r["ack_redis_us"], r["ack_round_trip_us"]
        print(
            f"{r['history']:16} {many['p50']:>11} (p95 {many['p95']:>6}) "
            f"{many_rt['p50']:>9} {one['p50']:>9} (p95 {one['p95']:>5}) {one_rt['p50']:>9}"
        )
    print("a batch of 100: Redis µs per job (p50 of the calls / 100)")
    print(f"{'history':16} {'claim':>8} {'ack_many':>9} {'claim + ack':>12}")
    for r in out["ack"]:
        claim, many = r["claim_100_redis_us"]["p50"] / 100, r["ack_many_100_redis_us"]["p50"] / 100
        print(f"{r['history']:16} {claim:>8.2f} {many:>9.2f} {claim + many:>12.2f}")


if __name__ == "__main__":
    main()
