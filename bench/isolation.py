"""Per-job overhead of process isolation, in one run: django_zqueue's thread mode and
``--pool process`` (a forked child per job), and RQ's fork-per-job ``Worker`` and its
``SimpleWorker`` (no fork), each draining the same number of no-op jobs (one INCR) with
one worker process, on one private redis-server.

    python -m bench.isolation [--n 2000] [--rq-python PATH] [--repeat 2]

``--rq-python``: a Python with rq installed (e.g. a venv: ``python -m venv v &&
v/bin/pip install rq``); without it the RQ rows are left out. The host is shared and
noisy: only the ratios between rows of one run mean anything.
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


def log(*a: Any) -> None:
    print("[bench.isolation]", *a, file=sys.stderr, flush=True)


def drain_zqueue(url: str, n: int, pool: str) -> dict[str, Any]:
    """Enqueue n no-op jobs, drain them with one burst worker; steady time per job."""
    import redis

    from bench.tasks import counter_keys, noop

    prefix = os.environ["ZQUEUE_PREFIX"]
    done_key, _ = counter_keys(prefix)
    r = redis.Redis.from_url(url)
    r.delete(done_key)
    for i in range(0, n, 1000):
        noop.enqueue_many([(0.0,)] * min(1000, n - i))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(ROOT / "testproject/manage.py"), "zqueue_worker", "-v", "0"]
    cmd += ["--burst", "--queues", "default", "--pool", pool]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first: tuple[float, int] | None = None
    while True:
        done = int(r.get(done_key) or 0)
        now = time.perf_counter()
        if done and first is None:
            first = (now, done)
        if done >= n or proc.poll() is not None:
            break
        time.sleep(0.005)
    end = time.perf_counter()
    proc.wait(60)
    done = int(r.get(done_key) or 0)
    assert first is not None and done == n, f"{pool}: {done} of {n} jobs done"
    return {"done": done, "steady_jobs": done - first[1], "steady_s": end - first[0]}


def drain_rq(rq_python: str, url: str, n: int, worker_class: str) -> dict[str, Any]:
    script = ROOT / "bench" / "rq_side" / "rq_noop.py"
    out = subprocess.run(
        [rq_python, str(script), url, str(n), worker_class],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["done"] == n, f"rq {worker_class}: {got['done']} of {n} jobs done"
    return got


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.isolation")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each row (best kept)")
    ap.add_argument("--rq-python", default=None)
    args = ap.parse_args()

    from bench._redis import start_private

    server = start_private()
    try:
        os.environ["ZQUEUE_REDIS_URL"] = server.url
        os.environ["ZQUEUE_PREFIX"] = f"zqiso-{uuid.uuid4().hex[:8]}"
        os.environ["DJANGO_SETTINGS_MODULE"] = "bench.django_settings"
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        rows: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for pool in ("thread", "process"):
                got = drain_zqueue(server.url, args.n, pool)
                rows.setdefault(f"zqueue --pool {pool}", []).append(
                    got["steady_s"] / got["steady_jobs"]
                )
            if args.rq_python:
                for name, cls in (
                    ("rq SimpleWorker (no fork)", "rq.worker.SimpleWorker"),
                    ("rq Worker (fork per job)", "rq.worker.Worker"),
                ):
                    got = drain_rq(args.rq_python, server.url, args.n, cls)
                    rows.setdefault(name, []).append(got["steady_s"] / got["steady_jobs"])
    finally:
        server.stop()
    best = {name: min(v) * 1000 for name, v in rows.items()}  # ms per job
    base = best["zqueue --pool thread"]
    print(f"\nn={args.n} jobs per row, one worker process, best of {args.repeat}")
    print("| row | ms per job | jobs/s | x zqueue thread |")
    print("|---|---:|---:|---:|")
    for name, ms in best.items():
        print(f"| {name} | {ms:.3f} | {1000 / ms:,.0f} | {ms / base:.2f} |")
    thread, proc = best["zqueue --pool thread"], best["zqueue --pool process"]
    print(f"\nzqueue isolation overhead: {proc - thread:.3f} ms per job")
    if "rq Worker (fork per job)" in best:
        fork, simple = best["rq Worker (fork per job)"], best["rq SimpleWorker (no fork)"]
        print(f"rq fork-per-job overhead: {fork - simple:.3f} ms per job")
        print(f"zqueue process / rq fork: {proc / fork:.2f}")


if __name__ == "__main__":
    main()
