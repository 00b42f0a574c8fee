"""Strict order per key under faults (docs/job-control.md, "Strict order per key"): real
workers SIGKILLed every 2-3 s, a Redis restart (AOF always), 3 keys x N jobs with 30%
failing on their first attempt: per key the ledger shows the jobs run in enqueue order
(the order ``rank(within_key=True)`` gave each job before the workers started), never
two at once, and none lost."""

from __future__ import annotations

import itertools
import random
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from testproject.demo import ledger, tasks

from ..redis_private import PrivateRedis
from .conftest import QUEUE, Fault, wait_for

pytestmark = [pytest.mark.fault, pytest.mark.slow]

KEYS = ("acct-a", "acct-b", "acct-c")


def test_r_order_per_key_survives_kills_and_a_redis_restart(
    fault: Callable[..., Fault], private_redis: Callable[..., PrivateRedis], long_run: bool
) -> None:
    server = private_redis("--appendonly", "yes", "--appendfsync", "always")
    n, workers, kill_for = (2000, 4, 90.0) if long_run else (500, 4, 30.0)
    # a 3 s lease: a killed holder's key waits for it; a live worker's heartbeat held back
    # on a loaded machine keeps its lease (a lease lost under a live worker would let the
    # key's job run twice at once, which no lease-based queue can prevent)
    f = fault(url=server.url, lease=3.0)
    rng = random.Random(47)
    fails = {(k, i) for k in KEYS for i in range(n) if rng.random() < 0.3}
    calls = [(f.ledger, k, i, (k, i) in fails) for i in range(n) for k in KEYS]
    jobs = tasks.fault_ordered.using(queue=QUEUE).enqueue_many(calls)
    q = f.queue()
    # each job's place in its key's line, before any worker starts: its enqueue order
    t_rank = time.monotonic()
    ranked = {
        f"{k}:{i}": job.rank(within_key=True) for job, (_, k, i, _) in zip(jobs, calls, strict=True)
    }
    rank_s = time.monotonic() - t_rank
    assert ranked == {f"{k}:{i}": i for k in KEYS for i in range(n)}
    args = ("--concurrency", "2")
    for _ in range(workers):
        f.start_worker(*args)
    expected = [f"{k}:{i}" for k in KEYS for i in range(n)]
    t0 = time.monotonic()
    restarted = False
    while time.monotonic() - t0 < kill_for and not _done(f, expected):
        time.sleep(rng.uniform(2.0, 3.0))
        f.kill_random(rng, *args)
        if not restarted and time.monotonic() - t0 > kill_for / 2:
            server.kill()  # SIGKILL: a crash
            time.sleep(1.0)
            server.start()  # replays the AOF
            restarted = True
    assert wait_for(lambda: _done(f, expected), timeout=240, step=0.5)
    assert wait_for(lambda: q.total_count() == 0, timeout=60, step=0.2), q.counts()
    f.stop_all()
    assert restarted

    runs = f.runs()
    done = {r.key for r in runs if r.finished is not None}
    assert set(expected) <= done  # 0 lost
    per_key: dict[str, list[ledger.Run]] = defaultdict(list)
    for r in runs:
        per_key[r.key.split(":")[0]].append(r)
    overlaps = order_breaks = 0
    for key, rs in per_key.items():
        rs.sort(key=lambda r: r.started)
        seqs = [int(r.key.split(":")[1]) for r in rs]
        # the ledger's run order per key (each job's first start) is the order its ranks
        # within the key said, taken before the workers started
        firsts = list(dict.fromkeys(":".join(r.key.split(":")[:2]) for r in rs))
        assert firsts == sorted(firsts, key=lambda j: ranked[j]), key
        # in enqueue order: a run of job i never starts after a run of a later job
        order_breaks += sum(1 for a, b in itertools.pairwise(seqs) if b < a)
        for a, b in itertools.pairwise(rs):
            end = a.finished if a.finished is not None else f.killed.get(a.pid)
            assert end is not None, (key, a)  # unfinished: only a killed worker's run
            if b.started < end:
                overlaps += 1
    print(
        f"\nFAULT Rorder keys={len(KEYS)} jobs={len(expected)} failing_first={len(fails)} "
        f"workers={workers} kills={len(f.killed)} runs={len(runs)} "
        f"order_breaks={order_breaks} overlaps={overlaps} rank_within_key_s={rank_s:.1f} "
        f"total_s={time.monotonic() - t0:.1f}"
    )
    assert order_breaks == 0
    assert overlaps == 0  # never two runs of one key at once
    assert q.counts()["dead"] == 0
    assert len(f.killed) >= 3


def _done(f: Fault, keys: list[str]) -> bool:
    finished = {r.key for r in f.runs() if r.finished is not None}
    return all(k in finished for k in keys)
