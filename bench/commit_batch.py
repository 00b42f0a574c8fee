"""What a transaction that enqueues several jobs pays at commit, this checkout beside
another revision (by default the commit this branch started from), in one run.

    python -m bench.commit_batch [--n 2000] [--rounds 5] [--jobs 5] [--base REV]
                                 [--redis-url URL]

A view-like function: ``with transaction.atomic():`` five ``add.enqueue(i, i)`` (``--jobs``),
nothing else; the jobs go to Redis when the block exits. Each run calls it ``--n`` times in
a process of its own and times every call: the whole call, and its commit (the exit of the
``atomic`` block, where the jobs are sent). It also counts the requests redis-py writes
to the server during the commits (a pipeline is one). The code of REV is taken with
``git archive`` (``django_zqueue`` and ``testproject``) into a temporary folder and put
first on the child's path; the two trees run in turn, ``--rounds`` times, alternating
which goes first, on one Redis: a private ``redis-server`` (or ``--redis-url``, under a
key prefix of the run's own, deleted at the end). The database is SQLite on /dev/shm
when there is one (the transaction writes no row: what is timed is the enqueues and the
commit).

Prints, per tree, the medians over the rounds of each run's median and p90 (µs per call
and per commit) and the round trips per commit; the median over the rounds of REV's
figure over this tree's (call and commit medians of the two runs of a round); and one
``RESULT {json}`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def child(n: int, jobs: int) -> dict[str, Any]:
    """One run, in this process: ``n`` view calls; times and round trips."""
    import django

    django.setup()
    from django.db import transaction
    from redis.connection import AbstractConnection

    import django_zqueue
    from django_zqueue import get_queue
    from testproject.demo.tasks import add

    queue = get_queue("default")
    queue.engine._scripts.load_all()
    sent = [0]
    original = AbstractConnection.send_packed_command

    def counting(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        sent[0] += 1
        original(self, command, check_health)

    def view(i: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        with transaction.atomic():
            for k in range(jobs):
                add.enqueue(i, k)
            t1 = time.perf_counter()
            AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
        t2 = time.perf_counter()
        return (t2 - t0) * 1e6, (t2 - t1) * 1e6

    for i in range(min(200, n)):  # warm up: connections, imports, caches
        view(i)
    sent[0] = 0
    calls, commits = [], []
    for i in range(n):
        whole, commit = view(i)
        calls.append(whole)
        commits.append(commit)
    queue.clear()

    def p90(xs: list[float]) -> float:
        return sorted(xs)[int(len(xs) * 0.9)]

    return {
        "code": str(Path(django_zqueue.__file__).parent),
        "call_us": statistics.median(calls),
        "call_p90_us": p90(calls),
        "commit_us": statistics.median(commits),
        "commit_p90_us": p90(commits),
        "round_trips_per_commit": sent[0] / n,
    }


def export(rev: str, into: Path) -> str:
    """``django_zqueue`` and ``testproject`` of ``rev`` in ``into``; its short hash."""
    archive = subprocess.run(
        ["git", "archive", rev, "django_zqueue", "testproject"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    short = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return short.stdout.strip()


def run_tree(tree: Path, env: dict[str, str], n: int, jobs: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.commit_batch", "--child", "--n", str(n)]
    cmd += ["--jobs", str(jobs)]
    env = {**env, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT)])}
    done = subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True, text=True)
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(out["code"]).resolve() != (tree / "django_zqueue").resolve():
        raise SystemExit(f"the child ran {out['code']}, not the code of {tree}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.commit_batch")
    ap.add_argument("--n", type=int, default=2000, help="view calls per run (2000)")
    ap.add_argument("--jobs", type=int, default=5, help="enqueues per transaction (5)")
    ap.add_argument("--rounds", type=int, default=5, help="runs of each tree (5)")
    ap.add_argument("--base", default="", help="the revision to compare (default: merge-base)")
    ap.add_argument("--redis-url", default="", help="a Redis to use (default: a private one)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.n, args.jobs)))
        return 0

    from bench._redis import start_private

    base = (
        args.base
        or subprocess.run(
            ["git", "merge-base", "HEAD", "main"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    server = None if args.redis_url else start_private()
    url = args.redis_url or (server.url if server else "")
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    work = Path(tempfile.mkdtemp(prefix="zq-commit-batch-", dir=shm))
    prefix = f"zqbench-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "ZQUEUE_REDIS_URL": url,
        "ZQUEUE_PREFIX": prefix,
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
        "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
    }
    (work / "base").mkdir()
    trees = {"this": ROOT, export(base, work / "base"): work / "base"}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    try:
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for name in order:
                results[name].append(run_tree(trees[name], env, args.n, args.jobs))
                print(f"[commit_batch] round {r + 1} {name}: {results[name][-1]}", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    summary = {
        name: {
            key: statistics.median(run[key] for run in runs)
            for key in ("call_us", "call_p90_us", "commit_us", "commit_p90_us")
        }
        | {"round_trips_per_commit": statistics.median(r["round_trips_per_commit"] for r in runs)}
        for name, runs in results.items()
    }
    other = next(name for name in results if name != "this")
    ratios = {  # the base's figure over this tree's, round by round (runs made in turn)
        key: statistics.median(
            b[key] / t[key] for b, t in zip(results[other], results["this"], strict=True)
        )
        for key in ("call_us", "commit_us")
    }
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.jobs} enqueues in one transaction.atomic, {args.n} calls x {args.rounds} runs")
    print(f"load average at the end: {load} ({os.cpu_count()} cores)")
    print(f"{'tree':10} {'call µs':>9} {'p90':>9} {'commit µs':>10} {'p90':>9} {'trips':>6}")
    for name, s in summary.items():
        print(
            f"{name:10} {s['call_us']:9.0f} {s['call_p90_us']:9.0f} {s['commit_us']:10.0f} "
            f"{s['commit_p90_us']:9.0f} {s['round_trips_per_commit']:6.2f}"
        )
    print(
        f"{other} / this, median of the rounds: call {ratios['call_us']:.2f}x, "
        f"commit {ratios['commit_us']:.2f}x"
    )
    result = {"jobs": args.jobs, "n": args.n, "base": other, "summary": summary, "load": load}
    print("RESULT " + json.dumps(result | {"ratios": ratios}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
