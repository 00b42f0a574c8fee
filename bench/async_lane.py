"""The event-loop lane against the thread lane, and against arq and taskiq, in one run:

    python -m bench.async_lane [--n 10000] [--noop-n 20000] [--no-peers]

On a private redis-server (stopped at the end), one worker process each time:

- no-op jobs/s: a sync ``@task`` (the thread lane, default options) and an ``async def``
  one (the event-loop lane, default options: 100 slots), true no-ops counted by the
  queue's ``acked`` counter;
- ``--n`` jobs that each await ``asyncio.sleep(0.05)`` (an I/O-bound job) on the
  event-loop lane, and the same work as a sync task (``time.sleep(0.05)``) on the thread
  lane with ``--concurrency`` 1 (the default) and 8 (``--sync-n`` jobs: it is slow);
- arq and taskiq on the same two workloads, 100 jobs at once (their venvs:
  ``.ci/work/bench-async-arq`` and ``-taskiq``, built when missing).

The other jobs end with one INCR of a done counter (the peers have no other completion
signal, so their no-ops do it too); a rate runs from the first finished job to
the last, so a worker's start-up is left out. The host is shared: only the ratios between
rows of one run mean anything. Writes bench/results/async-latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: each peer in a venv of its own (arq pins redis-py < 6, taskiq-redis wants a newer one)
PEER_VENVS = {
    "arq": (ROOT / ".ci" / "work" / "bench-async-arq", ["arq", "redis[hiredis]<6"]),
    "taskiq": (
        ROOT / ".ci" / "work" / "bench-async-taskiq",
        ["taskiq", "taskiq-redis", "redis[hiredis]"],
    ),
}
SLEEP = 0.05


def log(*a: Any) -> None:
    print("[async-bench]", *a, file=sys.stderr, flush=True)


def peer_python(kind: str) -> Path | None:
    venv, packages = PEER_VENVS[kind]
    py = venv / "bin" / "python"
    if not py.exists():
        log(f"building {venv} ({', '.join(packages)})")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        res = subprocess.run([str(py), "-m", "pip", "install", "-q", *packages], check=False)
        if res.returncode:
            return None
    return py


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.async_lane")
    ap.add_argument("--n", type=int, default=10000, help="sleeping jobs per async drain")
    ap.add_argument("--sync-n", type=int, default=1000, help="sleeping jobs per sync drain")
    ap.add_argument("--noop-n", type=int, default=20000, help="no-op jobs per drain")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from bench._redis import start_private

    server = start_private()
    prefix = f"zqabench-{uuid.uuid4().hex[:8]}"
    os.environ.update(
        {
            "ZQUEUE_REDIS_URL": server.url,
            "ZQUEUE_PREFIX": prefix,
            "DJANGO_SETTINGS_MODULE": "bench.django_settings",
            "ZQBENCH_TASK_MODULES": "bench.async_tasks,testproject.demo.async_tasks",
        }
    )
    import django

    django.setup()
    rows: list[dict[str, Any]] = []
    try:
        rows = run_all(args, server.port)
    finally:
        server.stop()
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    meta = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": os.getloadavg()}
    (out / "async-latest.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"\n{'queue':<16}{'work':<28}{'jobs/s':>10}  n")
    for r in rows:
        print(f"{r['queue']:<16}{r['label']:<28}{r['jobs_per_s']:>10,.0f}  {r['done']}/{r['n']}")
    print(f"(load average at the end: {meta['load']}; same-run ratios only)")


def run_all(args: argparse.Namespace, port: int) -> list[dict[str, Any]]:
    from bench import async_tasks
    from testproject.demo import async_tasks as demo_async
    from testproject.demo import tasks as demo

    rows = [  # true no-ops, counted by the queue's acked counter
        drain("sync no-op, thread lane", demo.noop, (), args.noop_n, [], args.timeout),
        drain("async no-op, event-loop lane", demo_async.anoop, (), args.noop_n, [], args.timeout),
        drain(
            "async sleep 50 ms, lane 100", async_tasks.asleep, (SLEEP,), args.n, [], args.timeout
        ),
        drain(
            "async sleep 50 ms, lane 500",
            async_tasks.asleep,
            (SLEEP,),
            args.n,
            ["--async-concurrency", "500"],
            args.timeout,
        ),
        drain(
            "sync sleep 50 ms, 1 thread",
            tasks_sleep(),
            (SLEEP,),
            max(50, args.sync_n // 8),
            [],
            args.timeout,
        ),
        drain(
            "sync sleep 50 ms, 8 threads",
            tasks_sleep(),
            (SLEEP,),
            args.sync_n,
            ["--concurrency", "8"],
            args.timeout,
        ),
    ]
    if not args.no_peers:
        for kind in ("arq", "taskiq"):
            py = peer_python(kind)
            for work, n in (("noop", args.noop_n), ("sleep", args.n)):
                rows.append(peer(py, kind, work, n, port, args.timeout))
    return rows


def tasks_sleep() -> Any:
    from bench import async_tasks

    return async_tasks.sleep


def drain(
    label: str, task: Any, targs: tuple[Any, ...], n: int, worker_args: list[str], timeout: float
) -> dict[str, Any]:
    import redis

    from bench.tasks import counter_keys
    from django_zqueue import get_queue

    q = get_queue("default")
    q.clear()
    r = redis.Redis.from_url(os.environ["ZQUEUE_REDIS_URL"])
    done_key = counter_keys(os.environ["ZQUEUE_PREFIX"])[0]
    r.delete(done_key)
    for i in range(0, n, 1000):
        task.enqueue_many([targs] * min(1000, n - i))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(ROOT / "testproject/manage.py"), "zqueue_worker", "-v", "0"]
    proc = subprocess.Popen(
        [*cmd, "--queues", "default", *worker_args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    if task.name.startswith("zqbench."):  # the job INCRs the done counter, as the peers' do
        rate, done = watch(lambda: int(r.get(done_key) or 0), n, timeout)
    else:
        rate, done = watch(lambda: q.stats().get("acked", 0), n, timeout)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(60)
    row = {"queue": "django_zqueue", "label": label, "n": n, "done": done, "jobs_per_s": rate}
    log(row)
    return row


def watch(count: Any, n: int, timeout: float) -> tuple[float, int]:
    """Jobs/s from the first finished job to the last (or to the end of the time box)."""
    first_t, first_n, done = 0.0, 0, 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = count()
        if done and not first_n:
            first_t, first_n = time.monotonic(), done
        if done >= n:
            break
        time.sleep(0.005)
    end = time.monotonic()
    if not first_n or end <= first_t:
        return 0.0, done
    return round((done - first_n) / (end - first_t), 1), done


def peer(
    py: Path | None, kind: str, work: str, n: int, port: int, timeout: float
) -> dict[str, Any]:
    label = "no-op, 100 at once" if work == "noop" else "sleep 50 ms, 100 at once"
    if py is None:
        return {"queue": kind, "label": label, "n": n, "done": 0, "jobs_per_s": 0.0}
    db = 5 if kind == "arq" else 6
    res = subprocess.run(
        [str(py), str(ROOT / "bench" / "async_peer.py"), kind, work, str(n), str(port), str(db)],
        env={**os.environ, "ABENCH_TIMEOUT": str(timeout)},
        capture_output=True,
        text=True,
        timeout=timeout + 300,
        check=False,
    )
    try:
        got = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        log(f"{kind} {work} failed: {res.stderr[-2000:]}")
        got = {"done": 0, "jobs_per_s": 0.0}
    row = {
        "queue": kind,
        "label": label,
        "n": n,
        "done": got["done"],
        "jobs_per_s": got["jobs_per_s"],
    }
    log(row)
    return row


if __name__ == "__main__":
    main()
