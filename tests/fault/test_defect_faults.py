"""Fault runs of defects outside checks found, each checked against the ledger outside
Redis (testproject/demo/ledger.py): real worker processes, no crash, so no job may run
twice. Each prints one ``FAULT Dn ...`` line with its figures (``-s`` to see them).

D1  adaptive prefetch gives back a job waiting behind a slow one while the other thread
    of the same worker claims it: it runs once, not twice in one pid.
D3  the history of finished jobs of the wrong type under running workers: acks go on
    without it, nothing runs twice.
D4  a key of the wrong type in one queue: the other queue of the same workers keeps its
    rate.
D11 a worker started while Redis is unreachable starts working once it is back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from django_zqueue.queue import get_queue
from testproject.demo import ledger, tasks

from .conftest import QUEUE, Fault, wait_for
from .test_faults import all_finished, by_key

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def _logs(f: Fault) -> str:
    return "".join(p.read_text() for p in sorted(Path(f.ledger).parent.glob("*.log")))


def test_d1_prefetch_give_back_runs_nothing_twice(
    fault: Callable[..., Fault], long_run: bool
) -> None:
    """--concurrency 2, --prefetch auto: 100 jobs of 1 ms, S of 3 s, J of 4 s, 300 of
    1 ms, one worker; the heartbeat hands back what waits behind S and J (after 1 s)
    while the other thread claims. Repeated ``rounds`` times."""
    rounds = 6 if long_run else 2
    f = fault()
    run = tasks.fault_run.using(queue=QUEUE)
    keys: list[str] = []
    hand_backs = 0
    for r in range(rounds):
        batch = [(f.ledger, f"{r}-a{i}", 0.001) for i in range(100)]
        batch += [(f.ledger, f"{r}-S", 3.0), (f.ledger, f"{r}-J", 4.0)]
        batch += [(f.ledger, f"{r}-b{i}", 0.001) for i in range(300)]
        run.enqueue_many(batch)
        keys += [k for _, k, _ in batch]
        proc = f.start_worker("--concurrency", "2", "--burst")
        assert wait_for(lambda p=proc: p.poll() is not None, timeout=90, step=0.2)
        assert proc.returncode == 0
        assert all_finished(f, keys)
    logs = _logs(f)
    hand_backs = logs.count("event=released")
    runs = by_key(f.runs())
    twice = {k: len(rs) for k, rs in runs.items() if len(rs) > 1}
    stale = logs.count("stale_delivery")
    print(
        f"\nFAULT D1 rounds={rounds} jobs={len(keys)} runs={sum(map(len, runs.values()))} "
        f"ran_twice={len(twice)} stale_delivery={stale} hand_back_lines={hand_backs}"
    )
    assert sorted(runs) == sorted(keys)
    assert twice == {}
    assert stale == 0


def test_d11_a_worker_started_while_redis_is_unreachable_starts_working(
    fault: Callable[..., Fault], tmp_path: Path
) -> None:
    """A worker started against a closed port keeps trying; once a Redis listens there
    it logs ``redis_back`` and runs the jobs enqueued since."""
    from django_zqueue import embedded

    from ..redis_private import PrivateRedis

    port = embedded.free_port()
    f = fault(url=f"redis://127.0.0.1:{port}/0")
    proc = f.start_worker("--concurrency", "2")
    assert wait_for(lambda: "redis_lost" in _logs(f), timeout=60)
    time.sleep(3.0)  # down for a while: the backoff grows
    server = PrivateRedis(tmp_path / "late", port=port)
    try:
        keys = [f"late{i}" for i in range(5)]
        run = tasks.fault_run.using(queue=QUEUE)
        for k in keys:
            run.enqueue(f.ledger, k)
        ok = wait_for(lambda: all_finished(f, keys), timeout=60, step=0.2)
        logs = _logs(f)
        print(
            f"\nFAULT D11 ran={ok} redis_lost={logs.count('redis_lost')} "
            f"redis_back={logs.count('redis_back')}"
        )
        assert proc.poll() is None
        assert ok, logs[-3000:]
        assert logs.count("redis_lost") == 1 and logs.count("redis_back") == 1
        assert by_key(f.runs()).keys() == set(keys)
    finally:
        f.stop_all()
        server.stop()


def _rate(f: Fault, keys: set[str], since: float, until: float) -> float:
    """Jobs of ``keys`` finished per second between two ledger times."""
    done = [r for r in f.runs() if r.key in keys and r.finished and since <= r.finished < until]
    return len(done) / max(until - since, 1e-9)


def test_d3_acks_go_on_with_a_history_of_the_wrong_type(
    fault: Callable[..., Fault], redis_client: redis.Redis, long_run: bool
) -> None:
    """The history of finished jobs (its hash, then its index) set to a string under two
    running workers: every job runs once (an ack skips the history it cannot write,
    rather than being refused and its job run again), none dead."""
    n = 3000 if long_run else 600
    f = fault(lease=2.0)
    q = f.queue()
    keys = [f"h{i}" for i in range(n)]
    tasks.fault_run.using(queue=QUEUE).enqueue_many([(f.ledger, k, 0.002) for k in keys])
    for _ in range(2):
        f.start_worker("--concurrency", "2")
    assert wait_for(lambda: len(f.runs()) >= n // 4, timeout=60)
    history, finished = q.engine._keys.history, q.engine._keys.finished
    redis_client.delete(history)
    redis_client.set(history, "junk")
    assert wait_for(lambda: len(f.runs()) >= n // 2, timeout=60)
    redis_client.delete(finished)
    redis_client.set(finished, "junk")
    assert wait_for(lambda: all_finished(f, keys), timeout=120, step=0.2)
    time.sleep(3 * 2.0)  # three leases: a dropped ack would have run its job again
    runs = by_key(f.runs())
    twice = {k: len(rs) for k, rs in runs.items() if len(rs) > 1}
    logs = _logs(f)
    print(
        f"\nFAULT D3 jobs={n} runs={sum(map(len, runs.values()))} ran_twice={len(twice)} "
        f"dead={q.counts()['dead']} ack_failed={logs.count('ack_failed')}"
    )
    assert sorted(runs) == sorted(keys) and twice == {}
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    assert "redis_lost" not in logs


def test_d4_a_corrupt_key_of_one_queue_leaves_the_other_at_its_rate(
    fault: Callable[..., Fault], redis_client: redis.Redis, long_run: bool
) -> None:
    """Two queues served by the same worker processes; ``{p:default}:ready`` set to a
    string half-way: the other queue goes on at its rate (at least a quarter of it), each
    of its jobs runs once; the corrupt queue's claims are said, never an outage."""
    seconds = 20.0 if long_run else 6.0
    f = fault()
    # jobs of 5 ms: 2 workers of 2 threads run at most ~800 a second, so the line lasts
    # past both halves of the run
    keys = {f"k{i}" for i in range(int(seconds * 1000))}
    tasks.fault_run.using(queue=QUEUE).enqueue_many([(f.ledger, k, 0.005) for k in keys])
    tasks.noop.using(queue="default").enqueue_many([() for _ in range(50)])
    for _ in range(2):
        f.start_worker("--concurrency", "2", "--queues", f"default,{QUEUE}")
    assert wait_for(lambda: len(f.runs()) >= 20, timeout=60)
    t0 = ledger.now()
    time.sleep(seconds / 2)
    bad = get_queue("default").engine._keys.ready
    t1 = ledger.now()
    redis_client.delete(bad)
    redis_client.set(bad, "junk")
    time.sleep(seconds / 2)
    t2 = ledger.now()
    before, during = _rate(f, keys, t0, t1), _rate(f, keys, t1, t2)
    assert t2 - t1 >= seconds / 2 and len(f.runs()) < len(keys)  # still jobs to run
    assert wait_for(lambda: all_finished(f, sorted(keys)), timeout=300, step=0.2)
    runs = by_key(f.runs())
    twice = {k: len(rs) for k, rs in runs.items() if len(rs) > 1}
    logs = _logs(f)
    print(
        f"\nFAULT D4 jobs={len(keys)} rate_before={before:.0f}/s rate_during={during:.0f}/s "
        f"ran_twice={len(twice)} consumer_error_lines={logs.count('consumer_error')} "
        f"redis_lost={logs.count('redis_lost')}"
    )
    assert twice == {} and set(runs) == keys
    # the defect this guards against took the other queue to 0 jobs/s; on a busy 2-core
    # host (CI: another test process beside these 2 workers) two 3 s windows of a healthy
    # queue were seen 3x apart, so the bound is a quarter, not a half
    assert during >= 0.25 * before, (before, during)
    assert "consumer_error" in logs and bad in logs and "redis_lost" not in logs
