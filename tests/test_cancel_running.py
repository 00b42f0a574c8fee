"""Cancelling a job while a worker runs it: the worker sees the cancel at its next
heartbeat, the job sees ``current_job().cancel_requested``, a job that ignores it gets
``JobCancelled`` after the worker's ``cancel_grace``, and nothing runs it again."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from django_zqueue import current_job, get_queue, task
from django_zqueue.worker import JobCancelled, Worker


def _note(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


@task(visibility_timeout=3, max_retries=3)
def cooperative(ledger: str) -> str:
    _note(ledger, "start")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = current_job()
        if job is not None and job.cancel_requested:
            _note(ledger, "stopped cleanly")
            return "stopped"
        time.sleep(0.02)
    _note(ledger, "ran to the end")
    return "done"


@task(visibility_timeout=3, max_retries=3)
def stubborn(ledger: str) -> None:
    _note(ledger, "start")
    try:
        for _ in range(1500):  # 30 s, never looking at cancel_requested
            time.sleep(0.02)
        _note(ledger, "ran to the end")
    except JobCancelled:
        _note(ledger, "JobCancelled")
        raise


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _run_until_started(ledger: Path, **options: float) -> tuple[Worker, threading.Thread]:
    # no scanner: the demo's */10 schedule never fires a job into the counted queue
    w = Worker(["default"], burst=True, scanner=False, **options)  # type: ignore[arg-type]
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while "start" not in _lines(ledger):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.01)
    return w, t


def test_a_running_job_sees_the_cancel_and_stops_cleanly(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    job = cooperative.enqueue(str(ledger))
    _, t = _run_until_started(ledger)
    assert job.cancel()
    t.join(20)
    assert not t.is_alive()
    assert _lines(ledger) == ["start", "stopped cleanly"]
    assert job.status() == "cancelled"
    q = get_queue("default")
    stats = q.stats()
    assert stats.get("acked", 0) == 0 and stats.get("failed", 0) == 0
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    Worker(["default"], burst=True).run()  # nothing runs it again
    assert _lines(ledger) == ["start", "stopped cleanly"]


def test_a_job_that_ignores_the_cancel_gets_job_cancelled_after_the_grace(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    job = stubborn.enqueue(str(ledger))
    w, t = _run_until_started(ledger, cancel_grace=0.2)
    assert get_queue("default").cancel_job(job.id) == "running"
    t.join(20)
    assert not t.is_alive()
    assert _lines(ledger) == ["start", "JobCancelled"]
    assert job.status() == "cancelled"
    assert w.processed == 1
    assert get_queue("default").counts()["dead"] == 0  # not a failure: no retry, no dead letter
