"""What capturing job logs costs a worker: no-op jobs/s drained by one in-process
worker (one thread) with ``JOB_LOGS["LEVEL"]`` unset (no handler installed) and set to
INFO (the handler installed; the no-op task logs nothing), in interleaved pairs, each
run timed from the worker's start to the end of its last job (the history's); and,
for scale, a task that logs one captured line per run. Prints each side's median, the
ratio of each pair (its median and spread) and the machine's load average.

    python -m bench.joblog_cost [--n 5000] [--pairs 3]

Uses the testproject settings under a private key prefix; deletes only its own keys.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
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

from django.conf import settings  # noqa: E402
from django.test import override_settings  # noqa: E402

from django_zqueue import get_queue, task  # noqa: E402
from django_zqueue.worker import Worker  # noqa: E402
from testproject.demo import tasks  # noqa: E402

log = logging.getLogger("bench.joblog")
log.setLevel(logging.INFO)


@task(name="bench.joblog.one_line")
def one_line() -> None:
    log.info("one line")


def drain(n: int, level: str | None, job: object) -> float:
    value = {**settings.ZQUEUE, "JOB_LOGS": {"LEVEL": level}}
    with override_settings(ZQUEUE=value):
        q = get_queue("default")
        q.clear()
        for i in range(0, n, 1000):
            job.enqueue_many([()] * min(1000, n - i))  # type: ignore[attr-defined]
        t0 = time.time()
        Worker(["default"], burst=True, scan_interval=1.0).run()
        # until the last job ended (its end in the history, Redis time on this machine):
        # a burst worker notices it is done on a 0.1 s tick, which would round each run
        newest = q.finished(limit=1)
        ended = newest[0].finished_at if newest else None
        elapsed = (ended.timestamp() if ended else time.time()) - t0
        assert q.total_count() == 0, q.counts()
        q.clear()
    return n / elapsed


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=5000)
    p.add_argument("--pairs", type=int, default=3)
    a = p.parse_args()
    drain(min(a.n, 1000), None, tasks.noop)  # warm up
    off, on = [], []
    for i in range(a.pairs):  # each pair in the other order than the one before
        if i % 2:
            on.append(drain(a.n, "INFO", tasks.noop))
        off.append(drain(a.n, None, tasks.noop))
        if not i % 2:
            on.append(drain(a.n, "INFO", tasks.noop))
    lines = drain(a.n, "INFO", one_line)
    m_off, m_on = statistics.median(off), statistics.median(on)
    ratios = sorted(b / a for a, b in zip(off, on, strict=True))
    print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}")
    print(f"no-op jobs/s, capture off: {[round(x) for x in off]} median {m_off:.0f}")
    print(f"no-op jobs/s, capture on:  {[round(x) for x in on]} median {m_on:.0f}")
    print(f"ratio on/off (medians): {m_on / m_off:.3f}")
    print(
        f"ratio on/off per pair: median {statistics.median(ratios):.3f}, "
        f"spread {ratios[0]:.3f}..{ratios[-1]:.3f} ({[round(r, 3) for r in ratios]})"
    )
    print(f"one captured line per job, jobs/s: {lines:.0f} ({lines / m_off:.3f} of off)")


if __name__ == "__main__":
    main()
