"""Workflows: what chains, groups and chords cost next to plain jobs, and Celery's chord
beside ours, on the same Redis in the same run.

    python -m bench.workflows [--redis-url URL] [--n 10000] [--chain 100]
                              [--cases NAMES] [--celery-python PATH] [--timeout 300]

One ``zqueue_worker`` process (``--concurrency 1``) is started, then each case is
enqueued and timed until every job of it has run (a done counter each job INCRs):

- ``enqueue_many``: the N jobs, plain (the baseline);
- ``group``: the same N jobs as one group;
- ``chord``: the N jobs and a callback that gets the list of their N results;
- ``batch``: the N jobs as a ``batch`` with an ``on_complete`` that gets the summary
  (ids per outcome, the N results);
- ``chains``: N / ``--chain`` chains of ``--chain`` jobs, each passing its result on.

``--cases chord,batch`` runs only those, in that order (the baseline ``enqueue_many``
always runs first). Each case also reports the redis-server's CPU seconds (``INFO cpu``,
user + sys) it took.

Then, in this process, Redis round trips per dependency edge: a chain of 1,000 jobs run
by hand through the queue core as a worker does (claim, ack with the result passed on,
dispatch), minus the same 1,000 jobs plain, divided by the 999 edges.

With ``--celery-python`` (an interpreter with ``celery[redis]``), Celery's chord of N
(Redis broker and result backend, one ``-P prefork -c 1`` worker) and Celery's plain N
jobs run on the same server (:mod:`bench.workflows_celery`). The host is shared and
noisy: only the ratios within one run mean anything. Starts a private redis-server on a
free port unless ``--redis-url`` is given (then only keys under a fresh prefix, and for
Celery its own db number, are used). Every wait is bounded by ``--timeout``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: one worker process, one thread (as Celery's -P prefork -c 1 beside it)
WORKER = ("--queues", "default", "--concurrency", "1")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.workflows")
    ap.add_argument("--redis-url", help="use this Redis (default: a private redis-server)")
    ap.add_argument("--n", type=int, default=10_000, help="jobs per case (10000)")
    ap.add_argument("--chain", type=int, default=100, help="jobs per chain (100)")
    ap.add_argument("--timeout", type=float, default=300.0, help="time box per case, s")
    ap.add_argument(
        "--cases", default="group,chord,batch,chains", help="cases besides enqueue_many"
    )
    ap.add_argument("--celery-python", help="a Python with celery[redis]: Celery's chord too")
    ap.add_argument("--celery-db", type=int, default=9, help="Redis db for Celery (9)")
    return ap.parse_args()


def main() -> None:
    a = parse_args()
    server = None
    url = a.redis_url
    if url is None:
        from bench._redis import start_private

        server = start_private()
        url = f"redis://127.0.0.1:{server.port}/0"
    prefix = f"zqbw-{uuid.uuid4().hex[:8]}"
    os.environ.update(
        ZQUEUE_REDIS_URL=url,
        ZQUEUE_PREFIX=prefix,
        DJANGO_SETTINGS_MODULE="bench.django_settings",
    )
    try:
        rows = run_ours(a, url, prefix)
        rows["round_trips_per_edge"] = round_trips_per_edge()
        if a.celery_python:
            rows["celery"] = run_celery(a, url)
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(rows, indent=2))
    print(table(rows, a), file=sys.stderr)


def run_ours(a: argparse.Namespace, url: str, prefix: str) -> dict[str, Any]:
    import django

    django.setup()
    import redis

    from bench import tasks as bt
    from django_zqueue import batch, chain, chord, group

    client = redis.Redis.from_url(url)
    done_key = bt.counter_keys(prefix)[0]
    cases: dict[str, Any] = {
        "enqueue_many": lambda: bt.member.enqueue_many([(i,) for i in range(a.n)]),
        "group": lambda: group(bt.member.s(i) for i in range(a.n)).enqueue(),
        "chord": lambda: chord((bt.member.s(i) for i in range(a.n)), bt.total.s()).enqueue(),
        "batch": lambda: batch(
            (bt.member.s(i) for i in range(a.n)), on_complete=bt.completed.s()
        ).enqueue(),
        "chains": lambda: [
            chain(bt.member.s(c), *(bt.member.s() for _ in range(a.chain - 1))).enqueue()
            for c in range(a.n // a.chain)
        ],
    }
    wanted = ["enqueue_many", *(c for c in a.cases.split(",") if c != "enqueue_many")]
    cases = {k: cases[k] for k in wanted if k in cases}  # in the order asked
    targets = {"enqueue_many": a.n, "group": a.n, "chord": a.n + 1, "batch": a.n + 1}
    targets["chains"] = a.n
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), "zqueue_worker", *WORKER],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    out: dict[str, Any] = {"n": a.n, "chain_length": a.chain}
    try:
        time.sleep(2)  # the worker's start
        for name, enqueue in cases.items():
            client.set(done_key, 0)
            cpu0 = redis_cpu(client)
            t0 = time.perf_counter()
            enqueue()
            t_enq = time.perf_counter() - t0
            ok = wait_for(client, done_key, targets[name], a.timeout)
            total = time.perf_counter() - t0
            out[name] = {
                "enqueue_s": round(t_enq, 3),
                "total_s": round(total, 3),
                "jobs_per_s": round(targets[name] / total, 1),
                "redis_cpu_s": round(redis_cpu(client) - cpu0, 3),
                "drained": ok,
            }
            print(f"[bench.workflows] {name}: {out[name]}", file=sys.stderr, flush=True)
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(30)
    return out


def redis_cpu(client: Any) -> float:
    """The server's CPU seconds so far (user + sys, main thread and children)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def wait_for(client: Any, key: str, target: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if int(client.get(key) or 0) >= target:
            return True
        time.sleep(0.01)
    return False


def round_trips_per_edge(n: int = 1000) -> dict[str, float]:
    """Round trips (commands sent on a connection, a pipeline counting once) of n jobs
    run by hand, as a chain and plain; the difference per edge."""
    import redis.connection

    from bench import tasks as bt
    from django_zqueue import chain, get_queue
    from django_zqueue.engine.scripts import flow_ended

    sent = [0]
    original = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        sent[0] += 1
        original(self, command, check_health)

    q = get_queue("default")

    def run(enqueue: Any) -> int:
        enqueue()
        sent[0] = 0
        while True:
            msgs, _ = q.claim(1)
            if not msgs:
                return sent[0]
            b = q.engine.batch()
            pending = [b.add(q.engine.consume.ack_call(m, passed="1")) for m in msgs]
            q.engine.send(b)
            ended = [
                m.tag for m, p in zip(msgs, pending, strict=True) if flow_ended(p.call, p.reply)
            ]
            if ended:
                q.dispatch(ended)

    redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    try:
        plain = run(lambda: bt.member.enqueue_many([(i,) for i in range(n)]))
        rest = [bt.member.s() for _ in range(n - 1)]
        chained = run(lambda: chain(bt.member.s(0), *rest).enqueue())
    finally:
        redis.connection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
    return {
        "plain_per_job": round(plain / n, 2),
        "chain_per_job": round(chained / n, 2),
        "extra_per_edge": round((chained - plain) / (n - 1), 2),
    }


def run_celery(a: argparse.Namespace, url: str) -> dict[str, Any]:
    base = url.rsplit("/", 1)[0]
    cmd = [a.celery_python, str(ROOT / "bench" / "workflows_celery.py")]
    cmd += ["--redis-url", f"{base}/{a.celery_db}", "--n", str(a.n), "--timeout", str(a.timeout)]
    got = subprocess.run(
        cmd, cwd=ROOT / "bench", capture_output=True, text=True, timeout=3 * a.timeout
    )
    if got.returncode != 0:
        return {"error": got.stderr[-2000:]}
    return dict(json.loads(got.stdout.strip().splitlines()[-1]))


def table(rows: dict[str, Any], a: argparse.Namespace) -> str:
    base = rows["enqueue_many"]["jobs_per_s"]
    lines = [
        f"workflows, N={a.n}, one worker process (concurrency 1); same run, shared host",
        "| case | enqueue s | total s | jobs/s | vs enqueue_many | Redis CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("enqueue_many", "group", "chord", "batch", "chains"):
        if name not in rows:
            continue
        r = rows[name]
        lines.append(
            f"| {name} | {r['enqueue_s']} | {r['total_s']} | {r['jobs_per_s']} | "
            f"{r['jobs_per_s'] / base:.2f} | {r['redis_cpu_s']} |"
        )
    c = rows.get("celery")
    if c and "error" not in c:
        for name in ("plain", "chord"):
            r = c[name]
            lines.append(
                f"| Celery {name} | {r['enqueue_s']} | {r['total_s']} | {r['jobs_per_s']} | "
                f"{r['jobs_per_s'] / base:.2f} |"
            )
    rt = rows["round_trips_per_edge"]
    lines.append(f"round trips: {rt}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
