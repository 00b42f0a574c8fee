"""The admin dashboard on a big queue: render time and Redis commands per page.

    python -m bench.admin_scale [--url redis://127.0.0.1:6379/0] [--ready 1000000]
                                [--dead 100000] [--finished 100000] [--n 30]
                                [--partitions 1] [--groups 0] [--json]

Fills one queue under a key prefix of its own with ``--ready`` waiting jobs (plus 10,000
delayed and 200 in flight with progress), ``--dead`` dead letters (published, claimed
and nacked with ``dead=True`` through the queue's scripts, pipelined) and ``--finished``
jobs that succeeded (claimed and acked with ``ack_many`` as a worker does, a result kept
for one in ten, 1,000 of them cancelled instead), kept in the history of finished jobs
(``keep_finished`` set to hold them all), then renders every
dashboard page ``--n`` times with Django's test client (without the test runner's
template instrumentation), logged in as a superuser (so payloads and errors are read
too), and reports p50/p95 render time, Redis commands and
round trips per page. Commands are counted in this process by wrapping redis-py's
connection, so other clients of the same Redis don't disturb the figures.

With ``--groups N`` the queue is a fair one (``fairness="groups"``) and its ready jobs are
spread over N groups (tenants), so the queue page also reads the per-group figures.

Targets: p95 <= 150 ms and <= 50 commands for every page, whatever the queue size.
The fill is bounded by the arguments; the queue's keys are UNLINKed at the end (also
after an error or Ctrl-C). Uses an in-memory test database for the admin user.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TARGET_P95_MS = 150.0
TARGET_COMMANDS = 50


class Counter:
    """Counts commands and round trips sent by this process through redis-py."""

    def __init__(self) -> None:
        self.commands = 0
        self.round_trips = 0
        self.names: dict[str, int] = {}

    @contextmanager
    def installed(self) -> Iterator[Counter]:
        from redis.connection import AbstractConnection

        send, pack, packed = (
            AbstractConnection.send_command,
            AbstractConnection.pack_commands,
            AbstractConnection.send_packed_command,
        )
        counter = self

        def note(args: Any) -> None:
            first = args[0]
            name = (first.decode() if isinstance(first, bytes) else str(first)).upper()
            counter.commands += 1
            counter.names[name] = counter.names.get(name, 0) + 1

        def send_command(conn: Any, *args: Any, **kwargs: Any) -> Any:
            note(args)
            return send(conn, *args, **kwargs)

        def pack_commands(conn: Any, commands: Any) -> Any:
            commands = list(commands)
            for c in commands:
                note(c)
            return pack(conn, commands)

        def send_packed_command(conn: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            counter.round_trips += 1
            return packed(conn, command, *args, **kwargs)

        AbstractConnection.send_command = send_command  # type: ignore[method-assign]
        AbstractConnection.pack_commands = pack_commands  # type: ignore[method-assign]
        AbstractConnection.send_packed_command = send_packed_command  # type: ignore[method-assign]
        try:
            yield self
        finally:
            AbstractConnection.send_command = send  # type: ignore[method-assign]
            AbstractConnection.pack_commands = pack  # type: ignore[method-assign]
            AbstractConnection.send_packed_command = packed  # type: ignore[method-assign]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def publish_ready(q: Any, start: int, n: int, priority: int, groups: int) -> None:
    bodies = [
        {"task": "bench.tasks.process", "args": [start + j], "kwargs": {"user": (start + j) % 997}}
        for j in range(n)
    ]
    if not groups:
        q.publish_many(bodies, priority=priority)
        return
    for i in range(0, n, 1000):  # one group per job: tenant-<i mod groups>
        q.publish_prepared(
            [
                q.prepare(b, priority=priority, group=f"tenant-{(start + i + j) % groups}")
                for j, b in enumerate(bodies[i : i + 1000])
            ]
        )


#: the per-job keys the fill made (kept results, cancel records): deleted at the end
PER_JOB_KEYS: list[str] = []


def fill_finished(q: Any, n: int) -> None:
    """``n`` jobs that ended: published, claimed and acked with ``ack_many`` (100 a call,
    10 calls a round trip, run times measured, a result kept for one in ten), the last
    1,000 cancelled instead. Their result keys and cancel records go to PER_JOB_KEYS."""
    from django_zqueue.engine.records import Ack

    cancelled = min(1000, n // 10)
    done = 0
    while done < n - cancelled:
        size = min(1000, n - cancelled - done)
        q.publish_many(
            [{"task": "bench.tasks.report", "args": [done + j], "kwargs": {}} for j in range(size)],
            priority=20,  # ahead of every ready job: claimed first
        )
        msgs, _ = q.claim(size, consumer="bench-worker:2:beef")
        acks = [
            q.engine.consume.make_ack(m, {"rows": done + j}, 86400, 5 + j % 200)
            if j % 10 == 0
            else Ack(m, run_ms=5 + j % 200)
            for j, m in enumerate(msgs)
        ]
        batch = q.engine.batch()
        replies = q.engine.consume.add_acks(batch, acks)
        q.engine.send(batch)
        q.engine.consume.settle_acks(replies)
        PER_JOB_KEYS.extend(
            q.engine._keys_for(a.msg.tag).result(a.msg.tag) for a in acks if a.result
        )
        done += len(msgs)
    tags = q.publish_many(
        [{"task": "bench.tasks.report", "args": [j], "kwargs": {}} for j in range(cancelled)],
        delay=3600,
    )
    batch = q.engine.batch()
    for tag in tags:
        batch.add(q.engine._shard_for(tag).cancel(tag, 86_400_000))
        PER_JOB_KEYS.append(q.engine._keys_for(tag).cancelled(tag))
    q.engine.send(batch)


def fill(q: Any, ready: int, dead: int, groups: int = 0, finished: int = 0) -> dict[str, Any]:
    """Publish ``dead`` jobs at priority 10, bury them, run ``finished`` jobs through
    (:func:`fill_finished`), then ``ready`` jobs at priorities 0 and 5 (over ``groups``
    groups when given), 10,000 delayed jobs and 200 leased ones with progress."""
    chunk = 20_000
    t = time.perf_counter()
    for i in range(0, dead, chunk):
        n = min(chunk, dead - i)
        q.publish_many(
            [{"task": "bench.tasks.charge", "args": [i + j], "kwargs": {}} for j in range(n)],
            priority=10,
        )
    error = "builtins.RuntimeError: card declined\nTraceback (most recent call last):\n" + (
        '  File "bench/tasks.py", line 12, in charge\n    raise RuntimeError("card declined")\n'
    )
    buried = 0
    while buried < dead:
        msgs, _ = q.claim(min(1000, dead - buried), consumer="bench")
        if not msgs:
            break
        batch = q.engine.batch()  # plain EVALSHA calls in one round trip
        for m in msgs:
            batch.add(q.engine.consume.nack_call(m, error, 0, dead=True))
        q.engine.send(batch)
        buried += len(msgs)
    t_dead = time.perf_counter() - t
    t = time.perf_counter()
    fill_finished(q, finished)
    t_finished = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(0, ready, chunk):
        n = min(chunk, ready - i)
        publish_ready(q, i, n, 5 if (i // chunk) % 10 == 3 else 0, groups)
        if (i // chunk) % 10 == 9:
            log(f"  {i + n:,} ready")
    t_ready = time.perf_counter() - t
    q.publish_many([{"task": "bench.tasks.later", "args": [j]} for j in range(10_000)], delay=3600)
    leased = q.claim(200, consumer="bench-worker:1:abcd")[0]
    batch = q.engine.batch()
    for j, m in enumerate(leased):
        batch.add(q.engine.consume.touch_call(m, progress=(j % 100) / 100, note=f"step {j}"))
    q.engine.send(batch)
    # a live worker holding those 200, and an hour of per-task statistics (13 slots)
    from django_zqueue.worker import taskstats

    seen = int(time.time() * 1000)
    worker = {"threads": 8, "seen": seen, "host": "bench", "pid": 1, "started": seen - 60_000}
    q.engine._client.hset(q.engine._keys.workers, "bench-worker:1:abcd", json.dumps(worker))
    now = taskstats.slot_now()
    for slot in range(now - taskstats.SLOTS + 1, now + 1):
        fields = {}
        for t, task in enumerate(
            ("bench.tasks.process", "bench.tasks.charge", "bench.tasks.later")
        ):
            fields.update({f"{task}|n": 900 + t, f"{task}|f": t, f"{task}|s": 90_000})
            fields.update({f"{task}|b{b}": 50 + b for b in range(len(taskstats.BOUNDS_MS) + 1)})
        q.engine._client.hset(q.engine._keys.task_stats(slot), mapping=fields)
        q.engine._client.expire(q.engine._keys.task_stats(slot), taskstats.KEEP_SECONDS)
    return {
        "fill_dead_s": round(t_dead, 1),
        "fill_finished_s": round(t_finished, 1),
        "fill_ready_s": round(t_ready, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("ZQUEUE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--ready", type=int, default=1_000_000)
    ap.add_argument("--dead", type=int, default=100_000)
    ap.add_argument("--finished", type=int, default=100_000, help="jobs in the history")
    ap.add_argument("--n", type=int, default=30, help="renders per page (after one warm-up)")
    ap.add_argument(
        "--partitions", type=int, default=1, help="partitions of the benchmarked queue (1-16)"
    )
    ap.add_argument(
        "--groups", type=int, default=0, help="spread the ready jobs over N groups (fair queue)"
    )
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    a = ap.parse_args()
    if not (0 <= a.ready <= 5_000_000 and 0 <= a.dead <= 1_000_000 and 1 <= a.n <= 1000):
        ap.error("--ready <= 5,000,000, --dead <= 1,000,000, 1 <= --n <= 1000")
    if not 0 <= a.finished <= 1_000_000:
        ap.error("0 <= --finished <= 1,000,000")
    if not 1 <= a.partitions <= 16:
        ap.error("1 <= --partitions <= 16")
    if not 0 <= a.groups <= 1_000_000:
        ap.error("0 <= --groups <= 1,000,000")

    sys.path.insert(0, ROOT)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.test import Client
    from django.test.runner import DiscoverRunner
    from django.test.utils import override_settings

    from django_zqueue import get_queue
    from django_zqueue.tasks.watch import position_url

    prefix = f"zqbench-{uuid.uuid4().hex[:8]}"
    zq = {
        "REDIS_URL": a.url,
        "PREFIX": prefix,
        "ENQUEUE_ON_COMMIT": False,
        "QUEUES": {
            "bench": {
                "dead_letter_max": max(10_000, 2 * a.dead),
                "dead_letter_ttl": 30 * 86400,
                "keep_finished": max(10_000, 2 * a.finished),
                "partitions": a.partitions,
                **({"fairness": "groups"} if a.groups else {}),
            },
            "emails": {},
            "reports": {},
        },
    }
    # No setup_test_environment(): its instrumented template rendering (a signal with a
    # copy of the context per template) is test-only overhead that a real request lacks.
    runner = DiscoverRunner(verbosity=0)
    old_db = runner.setup_databases()
    override = override_settings(ZQUEUE=zq, DEBUG=False)
    override.enable()
    q = get_queue("bench")
    results: dict[str, Any] = {
        "ready": a.ready,
        "dead": a.dead,
        "finished": a.finished,
        "n": a.n,
        "partitions": a.partitions,
        "groups": a.groups,
        "prefix": prefix,
    }
    try:
        mem0 = q.engine._client.info("memory")["used_memory"]
        log(
            f"filling {a.ready:,} ready, {a.dead:,} dead and {a.finished:,} finished jobs "
            f"under {prefix!r} ..."
        )
        results.update(fill(q, a.ready, a.dead, a.groups, a.finished))
        results["history"] = {
            name: n for name, n in q.read.finished(limit=1).counts.items() if name != "dead"
        }
        counts = q.counts()
        results["counts"] = counts
        results["redis_memory_mb"] = round(
            (q.engine._client.info("memory")["used_memory"] - mem0) / 2**20
        )
        fill_s = results["fill_dead_s"] + results["fill_finished_s"] + results["fill_ready_s"]
        log(f"filled: {counts}, history {results['history']} in {fill_s:.0f} s")

        # the middle of the first shard (of the queue when unpartitioned)
        first = q.engine._part_keys[0]
        mid, dmid = a.ready // 2 // a.partitions, a.dead // 2 // a.partitions
        ready_mid = q.engine._client.zrange(first.ready, mid, mid)[0].decode()
        dead_mid = q.engine._client.zrevrange(first.dead, dmid, dmid)[0].decode()
        fmid = a.finished // 2 // a.partitions
        done_mid = (q.engine._client.zrevrange(first.finished, fmid, fmid) or [b"none"])[0].decode()
        fin_pages = max(1, (a.finished - 1000) // 50)  # the succeeded jobs' last page
        base = "/admin/django_zqueue/queue/"
        mid_page = max(1, a.ready // 2 // 50)
        pages = {
            "overview": base,
            "ready p1": f"{base}q/bench/",
            f"ready p{mid_page} (offset {a.ready // 2:,})": f"{base}q/bench/?page={mid_page}",
            "ready last page": f"{base}q/bench/?page=999999999",
            "ready p1, 200 per page": f"{base}q/bench/?per_page=200",
            "delayed p1": f"{base}q/bench/?state=delayed",
            "in flight p1": f"{base}q/bench/?state=leased",
            "dead p1": f"{base}q/bench/?state=dead",
            "dead p1000": f"{base}q/bench/?state=dead&page=1000",
            "job (ready, mid-queue)": f"{base}q/bench/job/?id={ready_mid}",
            "job (dead)": f"{base}q/bench/job/?id={dead_mid}",
            "search -> redirect": f"{base}search/?q={ready_mid}",
            "finished p1 (all states)": f"{base}q/bench/?state=finished",
            "finished p40 (all, offset 1,950: the last merged)": (
                f"{base}q/bench/?state=finished&page=40"
            ),
            "finished, succeeded p1": f"{base}q/bench/?state=finished&ended=succeeded",
            f"finished, succeeded p{fin_pages} (last)": (
                f"{base}q/bench/?state=finished&ended=succeeded&page={fin_pages}"
            ),
            "finished, cancelled p1": f"{base}q/bench/?state=finished&ended=cancelled",
            "job (succeeded, mid-history)": f"{base}q/bench/job/?id={done_mid}",
            "search -> redirect (succeeded)": f"{base}search/?q={done_mid}",
            "search by arguments (ready, 50 matches)": (
                f"{base}q/bench/find/?state=ready&text=bench.tasks.process"
            ),
            "metrics": f"{base}metrics/",
            "workers": f"{base}workers/",
            "ready, filter by task (200 read)": f"{base}q/bench/?task=process",
            "dead, filter by error (200 read)": f"{base}q/bench/?state=dead&error=declined",
            "position (JSON, end user)": position_url(q.name, ready_mid),
        }
        client = Client()
        client.force_login(User.objects.create_superuser("bench", "bench@example.com", "pw"))
        rows = []
        for label, url in pages.items():
            first = client.get(url)  # warm-up: templates, connection, scripts
            assert first.status_code in (200, 302), (label, first.status_code)
            times = []
            counter = Counter()
            with counter.installed():
                for _ in range(a.n):
                    t = time.perf_counter()
                    r = client.get(url)
                    times.append((time.perf_counter() - t) * 1000)
                    assert r.status_code == first.status_code
            row = {
                "page": label,
                "p50_ms": round(statistics.median(times), 1),
                "p95_ms": round(pct(times, 0.95), 1),
                "commands": counter.commands / a.n,
                "round_trips": counter.round_trips / a.n,
                "kinds": sorted(counter.names),
            }
            rows.append(row)
            log(
                f"  {label:34} p50 {row['p50_ms']:6.1f} ms  p95 {row['p95_ms']:6.1f} ms  "
                f"{row['commands']:4.0f} commands  {row['round_trips']:3.0f} round trips"
            )
        results["pages"] = rows
        results["load_average_1m"] = round(os.getloadavg()[0], 2)
        results["ok"] = all(
            r["p95_ms"] <= TARGET_P95_MS and r["commands"] <= TARGET_COMMANDS for r in rows
        )
        forbidden = {"KEYS", "SCAN", "HSCAN", "ZSCAN", "EVAL"} & {
            k for r in rows for k in r["kinds"]
        }
        results["forbidden_commands"] = sorted(forbidden)
    finally:
        now = int(time.time()) // 300
        for name in zq["QUEUES"]:  # type: ignore[union-attr]
            qq = get_queue(name)
            for keys in {qq.keys, *qq.engine._part_keys}:
                qq.client.unlink(*keys.all())
                qq.client.unlink(*(keys.task_stats(s) for s in range(now - 20, now + 1)))
            qq.clear()  # the layout record of a partitioned queue (the rest is gone)
        for i in range(0, len(PER_JOB_KEYS), 1000):  # one slot each: one UNLINK per key
            pipe = q.engine._client.pipeline(transaction=False)
            for key in PER_JOB_KEYS[i : i + 1000]:
                pipe.unlink(key)
            pipe.execute()
        override.disable()
        runner.teardown_databases(old_db)
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        print(
            f"\nadmin dashboard, {a.ready:,} ready + {a.dead:,} dead + {a.finished:,} finished "
            "jobs, "
            f"{a.partitions} partition(s), {a.groups or 'no'} groups, {a.n} renders per page"
        )
        print(
            f"fill: dead {results['fill_dead_s']} s, finished {results['fill_finished_s']} s, "
            f"ready {results['fill_ready_s']} s; "
            f"Redis memory for the queue ~{results['redis_memory_mb']} MB"
        )
        print(f"{'page':36} {'p50 ms':>7} {'p95 ms':>7} {'commands':>9} {'round trips':>12}")
        for r in results["pages"]:
            print(
                f"{r['page']:36} {r['p50_ms']:7.1f} {r['p95_ms']:7.1f} "
                f"{r['commands']:9.0f} {r['round_trips']:12.0f}"
            )
        print(f"load average (1 min) at the end: {results['load_average_1m']}")
        verdict = "met" if results["ok"] else "NOT met"
        print(
            f"targets (p95 <= {TARGET_P95_MS:.0f} ms, <= {TARGET_COMMANDS} commands): {verdict}; "
            f"KEYS/SCAN/EVAL used: {results['forbidden_commands'] or 'none'}"
        )


if __name__ == "__main__":
    main()
