"""Durable tasks under SIGKILLed workers (docs/durable.md): every step of every job ends
recorded, and a step's function runs again only when the worker of its earlier run was
killed (mid-run, or after it returned and before its result was recorded)."""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable

import pytest

from testproject.demo import tasks

from .conftest import QUEUE, Fault, wait_for
from .test_faults import all_finished, by_key

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_r_durable_steps_survive_sigkilled_workers(
    fault: Callable[..., Fault], long_run: bool
) -> None:
    n, workers, kill_for = (400, 4, 60.0) if long_run else (60, 3, 12.0)
    # a 3 s lease: a killed worker's jobs come back within seconds, and a live worker whose
    # heartbeat a loaded machine holds back for a second keeps its lease (a lease that runs
    # out under a live worker is a rerun the ledger would blame on no kill)
    f = fault(lease=3.0)
    rng = random.Random(7)
    jobs = [str(i) for i in range(n)]
    tasks.fault_durable.using(queue=QUEUE).enqueue_many(
        [(f.ledger, k, rng.uniform(0.05, 0.3)) for k in jobs]
    )
    for _ in range(workers):
        f.start_worker("--concurrency", "2")
    q = f.queue()
    steps = [f"{k}:{s}" for k in jobs for s in ("a", "b")]
    t0 = time.monotonic()
    while time.monotonic() - t0 < kill_for and not all_finished(f, steps):
        time.sleep(rng.uniform(1.5, 2.5))
        f.kill_random(rng, "--concurrency", "2")
    assert wait_for(lambda: all_finished(f, steps), timeout=300, step=0.2)
    # every job ended, not only none ready: the last step of a job can be done while its
    # worker was killed before the ack (the job leased until the scanner takes it back)
    assert wait_for(lambda: all(n == 0 for n in q.counts().values()), timeout=60), q.counts()
    f.stop_all()

    runs = by_key(f.runs())
    assert sorted(runs) == sorted(steps)  # every step ran: nothing lost
    again = 0
    for key, rs in runs.items():
        last = max((r for r in rs if r.finished is not None), key=lambda r: r.id)
        for r in rs:
            if r is not last:
                # killed mid-step, or after the step returned and before its result was
                # recorded: the only ways a step's function runs again
                assert r.pid in f.killed, (key, rs, f.killed)
        again += len(rs) - 1
    stats = q.stats()
    assert q.counts()["dead"] == 0
    assert stats["acked"] == n
    for tag in {r.job for r in f.runs()}:  # acked: the records went with the job
        assert not q.engine._client.exists(q.engine._keys_for(tag).steps(tag))
    print(
        f"\nFAULT Rdurable jobs={n} steps={len(steps)} workers={workers} "
        f"kills={len(f.killed)} steps_run_again={again} (lease 1 s)"
    )
    assert len(f.killed) >= 3


def test_r_an_iterable_job_stopped_by_sigterm_resumes_after_its_last_row(
    fault: Callable[..., Fault],
) -> None:
    """``durable.iterate`` over 5,000 rows: the worker gets SIGTERM mid-way, the job goes
    back to its place in line between two rows with its cursor, and the next worker goes
    on after the last row done: each row once in the ledger, no attempt used."""
    f = fault(lease=30.0)
    rows = 5000
    job = tasks.fault_walk.using(queue=QUEUE).enqueue(f.ledger, rows, 0.001, 50)
    first = f.start_worker("--concurrency", "1")
    assert wait_for(lambda: len(f.runs()) >= 1000, timeout=60)
    first.send_signal(signal.SIGTERM)
    assert first.wait(30) == 0
    q = f.queue()
    info = q.info(job.id)
    done = len(f.runs())
    assert info is not None and info.state == "ready" and info.attempts == 0, info
    assert 1000 <= done < rows
    f.start_worker("--concurrency", "1")
    assert wait_for(lambda: q.stats().get("acked", 0) == 1, timeout=120)
    f.stop_all()
    runs = f.runs()
    assert sorted(int(r.key) for r in runs) == list(range(rows))  # each row exactly once
    assert {r.attempt for r in runs} == {1}  # the stop used no attempt
    assert len({r.pid for r in runs}) == 2
    assert q.stats()["acked"] == 1
    print(f"\nFAULT ITERATE rows={rows} done_before_sigterm={done}")
