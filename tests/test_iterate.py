"""``durable.iterate``: a cursor over an iterable that survives a stop (SIGTERM, a run's
``max_runtime``) without spending an attempt, and a cancel between items. Real Redis,
real worker processes for the stop."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from django_zqueue import durable, get_queue, task
from django_zqueue.exceptions import StepError
from django_zqueue.worker import Worker
from testproject.demo import tasks

ROOT = Path(__file__).resolve().parent.parent


def rows_of(ledger: Path) -> list[tuple[int, str, str]]:
    out = []
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        row, attempt, pid = line.split()
        out.append((int(row), attempt, pid))
    return out


def test_max_runtime_gives_the_job_back_between_items_without_an_attempt(
    project: dict[str, str], tmp_path: Path
) -> None:
    """max_runtime 0: every run does one item, records the cursor and is given back;
    the job still ends with each item done once, on its first attempt."""
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    job = tasks.backfill.enqueue(str(ledger), 25, max_runtime=0)
    w = Worker(["default"], burst=True, scanner=False)
    w.run()
    rows = rows_of(ledger)
    assert [r for r, _, _ in rows] == list(range(25))  # each once, in order
    assert {a for _, a, _ in rows} == {"attempt=1"}  # no attempt spent by a pause
    assert job.status() == "unknown"  # ended (no result kept)
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    stats = q.stats()
    # one item a run: 24 runs given back between two items, the 25th ends the walk
    assert stats.get("released", 0) == 24 and stats.get("failed", 0) == 0


_seen: list[int] = []


@task(queue="default", max_retries=0)
def cancelled_walk(n: int) -> None:
    from django_zqueue import current_job

    for i in durable.iterate("walk", range(n), checkpoint_every=5):
        _seen.append(i)
        if i == 7:
            job = current_job()
            assert job is not None
            job.queue.cancel(job.id)
            job.request_cancel()  # what the heartbeat does once touch says so


def test_a_cancel_takes_effect_between_items(project: dict[str, str]) -> None:
    _seen.clear()
    q = get_queue("default")
    cancelled_walk.enqueue(100)
    Worker(["default"], burst=True, scanner=False).run()
    assert _seen == list(range(8))  # stopped after the item it was cancelled in
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}


@pytest.mark.parametrize("every", [0, -1, 1.5, True, "10"])
def test_bad_checkpoint_every_is_refused(every: Any, project: dict[str, str]) -> None:
    errors: list[BaseException] = []

    @task(queue="default", max_retries=0, name=f"tests.iterate_bad_{abs(hash(repr(every)))}")
    def bad() -> None:
        try:
            list(durable.iterate("x", range(3), checkpoint_every=every))
        except StepError as exc:
            errors.append(exc)

    bad.enqueue()
    Worker(["default"], burst=True, scanner=False).run()
    assert len(errors) == 1 and "checkpoint_every" in str(errors[0])


def test_iterate_outside_a_job_raises() -> None:
    with pytest.raises(StepError, match="outside a job"):
        next(iter(durable.iterate("x", range(3))))


@pytest.mark.slow
def test_a_5000_row_backfill_stopped_by_sigterm_resumes_each_row_once(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    job = tasks.backfill.enqueue(str(ledger), 5000, pause_at=1234)
    cmd = [sys.executable, str(ROOT / "testproject" / "manage.py"), "zqueue_worker"]
    first = subprocess.Popen(
        [*cmd, "--grace", "20"],
        env=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{ledger}.at").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert Path(f"{ledger}.at").exists()
    finally:
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=60)
    assert first.returncode == 0, out
    assert "event=job_paused" in out, out
    done = len(rows_of(ledger))
    assert 1235 <= done < 5000, out  # stopped mid-way, between two rows
    assert q.state(job.id) == "ready"  # given back to its place, not left leased
    assert q.info(job.id).attempts == 0  # type: ignore[union-attr]  # as before it ran
    second = subprocess.run(
        [*cmd, "--burst"], env=project, capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stdout + second.stderr
    rows = rows_of(ledger)
    assert sorted(r for r, _, _ in rows) == list(range(5000))  # each row exactly once
    assert {a for _, a, _ in rows} == {"attempt=1"}  # the stop spent no attempt
    assert len({p for _, _, p in rows}) == 2  # two processes: it resumed, not restarted
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    assert q.stats().get("failed", 0) == 0
