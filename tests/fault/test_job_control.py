"""The fault suite for job control: cancels racing with workers that are killed, and
children of ``--pool process`` killed from outside.

As in test_faults.py, every run of a task is recorded in the SQLite ledger, outside
Redis, and the guarantees are checked against it:

- R-cancel: a job cancelled (waiting or running) never starts again, even when the
  worker that ran it is SIGKILLed and leases expire all around it;
- R-child: a child process killed from outside never leaves a lease behind: its job is
  out of ``leased`` within seconds (its lease is 300 s long: no expiry is involved) and
  runs again under the normal retry rules.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable

import pytest

from testproject.demo import ledger, tasks

from .conftest import QUEUE, Fault, wait_for
from .summary import maximum

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_r_cancel_a_cancelled_job_never_runs_again(
    fault: Callable[..., Fault], long_run: bool
) -> None:
    n, rounds = (400, 12) if long_run else (60, 4)
    f = fault(lease=1.0)
    rng = random.Random(7)
    jobs = tasks.fault_run.using(queue=QUEUE).enqueue_many(
        [(f.ledger, str(i), rng.uniform(0.2, 1.5)) for i in range(n)]
    )
    for _ in range(2):
        f.start_worker("--concurrency", "3", "--cancel-grace", "0.3")
    q = f.queue()
    cancelled: dict[str, float] = {}  # job id -> wall-clock time its cancel returned
    outcomes: dict[str, int] = {"waiting": 0, "running": 0}
    for _ in range(rounds):
        time.sleep(rng.uniform(0.5, 1.0))
        # a loaded host starts workers slowly: wait for a run to cancel in the middle
        wait_for(lambda: any(r.finished is None for r in f.runs()), timeout=20)
        running = [r.job for r in f.runs() if r.finished is None]
        picks = rng.sample(running, min(3, len(running)))
        picks += [j.id for j in rng.sample(jobs, n // (2 * rounds))]
        for tag in picks:
            if tag in cancelled:
                continue
            result = q.cancel_job(tag)
            if result in outcomes:
                outcomes[result] += 1
                cancelled[tag] = ledger.now()
        f.kill_random(rng, "--concurrency", "3", "--cancel-grace", "0.3")
    others = [j.id for j in jobs if j.id not in cancelled]
    assert wait_for(
        lambda: all(q.state(t) is None for t in others) and q.counts()["inflight"] == 0,
        timeout=120,
        step=0.2,
    )
    f.stop_all()
    late = [
        (r.job, r.started - cancelled[r.job])
        for r in f.runs()
        if r.job in cancelled and r.started > cancelled[r.job] + 0.05  # clock read slack
    ]
    print(
        f"FAULT R-cancel jobs={n} cancelled={len(cancelled)} waiting={outcomes['waiting']} "
        f"running={outcomes['running']} late_starts={len(late)}"
    )
    assert outcomes["running"] > 0, "no cancel met a running job: the test proved nothing"
    assert late == []
    assert all(q.cancelled(t) is not None for t in cancelled)
    done = {r.job for r in f.runs() if r.finished is not None}
    assert set(others) <= done  # everything not cancelled ran to its end


def test_r_child_a_killed_child_never_leaves_a_lease(
    fault: Callable[..., Fault], long_run: bool
) -> None:
    n, kills = (60, 20) if long_run else (12, 5)
    f = fault(lease=300.0)  # a lease left behind would stay 5 minutes
    rng = random.Random(11)
    jobs = tasks.fault_run.using(queue=QUEUE).enqueue_many(
        [(f.ledger, str(i), 1.0) for i in range(n)]
    )
    f.start_worker("--concurrency", "2", "--pool", "process")
    q = f.queue()
    out_of_lease: list[float] = []
    killed: set[int] = set()
    while len(killed) < kills:
        running = [r for r in f.runs() if r.finished is None and r.pid not in killed]
        if not running:
            time.sleep(0.05)
            continue
        victim = rng.choice(running)
        if victim.pid == os.getpid():
            continue
        try:
            os.kill(victim.pid, signal.SIGKILL)
        except ProcessLookupError:
            continue  # it finished meanwhile
        t0 = time.monotonic()
        killed.add(victim.pid)
        assert wait_for(
            lambda job=victim.job, attempt=victim.attempt: (  # type: ignore[misc]
                q.state(job) != "leased" or _attempt(q, job) > attempt
            ),
            timeout=15,
        ), f"job {victim.job} kept its lease after its child was killed"
        out_of_lease.append(time.monotonic() - t0)
    done = lambda: {r.job for r in f.runs() if r.finished is not None}  # noqa: E731
    assert wait_for(lambda: {j.id for j in jobs} <= done(), timeout=120, step=0.2)
    assert wait_for(lambda: q.counts()["inflight"] == 0, timeout=10)
    f.stop_all()
    print(
        f"FAULT R-child jobs={n} children_killed={len(killed)} "
        f"out_of_lease_max_s={maximum(out_of_lease)}"
    )
    for pid in killed:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _attempt(q: object, job: str) -> int:
    info = q.info(job)  # type: ignore[attr-defined]
    return 0 if info is None else int(info.attempts)
