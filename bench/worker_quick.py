"""Quick worker figures: no-op jobs/s drained by 1 and 2 worker processes, and the
enqueue->start latency with an idle worker (200 jobs, 20 ms apart).

    python -m bench.worker_quick [--n 20000] [--prefetch auto]

Drains with --prefetch (default: auto, the worker's default), then 1 and 20 for comparison.

Uses the testproject settings under a private key prefix; deletes only its own keys.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIX = f"zqbench-{uuid.uuid4().hex[:8]}"
os.environ["ZQUEUE_PREFIX"] = PREFIX
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django_zqueue import get_queue  # noqa: E402
from testproject.demo import tasks  # noqa: E402


def worker(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(ROOT / "testproject/manage.py"), "zqueue_worker", "-v", "0", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def drain(n: int, processes: int, prefetch: str) -> float:
    q = get_queue("default")
    q.clear()
    for i in range(0, n, 1000):
        tasks.noop.enqueue_many([()] * min(1000, n - i))
    t0 = time.perf_counter()
    procs = [worker("--burst", "--prefetch", str(prefetch)) for _ in range(processes)]
    for p in procs:
        p.wait(600)
    elapsed = time.perf_counter() - t0
    assert q.total_count() == 0, q.counts()
    done = q.stats().get("acked", 0)
    assert done == n, (done, n)
    return n / elapsed


def latency(count: int = 200, gap: float = 0.02) -> dict[str, float]:
    q = get_queue("default")
    q.clear()
    key = f"{{{PREFIX}:default}}:bench-latency"
    proc = worker()
    time.sleep(2.0)  # let it start and go idle
    for _ in range(count):
        tasks.latency_probe.enqueue(key, time.time())
        time.sleep(gap)
    deadline = time.monotonic() + 30
    while q.engine._client.llen(key) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.terminate()
    proc.wait(30)
    values = sorted(float(v) * 1000 for v in q.engine._client.lrange(key, 0, -1))
    q.engine._client.delete(key)
    return {
        "latency_p50_ms": statistics.median(values),
        "latency_p95_ms": values[int(len(values) * 0.95) - 1],
        "latency_p99_ms": values[int(len(values) * 0.99) - 1],
        "latency_samples": len(values),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--prefetch", default="auto")
    a = ap.parse_args()
    out: dict[str, float] = {}
    try:
        out["noop_per_s_1_process"] = drain(a.n, 1, a.prefetch)
        out["noop_per_s_2_processes"] = drain(a.n, 2, a.prefetch)
        out["noop_per_s_1_process_prefetch1"] = drain(min(a.n, 5000), 1, "1")
        out["noop_per_s_1_process_prefetch20"] = drain(a.n, 1, "20")
        out.update(latency())
    finally:
        get_queue("default").clear()
    print(json.dumps({k: round(v, 3) for k, v in out.items()}, indent=2))


if __name__ == "__main__":
    main()
