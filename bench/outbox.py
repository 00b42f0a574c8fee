"""The cost of the transactional outbox per enqueue, beside the plain on-commit path.

    python -m bench.outbox [--n 2000] [--rounds 5] [--db auto|postgres|sqlite]

Each row times N transactions (``transaction.atomic``), one after the other in this
process, each doing one ``Article`` INSERT (the caller's own work) and, but for the
first row, one ``noop.enqueue()``:

- ``INSERT only``: the transaction without an enqueue (the baseline);
- ``+ enqueue, on commit``: ``ZQUEUE["OUTBOX"]`` off: the job is published to Redis by
  an on-commit callback (one round trip after the COMMIT);
- ``+ enqueue, outbox``: ``OUTBOX`` on: the job is one more INSERT in the transaction;
- ``relay``: the relay publishing and deleting those N rows (``outbox.relay()`` steps of
  100-row batches, as a worker's scanner runs them), per row: work done later, off the
  request path.

Rows are measured in turn, ``--rounds`` times over; medians of the rounds are printed, in
microseconds per transaction (per row for the relay), and the extra of each enqueue row
over the baseline of the same round. The database is PostgreSQL when one answers at
``ZQUEUE_BENCH_POSTGRES_URL`` (default ``postgres://postgres@127.0.0.1:5432/test``; a
database of the run's own, dropped at the end), else SQLite (a file, on /dev/shm when
there is one). Redis: ``ZQUEUE_REDIS_URL`` (default redis://127.0.0.1:6379/0) under a
private key prefix; only its keys are deleted. Prints a table and one ``RESULT {json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.orm import PREFIX, _cleanup, setup_database

ROOT = Path(__file__).resolve().parent.parent
BASE = "INSERT only"
ON_COMMIT = "+ enqueue, on commit"
OUTBOX = "+ enqueue, outbox"
RELAY = "relay (later, per row)"


def run(n: int, url: str, vendor: str, rounds: int) -> dict[str, Any]:
    os.environ["DATABASE_URL"] = url
    os.environ["ZQUEUE_PREFIX"] = PREFIX
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.django_settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections, transaction
    from django.test import override_settings

    from django_zqueue import conf, get_queue, outbox
    from testproject.demo.models import Article
    from testproject.demo.tasks import noop

    call_command("migrate", verbosity=0)
    queue = get_queue("default")

    def transactions(enqueue: bool) -> float:
        t0 = time.perf_counter()
        for i in range(n):
            with transaction.atomic():
                Article.objects.create(title=f"outbox {i}")
                if enqueue:
                    noop.enqueue()
        return (time.perf_counter() - t0) * 1e6 / n

    def with_outbox(measure: Callable[[], float]) -> float:
        with override_settings(ZQUEUE={**settings.ZQUEUE, "OUTBOX": True}):
            conf.reset()
            try:
                return measure()
            finally:
                conf.reset()

    def relay() -> float:
        t0 = time.perf_counter()
        for _ in range(n):  # bounded: each step relays up to 1000 rows
            if not outbox.relay().rows:
                break
        return (time.perf_counter() - t0) * 1e6 / n

    times: dict[str, list[float]] = {BASE: [], ON_COMMIT: [], OUTBOX: [], RELAY: []}
    transactions(True)  # warm-up: connections, scripts loaded
    queue.clear()
    Article.objects.all().delete()
    for _ in range(rounds):
        times[BASE].append(transactions(False))
        times[ON_COMMIT].append(transactions(True))
        queue.clear()
        times[OUTBOX].append(with_outbox(lambda: transactions(True)))
        assert queue.total_count() == 0 and outbox.waiting() == n
        times[RELAY].append(with_outbox(relay))
        assert outbox.waiting() == 0 and queue.total_count() == n, "relay left rows"
        queue.clear()
        Article.objects.all().delete()
    base = times[BASE]
    out = {
        "bench": "outbox",
        "database": vendor,
        "n": n,
        "rounds": rounds,
        "rows": [
            {
                "name": name,
                "us": round(statistics.median(values), 1),
                "extra_us": None
                if name in (BASE, RELAY)
                else round(statistics.median(v - b for v, b in zip(values, base, strict=True)), 1),
                "rounds_us": [round(v, 1) for v in values],
            }
            for name, values in times.items()
        ],
    }
    connections.close_all()
    return out


def report(out: dict[str, Any]) -> str:
    lines = [
        f"One INSERT per transaction, {out['n']} transactions per row, {out['database']}, "
        f"medians of {out['rounds']} rounds (microseconds)",
        f"{'':28}{'us/txn':>9}  {'extra':>8}  rounds",
    ]
    for r in out["rows"]:
        extra = f"{r['extra_us']:>8.1f}" if r["extra_us"] is not None else f"{'':>8}"
        each = ", ".join(f"{x:.0f}" for x in r["rounds_us"])
        lines.append(f"{r['name']:28}{r['us']:>9.1f}  {extra}  {each}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="transactions per row")
    ap.add_argument("--db", choices=["auto", "postgres", "sqlite"], default="auto")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (medians)")
    args = ap.parse_args()
    if not 1 < args.n <= 100_000:
        ap.error("--n must be in 2..100000")
    if not 1 <= args.rounds <= 10:
        ap.error("--rounds must be in 1..10")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        vendor, url, dropped = setup_database(args.db, tmp)
        try:
            out = run(args.n, url, vendor, args.rounds)
        finally:
            _cleanup(dropped)
    print(report(out))
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
