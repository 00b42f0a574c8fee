"""Worker CPU per no-op job, as instructions (callgrind: deterministic, load-independent).

    python -m bench.worker_instructions [--small 200] [--large 2200] [--prefetch 20]
        [--concurrency 1] [--async-concurrency N] [--cpu] [--profile N] [--timeout 900]

For each of ``--small`` and ``--large`` no-op jobs (``testproject.demo.tasks.noop``, on
queue ``default``): enqueue them, run one burst worker process
(``testproject/manage.py zqueue_worker --burst --queues default``) under
``valgrind --tool=callgrind``, check that every job was acked, and read the process's
total instructions (``totals:`` of the callgrind output, one per thread with
``--separate-threads=yes``). Prints the instructions per job: (large - small) /
(large - small jobs), so start-up and shutdown cancel out; and the same per thread
(``1``: the main thread; then by start: with ``--concurrency 1``, ``2`` is the consumer
thread, the last the heartbeat). The heartbeat's and the main thread's share is time,
not jobs (a tick every 50 and 100 ms): under callgrind a run lasts ~50 times longer, so
their share per job is ~50 times what it is outside it.

``--async-concurrency``: the worker's option (default: the worker's own default, 100
slots when a registered ``async def`` task uses ``default``, else none). The testproject's
``async def`` tasks are in ``demo/async_tasks.py``, which the worker's autodiscovery
(``<app>.tasks``) does not import: by default no event-loop lane starts here (three
threads per run); ``--async-concurrency 100`` starts one, and it claims no-op jobs too.

``--cpu``: no valgrind; the worker process's CPU time (user + system, from
``getrusage``) per job, (large - small) / (large - small jobs), three pairs in turn (use
larger counts, e.g. ``--small 2000 --large 22000``; a time, so it varies with the host).

``--profile N``: no valgrind; instead ``N`` jobs run by a worker in this process with its
consumer threads under ``cProfile`` (the event-loop lane off: its jobs would not be
profiled), and the top functions by own time and by cumulative time are printed.

Uses the testproject settings under a private key prefix and deletes only its own keys.
Each valgrind run is bounded by ``--timeout`` seconds (a Python process runs ~50x slower
under callgrind: keep the job counts small).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIX = f"zqinstr-{uuid.uuid4().hex[:8]}"
os.environ["ZQUEUE_PREFIX"] = PREFIX
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django_zqueue import get_queue  # noqa: E402
from testproject.demo import tasks  # noqa: E402

TOTALS = re.compile(rb"^(?:totals|summary):\s+(\d+)", re.MULTILINE)


def fill(n: int) -> None:
    q = get_queue("default")
    q.clear()
    for i in range(0, n, 1000):
        tasks.noop.enqueue_many([()] * min(1000, n - i))


def check_drained(n: int) -> None:
    q = get_queue("default")
    assert q.total_count() == 0, q.counts()
    done = q.stats().get("acked", 0)
    assert done == n, (done, n)


def instructions(n: int, options: list[str], timeout: float) -> dict[str, int]:
    """Instructions of a burst worker process draining ``n`` no-op jobs, per thread
    (``"1"`` the main thread, then in the order they started) and ``"total"``."""
    fill(n)
    with tempfile.TemporaryDirectory(prefix="zqinstr-") as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            "--separate-threads=yes",
            "--dump-instr=no",
            sys.executable,
            str(ROOT / "testproject/manage.py"),
            "zqueue_worker",
            "-v",
            "0",
            "--burst",
            "--queues",
            "default",
            *options,
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(
            cmd,
            env=env,
            check=True,
            timeout=timeout,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        threads: dict[str, int] = {}
        for part in Path(tmp).glob("callgrind.out-*"):
            found = TOTALS.search(part.read_bytes())
            assert found is not None, f"no totals in {part.name}"
            threads[str(int(part.name.rpartition("-")[2]))] = int(found.group(1))
    check_drained(n)
    return {
        **dict(sorted(threads.items(), key=lambda kv: int(kv[0]))),
        "total": sum(threads.values()),
    }


def cpu_seconds(n: int, options: list[str], timeout: float) -> float:
    """CPU seconds (user + system) of a burst worker process draining ``n`` no-op jobs,
    outside valgrind (``--cpu``): a time, so it varies with the host, but not with the
    wall clock's waits."""
    fill(n)
    cmd = [sys.executable, str(ROOT / "testproject/manage.py"), "zqueue_worker", "-v", "0"]
    cmd += ["--burst", "--queues", "default", *options]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        cmd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
        timeout=timeout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    check_drained(n)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def profile(n: int, prefetch: int, concurrency: int, top: int = 30) -> None:
    """Run ``n`` jobs in this process, consumer threads under cProfile; print the top."""
    from django_zqueue.tasks import registry
    from django_zqueue.worker import Worker
    from django_zqueue.worker.consumer import Consumer

    registry.autodiscover()
    prof = cProfile.Profile()
    original = Consumer.run

    def run(self: Consumer) -> None:
        prof.enable()
        try:
            original(self)
        finally:
            prof.disable()

    fill(n)
    Consumer.run = run  # type: ignore[method-assign]
    try:
        w = Worker(["default"], burst=True, prefetch=prefetch, concurrency=concurrency)
        w.run()
    finally:
        Consumer.run = original  # type: ignore[method-assign]
    check_drained(n)
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=200)
    ap.add_argument("--large", type=int, default=2200)
    ap.add_argument("--prefetch", default="20")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--async-concurrency", type=int, default=None)
    ap.add_argument("--profile", type=int, default=0, help="cProfile N jobs instead")
    ap.add_argument("--cpu", action="store_true", help="CPU µs per job, without valgrind")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per valgrind run")
    a = ap.parse_args()
    most = 200_000 if a.cpu else 20_000
    if not 0 < a.small < a.large <= most:
        ap.error(f"need 0 < small < large <= {most}")
    try:
        if a.profile:
            profile(a.profile, int(a.prefetch), a.concurrency)
            return
        options = ["--prefetch", a.prefetch, "--concurrency", str(a.concurrency)]
        if a.async_concurrency is not None:
            options += ["--async-concurrency", str(a.async_concurrency)]
        t0 = time.monotonic()
        if a.cpu:
            runs = [
                (cpu_seconds(a.small, options, a.timeout), cpu_seconds(a.large, options, a.timeout))
                for _ in range(3)
            ]
            per_job = sorted((big - few) / (a.large - a.small) * 1e6 for few, big in runs)
            print(
                json.dumps(
                    {
                        "options": " ".join(options),
                        "jobs": [a.small, a.large],
                        "cpu_us_per_job_3_pairs": [round(x, 1) for x in per_job],
                    }
                )
            )
            return
        small = instructions(a.small, options, a.timeout)
        large = instructions(a.large, options, a.timeout)
        jobs = a.large - a.small
        per_thread = {k: round((v - small.get(k, 0)) / jobs) for k, v in large.items()}
        print(
            json.dumps(
                {
                    "options": " ".join(options),
                    "jobs": [a.small, a.large],
                    "instructions": [small["total"], large["total"]],
                    "instructions_per_job": per_thread.pop("total"),
                    "per_job_by_thread": per_thread,
                    "seconds": round(time.monotonic() - t0, 1),
                },
                indent=2,
            )
        )
    finally:
        get_queue("default").clear()


if __name__ == "__main__":
    main()
