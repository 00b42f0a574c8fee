"""Demo tasks: they sleep, fail, report progress and touch a model.

The tests run them in real worker processes; each writes what it did to a ledger file
(one line per run) so a test can count runs from outside Redis.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from django.db.models import F

from django_zqueue import current_job, task

from .models import Article


def _ledger(path: str | None, line: str) -> None:
    if path:
        with Path(path).open("a") as f:
            f.write(line + "\n")


@task
def noop() -> None:
    """Does nothing: for throughput figures."""


@task(store_result=True, result_ttl=300)
def add(a: int, b: int) -> int:
    return a + b


@task(queue="default")
def record(ledger: str, value: Any) -> None:
    """Append ``value`` and this job's attempt to the ledger file."""
    job = current_job()
    _ledger(ledger, f"{value} attempt={job.attempt if job else 0} pid={os.getpid()}")


@task
def sleep(seconds: float, ledger: str | None = None, value: Any = None) -> None:
    _ledger(ledger, f"start {value}")
    time.sleep(seconds)
    _ledger(ledger, f"done {value}")


@task(max_retries=2, retry_backoff={"base": 0, "max": 0, "jitter": 0})
def always_fails(ledger: str | None = None) -> None:
    job = current_job()
    _ledger(ledger, f"fail attempt={job.attempt if job else 0}")
    raise RuntimeError("this task always fails")


@task(max_retries=3, retry_backoff={"base": 0, "max": 0, "jitter": 0})
def flaky(ledger: str, succeed_on: int) -> str:
    job = current_job()
    attempt = job.attempt if job else 1
    _ledger(ledger, f"flaky attempt={attempt}")
    if attempt < succeed_on:
        raise ValueError(f"not yet (attempt {attempt})")
    return "ok"


@task
def with_progress(steps: int = 4) -> None:
    job = current_job()
    for i in range(steps):
        if job:
            job.progress((i + 1) / steps, f"step {i + 1} of {steps}")


@task
def bump_views(article: Article) -> None:
    """Touches a model passed by reference."""
    Article.objects.filter(pk=article.pk).update(views=F("views") + 1)


@task(timeout=0.5, max_retries=0)
def too_slow(ledger: str | None = None) -> None:
    _ledger(ledger, "too_slow start")
    for _ in range(100):
        time.sleep(0.05)
    _ledger(ledger, "too_slow finished")


@task
def latency_probe(key: str, sent_at: float) -> None:
    """Benchmark probe: push (start time - enqueue time) to the Redis list ``key``."""
    job = current_job()
    if job is not None:
        job.queue.engine._client.rpush(key, time.time() - sent_at)


@task(timeout=0.5, max_retries=0)
def quick_with_timeout() -> None:
    """Finishes well within its timeout (a timeout must not leak to the next job)."""


@task(cron="*/10 * * * *")
def heartbeat() -> None:
    """A periodic demo task: every ten minutes."""


@task
def stamp(ledger: str, value: Any) -> None:
    """Append ``value`` and the wall-clock start time (for on-time checks)."""
    _ledger(ledger, f"{value} {time.time():.6f}")


# ------------------------------------------------------------------ fault suite (tests/fault)
# Each run is recorded in a SQLite ledger (testproject/demo/ledger.py), outside Redis.


def _fault_start(ledger: str, key: str) -> int:
    from . import ledger as db

    job = current_job()
    return db.start(ledger, job.id if job else "", key, job.attempt if job else 0, os.getpid())


@task(max_retries=100, retry_backoff={"base": 0, "max": 0, "jitter": 0})
def fault_run(ledger: str, key: str, seconds: float = 0.0) -> None:
    """Record the run's start, sleep ``seconds``, record its end."""
    from . import ledger as db

    run = _fault_start(ledger, key)
    if seconds:
        time.sleep(seconds)
    db.finish(ledger, run)


def _fault_step(ledger: str, key: str, seconds: float) -> str:
    from . import ledger as db

    run = _fault_start(ledger, key)
    if seconds:
        time.sleep(seconds)
    db.finish(ledger, run)
    return key


@task(max_retries=100, retry_backoff={"base": 0, "max": 0, "jitter": 0})
def fault_durable(ledger: str, key: str, seconds: float = 0.0) -> None:
    """A durable task (docs/durable.md): step ``<key>:a``, a 0.2 s durable sleep, step
    ``<key>:b``; each step records its runs in the ledger, under its own key."""
    from django_zqueue import durable

    durable.step("a", _fault_step, ledger, f"{key}:a", seconds)
    durable.sleep("nap", 0.2)
    durable.step("b", _fault_step, ledger, f"{key}:b", seconds)


@task(max_retries=100, retry_backoff={"base": 0, "max": 0, "jitter": 0})
def fault_walk(ledger: str, rows: int, seconds: float = 0.0, every: int = 50) -> int:
    """Walk ``rows`` rows with ``durable.iterate``, one ledger row per row done (its key
    the row's number, its attempt the job's), one SQLite connection per run."""
    from django_zqueue import durable

    from . import ledger as db

    job = current_job()
    tag, attempt = (job.id, job.attempt) if job else ("", 0)
    conn = db.connect(ledger)
    try:
        for i in durable.iterate("rows", range(rows), checkpoint_every=every):
            conn.execute(
                "INSERT INTO runs (job, key, attempt, pid, started, finished) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (tag, str(i), attempt, os.getpid(), db.now(), db.now()),
            )
            if seconds:
                time.sleep(seconds)
    finally:
        conn.close()
    return rows


@task(max_retries=100, retry_backoff={"base": 0, "max": 0, "jitter": 0})
def fault_summary(summary: dict[str, Any], ledger: str, key: str) -> None:
    """A batch's callback: records its run under ``key``, and the summary it was given as
    a finished run under ``<key>#<succeeded>/<dead>/<cancelled>/<expired>``."""
    from . import ledger as db

    run = _fault_start(ledger, key)
    counts = "/".join(str(len(summary[o])) for o in ("succeeded", "dead", "cancelled", "expired"))
    db.finish(ledger, _fault_start(ledger, f"{key}#{counts}"))
    db.finish(ledger, run)


@task(max_retries=3, retry_backoff={"base": 0, "max": 0, "jitter": 0})
def fault_raise(ledger: str, key: str) -> None:
    """Poison: always raises (dead after max_retries + 1 = 4 runs)."""
    _fault_start(ledger, key)
    raise RuntimeError("poison job")


@task(max_retries=2, retry_backoff={"base": 0, "max": 0, "jitter": 0})
def fault_exit(ledger: str, key: str) -> None:
    """Poison: kills its own worker process (dead after max_retries + 1 = 3 leases expire)."""
    _fault_start(ledger, key)
    os._exit(17)


@task(
    max_retries=100,
    retry_backoff={"base": 0.05, "max": 0.05, "jitter": 0},
    ordering_key=lambda ledger, okey, seq, fail: okey,
)
def fault_ordered(ledger: str, okey: str, seq: int, fail: bool) -> None:
    """Strict order per key (tests/fault/test_order_faults.py): record the run as
    ``<okey>:<seq>``; with ``fail``, the first attempt records ``<okey>:<seq>:fail``,
    finished, and raises."""
    from . import ledger as db

    job = current_job()
    if fail and job is not None and job.attempt == 1:
        db.finish(ledger, _fault_start(ledger, f"{okey}:{seq}:fail"))
        raise RuntimeError("first attempt fails")
    db.finish(ledger, _fault_start(ledger, f"{okey}:{seq}"))


_LEAKED: list[bytes] = []  # what ``leak`` keeps: memory a worker process never gets back


@task(queue="default", max_retries=0)
def leak(ledger: str, value: Any, mb: int) -> None:
    """Keep ``mb`` MiB for the rest of the process (a leaky task: an ORM cache, a big
    queryset), then append ``value`` and this process's pid to the ledger."""
    _LEAKED.append(b"\x01" * (mb * 1024 * 1024))
    _ledger(
        ledger, f"{value} attempt={current_job().attempt if current_job() else 0} pid={os.getpid()}"
    )


@task(queue="default", max_retries=0)
def backfill(ledger: str, rows: int, pause_at: int = -1, max_runtime: float | None = None) -> None:
    """Walk ``rows`` rows with a durable cursor, one ledger line per row (with this run's
    attempt and pid); ``pause_at``: touch ``<ledger>.at`` once that row is done (a
    test's cue)."""
    from django_zqueue import durable

    job = current_job()
    attempt = job.attempt if job else 0
    rows_ = durable.iterate("rows", range(rows), checkpoint_every=100, max_runtime=max_runtime)
    with open(ledger, "a") as f:
        for row in rows_:
            f.write(f"{row} attempt={attempt} pid={os.getpid()}\n")
            f.flush()
            if row == pause_at:
                Path(ledger + ".at").touch()
            time.sleep(0.0005)
