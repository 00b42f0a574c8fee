"""ORM jobs/s: a task doing one ORM INSERT, drained by one worker process, beside the
direct insert loop (its ceiling) in the same run.

    python -m bench.orm [--n 5000] [--db auto|postgres|sqlite] [--timeout 300]

The database is PostgreSQL when one answers at ``ZQUEUE_BENCH_POSTGRES_URL`` (default
``postgres://postgres@127.0.0.1:5432/test``): a database of the run's own is created
there and dropped at the end; else a SQLite file in a temporary directory. Rows:

- ``direct loop``: ``Article.objects.create()`` N times in this process, before and after
  the worker runs (the best of the two is the ceiling);
- ``worker, Django defaults``: N jobs ``zqbench.orm_insert`` drained by one
  ``zqueue_worker --burst`` process (one thread, ``CONN_MAX_AGE = 0``);
- ``worker, CONN_MAX_AGE=600``: the same with persistent connections.

Rates are steady ones, from the rows' ``created`` stamps (first to last insert), so the
worker's start-up is not counted; the wall time of each drain is printed beside them.
Prints a table and one ``RESULT {json}`` line. Uses the testproject settings (the
``bench`` app added) under a private Redis key prefix; deletes only its own keys.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

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


def worker(url: str, timeout: float) -> float:
    """Run one ``zqueue_worker --burst`` on ``url``; returns its wall time."""
    env = {
        **os.environ,
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


def direct(label: str, n: int) -> tuple[int, float, float]:
    from testproject.demo.models import Article

    t0 = time.perf_counter()
    for i in range(n):
        Article.objects.create(title=f"{label} {i}")
    wall = time.perf_counter() - t0
    return (*steady_rate(label), wall)


def drain(label: str, n: int, url: str, timeout: float) -> tuple[int, float, float]:
    from bench import tasks
    from django_zqueue import get_queue

    q = get_queue("default")
    for i in range(0, n, 1000):
        tasks.orm_insert.enqueue_many([(label, j) for j in range(i, min(n, i + 1000))])
    wall = worker(url, timeout)
    acked = q.stats().get("acked", 0)
    if q.total_count() or q.counts().get("dead"):
        raise SystemExit(f"{label}: jobs left or dead: {q.counts()}")
    q.clear()
    rows, rate = steady_rate(label)
    if rows != n:
        raise SystemExit(f"{label}: {rows} rows for {n} jobs ({acked} acked)")
    return rows, rate, wall


def run(n: int, url: str, vendor: str, timeout: float) -> dict[str, Any]:
    os.environ["DATABASE_URL"] = url
    os.environ["ZQUEUE_PREFIX"] = PREFIX
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.django_settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    sep = "&" if "?" in url else "?"
    rows: dict[str, tuple[int, float, float]] = {}
    rows["direct loop (1)"] = direct("direct1", n)
    rows["worker, Django defaults (CONN_MAX_AGE=0)"] = drain("dflt", n, url, timeout)
    rows["worker, CONN_MAX_AGE=600"] = drain("age600", n, f"{url}{sep}conn_max_age=600", timeout)
    rows["direct loop (2)"] = direct("direct2", n)
    ceiling = max(rows["direct loop (1)"][1], rows["direct loop (2)"][1])
    out = {
        "bench": "orm",
        "database": vendor,
        "n": n,
        "ceiling_per_s": round(ceiling, 1),
        "rows": [
            {
                "name": name,
                "rows": r[0],
                "per_s": round(r[1], 1),
                "ratio_to_direct": round(r[1] / ceiling, 3) if ceiling else None,
                "wall_s": round(r[2], 3),
            }
            for name, r in rows.items()
        ],
    }
    from django.db import connections

    connections.close_all()
    return out


def report(out: dict[str, Any]) -> str:
    head = f"ORM INSERT jobs, {out['n']} each, {out['database']} (one worker process, 1 thread)"
    lines = [head, f"{'':44}{'jobs/s':>9}  {'x direct':>8}  {'wall s':>7}"]
    for r in out["rows"]:
        lines.append(
            f"{r['name']:44}{r['per_s']:>9,.0f}  {r['ratio_to_direct']:>8.2f}  {r['wall_s']:>7.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5000, help="jobs (and direct inserts) per row")
    ap.add_argument("--db", choices=["auto", "postgres", "sqlite"], default="auto")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per worker run")
    args = ap.parse_args()
    if not 1 < args.n <= 200_000:
        ap.error("--n must be in 2..200000")
    with tempfile.TemporaryDirectory() as tmp:
        vendor, url, dropped = setup_database(args.db, tmp)
        try:
            out = run(args.n, url, vendor, args.timeout)
        finally:
            _cleanup(dropped)
    print(report(out))
    print("RESULT " + json.dumps(out))


def _cleanup(database: str | None) -> None:
    import redis

    from django_zqueue.connection import get_client

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
