"""Worker recycling (``--max-jobs-per-child``, ``--max-memory``; worker/recycle.py): a
worker past its budget stops as on SIGTERM, gives back what it prefetched, and the parent
starts a fresh one. Real Redis, real processes for the memory budget."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from django_zqueue import get_queue
from django_zqueue.worker import Worker
from django_zqueue.worker.recycle import RECYCLE_EXIT, Budget, Recycler, jittered, rss_mb
from testproject.demo import tasks

ROOT = Path(__file__).resolve().parent.parent


def children(parent: int) -> list[int]:
    path = Path(f"/proc/{parent}/task/{parent}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_the_jobs_budget_has_up_to_ten_percent_of_jitter() -> None:
    seen = {jittered(100) for _ in range(300)}
    assert min(seen) >= 100 and max(seen) <= 110 and len(seen) > 3
    assert {jittered(5) for _ in range(50)} == {5}  # under 10 jobs: no jitter
    assert all(100 <= Budget(jobs=100).jobs <= 110 for _ in range(50))  # type: ignore[operator]


@pytest.mark.parametrize(
    ("jobs", "memory"), [(0, None), (-1, None), (True, None), (None, 0), (None, -5.0)]
)
def test_a_bad_budget_is_refused(jobs: object, memory: object) -> None:
    with pytest.raises(ValueError):
        Budget(jobs, memory)  # type: ignore[arg-type]


def test_the_budget_says_why_it_is_spent() -> None:
    assert rss_mb() > 1
    assert not Budget().limited and Budget().spent(10**6) is None
    assert Budget(jobs=3).spent(2) is None
    assert Budget(jobs=3).spent(3) == {"reason": "max_jobs", "jobs": "3", "limit": "3"}
    spent = Budget(memory_mb=1).spent(1)  # any process is past 1 MiB
    assert spent is not None and spent["reason"] == "max_memory"
    assert Budget(memory_mb=10**6).spent(1) is None


def test_the_recycler_stops_the_worker_once() -> None:
    stopping = threading.Event()
    r = Recycler(Budget(jobs=2), stopping, "w1")
    assert not r.after_job(1) and not stopping.is_set()
    assert r.after_job(2) and stopping.is_set() and r.reason == "max_jobs"
    assert not r.after_job(3)  # said once


def test_a_worker_past_its_jobs_budget_stops_and_gives_back_what_it_prefetched(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    for i in range(10):
        tasks.record.enqueue(str(ledger), i)
    w = Worker(["default"], prefetch=5, scanner=False, max_jobs_per_child=3)
    timer = threading.Timer(30, w.stop)  # a bound, should the budget never stop it
    timer.start()
    try:
        assert w.run() == 3
    finally:
        timer.cancel()
    assert w.recycler.reason == "max_jobs"
    assert [x.split()[0] for x in lines(ledger)] == ["0", "1", "2"]
    counts = q.counts()
    assert counts == {"ready": 7, "delayed": 0, "inflight": 0, "dead": 0}
    assert q.stats().get("recycled") == 1
    assert q.stats().get("failed", 0) == 0
    # the jobs given back kept their places: the next worker runs 3, 4, 5 ... in order
    Worker(["default"], burst=True, scanner=False).run()
    assert [int(x.split()[0]) for x in lines(ledger)] == list(range(10))


@pytest.mark.slow
def test_a_child_leaking_past_max_memory_is_replaced_after_its_job_nothing_lost(
    project: dict[str, str], tmp_path: Path
) -> None:
    """Each job keeps 100 MiB for good: with --max-memory 100 every child is past it after
    one job, so it gives back the jobs it prefetched, exits, and a fresh one goes on."""
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    jobs = [tasks.leak.enqueue(str(ledger), i, 100) for i in range(4)]
    args = ["--processes", "1", "--max-memory", "100", "--prefetch", "4", "--grace", "10"]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), "zqueue_worker", *args],
        env=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while len(lines(ledger)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            for pid in children(proc.pid):
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            out, _ = proc.communicate(timeout=10)
            raise AssertionError(f"the worker did not stop on SIGTERM:\n{out}") from None
    assert proc.returncode == 0, out
    done = lines(ledger)
    assert sorted(int(x.split()[0]) for x in done) == [0, 1, 2, 3], out  # each exactly once
    assert all("attempt=1" in x for x in done), done  # no delivery lost or retried
    pids = {x.split("pid=")[1] for x in done}
    assert len(pids) == 4, done  # one child per job: each replaced after its job
    assert out.count("event=worker_recycle ") >= 3, out
    assert "reason=max_memory" in out and "event=child_died" not in out
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    stats = q.stats()
    assert stats.get("failed", 0) == 0 and stats.get("dead", 0) == 0
    assert stats.get("recycled", 0) >= 3
    assert {j.status() for j in jobs} == {"unknown"}  # ended, no result kept: none dead


def test_the_exit_status_of_a_recycled_worker_is_not_a_clean_stop() -> None:
    assert RECYCLE_EXIT not in (0, 1, 2)


@pytest.mark.slow
def test_two_children_recycled_by_jobs_run_every_job_once(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    for i in range(40):
        tasks.record.enqueue(str(ledger), i)
    args = ["--processes", "2", "--max-jobs-per-child", "5", "--prefetch", "3"]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), "zqueue_worker", *args],
        env=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while len(lines(ledger)) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            for pid in children(proc.pid):
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            out, _ = proc.communicate(timeout=10)
            raise AssertionError(f"the worker did not stop on SIGTERM:\n{out}") from None
    assert proc.returncode == 0, out
    done = lines(ledger)
    assert sorted(int(x.split()[0]) for x in done) == list(range(40)), out  # each once
    assert all("attempt=1" in x for x in done), done
    per_pid: dict[str, int] = {}
    for x in done:
        pid = x.split("pid=")[1]
        per_pid[pid] = per_pid.get(pid, 0) + 1
    assert len(per_pid) >= 40 // 5, per_pid  # no process ran more than its 5 jobs
    assert max(per_pid.values()) <= 5, per_pid
    assert "reason=max_jobs" in out and "event=child_died" not in out
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
