"""Process isolation: a task run in a child process that the worker kills past its
timeout (even blocked in C), or when it is cancelled; a child that dies leaves no lease."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from django_zqueue import current_job, get_queue, task
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.worker import Worker


def _note(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@task(isolation="process", store_result=True)
def in_child(x: int) -> dict[str, int]:
    job = current_job()
    assert job is not None
    return {"pid": os.getpid(), "double": 2 * x, "attempt": job.attempt}


@task(isolation="process", timeout=0.5, max_retries=1, retry_backoff={"base": 0, "max": 0})
def blocked_in_c(ledger: str) -> None:
    _note(ledger, f"start {os.getpid()}")
    time.sleep(60)  # one C call: a thread-mode timeout cannot interrupt it
    _note(ledger, "finished")


@task(isolation="process", max_retries=0)
def fails(ledger: str) -> None:
    _note(ledger, "fails")
    raise RuntimeError("boom in the child")


@task(isolation="process", max_retries=0, visibility_timeout=3)
def sleeps_for_cancel(ledger: str) -> None:
    _note(ledger, f"start {os.getpid()}")
    time.sleep(60)


@task(isolation="process", max_retries=0)
def exits_hard(ledger: str) -> None:
    _note(ledger, f"start {os.getpid()}")
    time.sleep(60)


@task(store_result=True)
def runner_pid() -> int:
    return os.getpid()


def test_a_task_runs_in_a_child_and_its_result_comes_back(project: dict[str, str]) -> None:
    job = in_child.enqueue(21)
    w = Worker(["default"], burst=True)
    w.run()
    result = job.result()
    assert result["double"] == 42 and result["attempt"] == 1
    assert result["pid"] != os.getpid()
    assert w.processed == 1 and w.failed == 0


def test_a_child_blocked_in_c_is_killed_and_retried_under_the_normal_rules(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    job = blocked_in_c.enqueue(str(ledger))
    w = Worker(["default"], burst=True, scan_interval=0.05)
    w.run()
    starts = [line for line in _lines(ledger) if line.startswith("start")]
    assert len(starts) == 2 and "finished" not in _lines(ledger)  # 1 run + 1 retry
    info = job.info()
    assert info is not None and info.state == "dead" and info.attempts == 2
    assert "JobTimeout" in (info.last_error or "")
    assert "SIGTERM" in (info.last_error or "")
    for line in starts:  # every child is gone
        with pytest.raises(ProcessLookupError):
            os.kill(int(line.split()[1]), 0)
    assert get_queue("default").counts()["inflight"] == 0


def test_a_failure_in_the_child_is_a_failure(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    job = fails.enqueue(str(ledger))
    Worker(["default"], burst=True).run()
    info = job.info()
    assert info is not None and info.state == "dead"
    assert "RuntimeError: boom in the child" in (info.last_error or "")


def _start(ledger: Path, **options: object) -> tuple[Worker, threading.Thread, int]:
    w = Worker(["default"], burst=True, scan_interval=0.05, **options)  # type: ignore[arg-type]
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not _lines(ledger):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.01)
    return w, t, int(_lines(ledger)[0].split()[1])


def test_a_cancelled_isolated_job_is_killed(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    job = sleeps_for_cancel.enqueue(str(ledger))
    _, t, pid = _start(ledger, cancel_grace=0.1)
    assert job.cancel()
    t.join(20)
    assert not t.is_alive()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert job.status() == "cancelled"
    assert get_queue("default").counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}


def test_a_child_killed_from_outside_leaves_no_lease(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    job = exits_hard.enqueue(str(ledger))
    _, t, pid = _start(ledger)
    os.kill(pid, signal.SIGKILL)
    t.join(20)
    assert not t.is_alive()
    info = job.info()
    assert info is not None and info.state == "dead"
    assert "killed by signal SIGKILL" in (info.last_error or "")
    assert get_queue("default").counts()["inflight"] == 0


def test_the_process_pool_runs_every_task_in_a_child(project: dict[str, str]) -> None:
    here, there = runner_pid.enqueue(), runner_pid.enqueue()
    Worker(["default"], burst=True, max_jobs=1).run()
    assert here.result() == os.getpid()  # thread mode: in the worker's own process
    Worker(["default"], burst=True, pool="process").run()
    assert there.result() != os.getpid()


def test_bad_isolation_options_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="isolation"):
        task(isolation="fiber")(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="pool"):
        Worker(["default"], pool="fiber")
