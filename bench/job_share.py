"""Where one worker process's time goes: the benchmark's job itself, or the worker.

    python -m bench.job_share [--n 20000] [--rounds 2] [--json]

On a private ``redis-server`` (stopped at the end), for each variant (the default worker,
``--prefetch 20``, ``--concurrency 4 --prefetch 20``): ``--n`` jobs of
``zqbench.timed_noop`` (the benchmark's job, one ``INCR`` through redis-py, that times
itself, :mod:`bench.tasks`) are published with ``enqueue_many``, then one burst worker
drains them. From the job's own totals it prints, per job:

- **wall µs**: the process's wall time from its first job's start to its last job's end,
  over the jobs; **job wall** the part inside the job (its round trip included), **worker
  wall** the rest (claiming, acking, the worker's bookkeeping and its waits for Redis);
- **CPU µs**: the process's CPU time over the same span; **job CPU** the job's own
  (``time.thread_time`` inside it), **worker CPU** the rest;
- **scripts µs**: the Redis time of the worker's script calls (``INFO commandstats``,
  reset after the publish), over the jobs: claim and ack, the history included.

Ahead of a peer's figure on this job, a worker must spend less per job than the peer
spends in all; this shows how much of ours is the job's own client call, which no change
to the queue can make cheaper. The host is shared: compare the rows of one run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PREFIX = f"zqbench-{uuid.uuid4().hex[:8]}"

#: variant -> the worker's options; a variant of several threads runs jobs at once, so the
#: jobs' wall times overlap and are not split from the worker's (printed as —)
VARIANTS: dict[str, tuple[str, ...]] = {
    "default": (),
    "prefetch 20": ("--prefetch", "20"),
    "4 threads, prefetch 20": ("--concurrency", "4", "--prefetch", "20"),
}


def log(*a: Any) -> None:
    print("[job-share]", *a, file=sys.stderr, flush=True)


def drain(url: str, n: int, args: tuple[str, ...]) -> dict[str, float]:
    """Publish ``n`` timed jobs, drain them with one burst worker: the split per job."""
    import redis

    from bench.tasks import counter_keys, split_key, timed_noop
    from django_zqueue import get_queue

    from ._redis import commandstats, script_usec

    client = redis.Redis.from_url(url)
    queue = get_queue("default")
    queue.clear()
    done, _ = counter_keys(PREFIX)
    split = split_key(PREFIX)
    client.delete(done, split)
    for i in range(0, n, 1000):
        timed_noop.enqueue_many([()] * min(1000, n - i))
    client.config_resetstat()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(ROOT / "testproject/manage.py"), "zqueue_worker", "--burst"]
    proc = subprocess.run([*cmd, "-v", "0", *args], env=env, check=False, timeout=900)
    if proc.returncode:
        raise SystemExit(f"the worker exited with {proc.returncode}")
    stats = commandstats(client)
    totals = {k.decode(): float(v) for k, v in client.hgetall(split).items()}
    jobs = totals.get("jobs", 0.0)
    if jobs != n or int(client.get(done) or 0) != n:
        raise SystemExit(f"drained {client.get(done)!r} of {n} jobs (totals {totals})")
    scripts_usec = script_usec(stats)[1]
    us = 1e6 / n
    overlapping = "--concurrency" in args
    nan = float("nan")
    return {
        "jobs_per_s": n / totals["span_wall"],
        "wall_us": totals["span_wall"] * us,
        "job_wall_us": nan if overlapping else totals["job_wall"] * us,
        "worker_wall_us": nan if overlapping else (totals["span_wall"] - totals["job_wall"]) * us,
        "cpu_us": totals["span_cpu"] * us,
        "job_cpu_us": totals["job_cpu"] * us,
        "worker_cpu_us": (totals["span_cpu"] - totals["job_cpu"]) * us,
        "scripts_us": scripts_usec / n,
    }


COLUMNS = (
    ("jobs/s", "jobs_per_s", "{:,.0f}"),
    ("wall µs", "wall_us", "{:.1f}"),
    ("job wall", "job_wall_us", "{:.1f}"),
    ("worker wall", "worker_wall_us", "{:.1f}"),
    ("CPU µs", "cpu_us", "{:.1f}"),
    ("job CPU", "job_cpu_us", "{:.1f}"),
    ("worker CPU", "worker_cpu_us", "{:.1f}"),
    ("scripts µs", "scripts_us", "{:.1f}"),
)


def table(rows: dict[str, dict[str, float]]) -> str:
    lines = [
        "| variant (one process) | " + " | ".join(c for c, _, _ in COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    for name, row in rows.items():
        cells = " | ".join(
            "—" if math.isnan(row[key]) else fmt.format(row[key]) for _, key, fmt in COLUMNS
        )
        lines.append(f"| {name} | {cells} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each variant, in turn")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()

    from ._redis import loadavg, start_private

    server = start_private()
    os.environ.update(
        ZQUEUE_PREFIX=PREFIX,
        ZQUEUE_REDIS_URL=server.url,
        DJANGO_SETTINGS_MODULE="bench.django_settings",
    )
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    try:
        log(f"load {loadavg()}; {opts.n:,} jobs, {opts.rounds} rounds")
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
        for r in range(opts.rounds):
            for name, args in VARIANTS.items():
                runs[name].append(drain(server.url, opts.n, args))
                log(f"round {r + 1} {name}: {runs[name][-1]['jobs_per_s']:,.0f} jobs/s")
        medians = {
            name: {key: statistics.median(x[key] for x in xs) for key in xs[0]}
            for name, xs in runs.items()
        }
        log(f"load {loadavg()}")
    finally:
        server.stop()
    if opts.json:
        out = {"n": opts.n, "runs": runs, "medians": medians}
        print(json.dumps(out, indent=2).replace("NaN", "null"))
    else:
        print(f"medians of {opts.rounds} runs, {opts.n:,} jobs each, per job:\n")
        print(table(medians))


if __name__ == "__main__":
    main()
