"""ORM jobs/s: a task doing one ORM INSERT, drained by one worker process, beside the
direct insert loop (its ceiling) in the same run.

    python -m bench.orm [--n 2000] [--rounds 5] [--db auto|postgres|sqlite] [--timeout 300]

The database is PostgreSQL when one answers at ``ZQUEUE_BENCH_POSTGRES_URL`` (default
``postgres://postgres@127.0.0.1:5432/test``): a database of the run's own is created
there and dropped at the end; else a SQLite file in a temporary directory. Rows:

- ``direct loop``: ``Article.objects.create()`` N times in this process (the ceiling),
  at the start and end of each round;
- ``worker, Django defaults``: N jobs ``zqbench.orm_insert`` drained by one
  ``zqueue_worker --burst`` process (one thread, ``CONN_MAX_AGE = 0``);
- ``worker, CONN_MAX_AGE=600``: the same with persistent connections;
- ``worker, a connection per job (before)``: Django's defaults as the worker applied them
  before it kept connections across jobs (the task closes its connection after its
  INSERT: ``ZQBENCH_ORM_CLOSE=1``), for a same-run contrast.

The rows are measured in turn, ``--rounds`` times over; each round starts and ends with
the direct loop, and a row's ratio is its rate over the mean of that round's two direct
loops (a busy spell of a shared host slows both sides). Medians over the rounds are
printed; the connection-per-job row drains N/4 jobs (it is ten times slower). Rates are steady
ones, from the rows' ``created`` stamps (first to last insert), so the worker's start-up
is not counted; CPU ms per job is the worker process's user + system time over N, less
the CPU of a worker that starts and finds nothing to do: less sensitive to a busy host
than the rates. The SQLite file is on /dev/shm when there is one (no disk syncs).
Prints a table and one ``RESULT {json}`` line. Uses the testproject settings (the
``bench`` app added) under a private Redis key prefix; deletes only its own keys.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PREFIX = f"zqbench-{uuid.uuid4().hex[:8]}"
PG_URL = os.environ.get("ZQUEUE_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")


def postgres_up(url: str) -> bool:
    try:
        import psycopg

        psycopg.connect(_dsn(url), connect_timeout=3).close()
        return True
    except Exception:
        return False


def _dsn(url: str) -> str:
    return url.replace("postgres://", "postgresql://", 1)


def _admin(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(_dsn(url), autocommit=True, connect_timeout=3) as c:
        c.execute(sql)  # type: ignore[arg-type]


def setup_database(choice: str, tmp: str) -> tuple[str, str, str | None]:
    """(vendor, DATABASE_URL, database to drop at the end) for ``choice``."""
    if choice != "sqlite" and postgres_up(PG_URL):
        name = PREFIX.replace("-", "_")
        _admin(PG_URL, f"CREATE DATABASE {name}")
        return "postgresql", PG_URL.rsplit("/", 1)[0] + "/" + name, name
    if choice == "postgres":
        raise SystemExit(f"PostgreSQL does not answer at {PG_URL}")
    return "sqlite", f"sqlite:///{tmp}/orm.sqlite3", None


def worker(url: str, timeout: float, extra: dict[str, str]) -> float:
    """Run one ``zqueue_worker --burst`` on ``url``; returns its wall time."""
    env = {
        **os.environ,
        **extra,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": url,
        "ZQUEUE_PREFIX": PREFIX,
        "DJANGO_SETTINGS_MODULE": "bench.django_settings",
    }
    cmd = [sys.executable, str(ROOT / "testproject/manage.py"), "zqueue_worker", "-v", "0"]
    t0 = time.perf_counter()
    p = subprocess.run([*cmd, "--burst", "--queues", "default"], env=env, timeout=timeout)
    if p.returncode:
        raise SystemExit(f"the worker exited with {p.returncode}")
    return time.perf_counter() - t0


def steady_rate(label: str) -> tuple[int, float]:
    """(rows, inserts/s from the first to the last row's ``created``) of ``label``."""
    from django.db.models import Max, Min

    from testproject.demo.models import Article

    rows = Article.objects.filter(title__startswith=f"{label} ")
    got = rows.aggregate(first=Min("created"), last=Max("created"))
    n = rows.count()
    span = (got["last"] - got["first"]).total_seconds() if n > 1 else 0.0
    return n, (n - 1) / span if span > 0 else 0.0


class Row(NamedTuple):
    """One measurement: rows written, steady inserts/s, wall seconds, CPU ms per insert
    (the worker process's user + system time; this process's for the direct loop)."""

    rows: int
    per_s: float
    wall_s: float
    cpu_ms: float


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def direct(label: str, n: int) -> Row:
    from testproject.demo.models import Article

    c0, t0 = _cpu(resource.RUSAGE_SELF), time.perf_counter()
    for i in range(n):
        Article.objects.create(title=f"{label} {i}")
    wall, cpu = time.perf_counter() - t0, _cpu(resource.RUSAGE_SELF) - c0
    return Row(*steady_rate(label), wall, cpu * 1000 / n)


def startup_cpu(url: str, timeout: float) -> float:
    """CPU seconds of a worker that starts, finds no job and exits (taken off the drains)."""
    c0 = _cpu(resource.RUSAGE_CHILDREN)
    worker(url, timeout, {})
    return _cpu(resource.RUSAGE_CHILDREN) - c0


def drain(label: str, n: int, url: str, timeout: float, startup: float = 0.0, **extra: str) -> Row:
    from bench import tasks
    from django_zqueue import get_queue

    q = get_queue("default")
    for i in range(0, n, 1000):
        tasks.orm_insert.enqueue_many([(label, j) for j in range(i, min(n, i + 1000))])
    c0 = _cpu(resource.RUSAGE_CHILDREN)
    wall = worker(url, timeout, extra)
    cpu = max(0.0, _cpu(resource.RUSAGE_CHILDREN) - c0 - startup)
    acked = q.stats().get("acked", 0)
    if q.total_count() or q.counts().get("dead"):
        raise SystemExit(f"{label}: jobs left or dead: {q.counts()}")
    q.clear()
    rows, rate = steady_rate(label)
    if rows != n:
        raise SystemExit(f"{label}: {rows} rows for {n} jobs ({acked} acked)")
    return Row(rows, rate, wall, cpu * 1000 / n)


def run(n: int, url: str, vendor: str, timeout: float, rounds: int) -> dict[str, Any]:
    os.environ["DATABASE_URL"] = url
    os.environ["ZQUEUE_PREFIX"] = PREFIX
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.django_settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    sep = "&" if "?" in url else "?"
    persistent = f"{url}{sep}conn_max_age=600"
    boot = min(startup_cpu(url, timeout) for _ in range(2))
    plan: dict[str, Callable[[str], Row]] = {
        "worker, Django defaults (CONN_MAX_AGE=0)": lambda label: drain(
            label, n, url, timeout, boot
        ),
        "worker, CONN_MAX_AGE=600": lambda label: drain(label, n, persistent, timeout, boot),
        "worker, a connection per job (before)": lambda label: drain(
            label, max(2, n // 4), url, timeout, boot, ZQBENCH_ORM_CLOSE="1"
        ),
    }
    runs: dict[str, list[Row]] = {name: [] for name in [DIRECT, *plan]}
    ceilings: list[float] = []  # each round's: the mean of its two direct loops
    for r in range(rounds):  # interleaved, so that a busy spell of the host hits every row
        first = direct(f"r{r}a", n)
        for k, (name, measure) in enumerate(plan.items()):
            runs[name].append(measure(f"r{r}k{k}"))
        last = direct(f"r{r}b", n)
        runs[DIRECT] += [first, last]
        ceilings.append((first.per_s + last.per_s) / 2)
    out = {
        "bench": "orm",
        "database": vendor,
        "n": n,
        "rounds": rounds,
        "worker_startup_cpu_s": round(boot, 3),
        "rows": [_row(DIRECT, runs[DIRECT], [c for c in ceilings for _ in (0, 1)])]
        + [_row(name, runs[name], ceilings) for name in plan],
    }
    from django.db import connections

    connections.close_all()
    return out


DIRECT = "direct loop"


def _row(name: str, rows: list[Row], ceilings: list[float]) -> dict[str, Any]:
    """A row's figures: median rate and CPU, and the median of its rounds' ratios to the
    direct loop of the same round."""
    ratios = [x.per_s / c for x, c in zip(rows, ceilings, strict=True) if c]
    return {
        "name": name,
        "per_s": round(statistics.median(x.per_s for x in rows), 1),
        "ratio_to_direct": round(statistics.median(ratios), 3) if ratios else None,
        "cpu_ms_per_job": round(statistics.median(x.cpu_ms for x in rows), 3),
        "rounds_per_s": [round(x.per_s, 1) for x in rows],
        "rounds_ratio": [round(x, 3) for x in ratios],
    }


def report(out: dict[str, Any]) -> str:
    head = f"ORM INSERT jobs, {out['n']} each, {out['database']} (one worker process, 1 thread)"
    head += f", medians of {out['rounds']} interleaved rounds"
    lines = [head, f"{'':44}{'jobs/s':>9}  {'x direct':>8}  {'CPU ms/job':>10}  rounds (x direct)"]
    for r in out["rows"]:
        each = ", ".join(f"{x:.2f}" for x in r["rounds_ratio"])
        lines.append(
            f"{r['name']:44}{r['per_s']:>9,.0f}  {r['ratio_to_direct']:>8.2f}"
            f"  {r['cpu_ms_per_job']:>10.3f}  {each}"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="jobs (and direct inserts) per row")
    ap.add_argument("--db", choices=["auto", "postgres", "sqlite"], default="auto")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (medians)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per worker run")
    args = ap.parse_args()
    if not 1 < args.n <= 200_000:
        ap.error("--n must be in 2..200000")
    if not 1 <= args.rounds <= 10:
        ap.error("--rounds must be in 1..10")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        vendor, url, dropped = setup_database(args.db, tmp)
        try:
            out = run(args.n, url, vendor, args.timeout, args.rounds)
        finally:
            _cleanup(dropped)
    print(report(out))
    print("RESULT " + json.dumps(out))


def _cleanup(database: str | None) -> None:
    import redis

    from django_zqueue.engine.redis.connection import get_client

    try:
        client: redis.Redis = get_client()
        keys = list(client.scan_iter(match=f"{{{PREFIX}:*", count=1000))
        if keys:
            client.delete(*keys)
    except Exception as exc:
        print(f"cleanup: Redis keys under {PREFIX} left: {exc}", file=sys.stderr)
    if database is not None:
        _admin(PG_URL, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


if __name__ == "__main__":
    main()
