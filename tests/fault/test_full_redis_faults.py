"""R14: Redis at ``maxmemory`` (``noeviction``). Producers fill a private server until it
refuses their enqueues (``RedisFull``); workers alone then drain every accepted job: the
one that ran all along, and one started while the server is full. Checked against the
ledger (testproject/demo/ledger.py): each accepted job ran exactly once, none lost, and
no refused enqueue wrote anything."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from django_zqueue import RedisFull
from testproject.demo import ledger, tasks

from ..redis_private import PrivateRedis
from .conftest import QUEUE, Fault, wait_for

pytestmark = [pytest.mark.fault, pytest.mark.slow]

#: each job's run: 2,000-4,000 of them take a worker of two threads 10-20 s, which leaves
#: the worker started once the server is full time to start and take its share on a
#: loaded machine (at 2 ms a job, the first worker had drained all before it started)
JOB_SECONDS = 0.01

#: the lines a worker must never log here: a refusal it goes on without is ``redis_full``
BAD_EVENTS = ("consumer_error", "heartbeat_error", "scan_error", "redis_lost", "ack_failed")


def fill(f: Fault, producers: int, chunk: int, stop_after: float) -> tuple[list[str], int, float]:
    """Enqueue chunks of ``chunk`` jobs from ``producers`` threads, each until its first
    RedisFull (or ``stop_after`` seconds). Returns the accepted keys, the refused calls
    and the seconds it took."""
    run = tasks.fault_run.using(queue=QUEUE)
    accepted: list[str] = []
    refused = [0]
    lock = threading.Lock()
    t0 = time.monotonic()

    def produce(p: int) -> None:
        i = 0
        while time.monotonic() - t0 < stop_after:
            keys = [f"{p}-{i + j}" for j in range(chunk)]
            i += chunk
            try:
                run.enqueue_many([(f.ledger, k, JOB_SECONDS) for k in keys])
            except RedisFull:
                with lock:
                    refused[0] += 1
                return
            with lock:
                accepted.extend(keys)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(stop_after + 30)
    return accepted, refused[0], time.monotonic() - t0


def worker_lines(f: Fault) -> list[str]:
    logs = Path(f.ledger).parent
    return [
        line
        for path in sorted(logs.glob("*-zqueue_worker.log"))
        for line in path.read_text().splitlines()
    ]


@pytest.mark.parametrize("functions", ["1", "0"], ids=["fcall", "evalsha"])
def test_r14_workers_drain_a_redis_filled_to_maxmemory(
    fault: Callable[..., Fault],
    private_redis: Callable[..., PrivateRedis],
    monkeypatch: pytest.MonkeyPatch,
    functions: str,
    long_run: bool,
) -> None:
    room, producers = (10_000_000, 4) if long_run else (1_500_000, 3)
    monkeypatch.setenv("ZQ_FAULT_LUA_FUNCTIONS", functions)  # the workers' scripts
    server = private_redis()
    f = fault(url=server.url, lease=30.0)
    q = f.queue()
    client = server.client()
    q.claim(1)  # (the scripts loaded before the room is measured)
    first = f.start_worker("--concurrency", "2")
    assert wait_for(lambda: client.hlen(q.engine.workers.key()) == 1, timeout=60)
    base = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", base + room)

    accepted, refused, fill_s = fill(f, producers, chunk=100, stop_after=120.0)
    full_at = ledger.now()
    peak = int(client.info("memory")["used_memory"])
    assert refused == producers  # every producer met RedisFull: the server was full
    assert accepted
    second = f.start_worker("--concurrency", "2")  # a worker started while it is full

    done = wait_for(
        lambda: sum(r.finished is not None for r in f.runs()) >= len(accepted),
        timeout=600 if long_run else 180,
        step=0.2,
    )
    drain_s = ledger.now() - full_at
    runs = f.runs()
    assert done, f"{sum(r.finished is not None for r in runs)} of {len(accepted)} jobs ran"
    assert wait_for(lambda: q.total_count() == 0, timeout=30)
    after = int(client.info("memory")["used_memory"])
    f.stop_all()

    per_key = Counter(r.key for r in runs)
    assert set(per_key) == set(accepted)  # none lost, and no refused enqueue ran
    assert max(per_key.values()) == 1  # each accepted job ran once
    assert all(r.finished is not None for r in runs)
    assert first.returncode == 0 and second.returncode == 0
    late = [r for r in runs if r.started > full_at]
    by_first = sum(r.pid == first.pid for r in late)
    by_second = sum(r.pid == second.pid for r in late)
    assert by_first > 0 and by_second > 0  # both drained after the server was full
    # the jobs' records are gone from meta; the history of finished jobs keeps theirs (an
    # ack moves a record there), at most keep_finished (10,000 by default) of them
    assert client.hlen(q.engine._keys.meta) == 0
    kept = client.zcard(q.engine._keys.finished)
    assert kept == min(len(accepted), 10_000)
    lines = worker_lines(f)
    assert not [line for line in lines if any(f"event={e} " in line for e in BAD_EVENTS)]
    said = [line for line in lines if "event=redis_full " in line]
    kinds = Counter(
        (m.group(1), m.group(2))
        for m in (re.search(r" (?:worker|scanner)=(\S+) refused=(\S+)", line) for line in said)
        if m
    )
    assert kinds and max(kinds.values()) == 1  # each worker says each refusal once
    assert q.stats()["acked"] == len(accepted)
    print(
        f"\nFAULT R14 scripts={'FCALL' if functions == '1' else 'EVALSHA'} "
        f"maxmemory=used+{room} accepted={len(accepted)} in {fill_s:.2f} s, "
        f"{refused} enqueues refused; drained after full in {drain_s:.2f} s "
        f"(worker running all along {by_first}, worker started full {by_second}); "
        f"used_memory over the base: {peak - base} when full, {after - base} after the "
        f"drain ({kept} jobs in the history of finished jobs); "
        f"duplicates=0 lost=0; redis_full lines {sorted({k for _, k in kinds})}"
    )
