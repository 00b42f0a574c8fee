"""django_zqueue's performance figures, optionally side by side with peer queues.

    python -m bench                      # private redis-server on a free port, stopped at the end
    python -m bench --redis-url URL      # a given Redis: only keys under a fresh prefix are used
    python -m bench --peers              # also the shared harness (../shared/bench) with the
                                         # peers and bench/peers/zqueue, on the same server
    python -m bench --compare REV        # this checkout and git revision REV, interleaved
                                         # pair by pair: the ratios (bench/compare.py)

Measures, for django_zqueue: enqueue jobs/s (one call per job; enqueue_many by 1000),
no-op jobs/s draining N jobs with 1 and 2 worker processes (several variants),
enqueue->start latency with an idle worker, rank/score/exists latency with --big jobs
queued, Redis memory per queued job, the Redis ceiling from one redis-py connection
(and redis-benchmark if installed), and the longest single script call the server saw.
Prints one table; writes bench/results/latest.json and latest.md (see docs/performance.md).
Every loop is bounded; only this run's keys are touched (UNLINK by prefix at the end).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def log(*a: Any) -> None:
    print("[bench]", *a, file=sys.stderr, flush=True)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis-url", help="use this Redis (default: start a private redis-server)")
    ap.add_argument("--n", type=int, default=20000, help="jobs per enqueue/drain (20000)")
    ap.add_argument("--big", type=int, default=1_000_000, help="jobs queued for rank/score (1M)")
    ap.add_argument("--timeout", type=float, default=90.0, help="time box per drain, s (90)")
    ap.add_argument("--latency-count", type=int, default=200)
    ap.add_argument("--skip", default="", help="comma list: ceiling,enqueue,process,latency,big")
    ap.add_argument("--peers", action="store_true", help="also run the shared harness")
    ap.add_argument("--peer-list", default="", help="harness peers to run (default: all)")
    ap.add_argument("--harness", type=Path, default=None, help="shared harness folder")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results folder (bench/results)")
    ap.add_argument(
        "--compare",
        metavar="REV",
        help="quick figures of this checkout and of git revision REV, interleaved; prints ratios",
    )
    ap.add_argument("--pairs", type=int, default=5, help="--compare: runs of each (5)")
    return ap.parse_args()


# ------------------------------------------------------------------------ context


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory": mem,
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def versions() -> dict[str, Any]:
    import django
    import redis

    import django_zqueue

    try:
        import hiredis

        hv = hiredis.__version__
    except ImportError:
        hv = None
    git = {}
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "django_zqueue"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        git = {"head": head, "django_zqueue_dirty": bool(dirty)}
    except OSError:
        pass
    return {
        "django_zqueue": django_zqueue.__version__,
        "django": django.get_version(),
        "redis_py": redis.__version__,
        "hiredis": hv,
        "python": platform.python_version(),
        "git": git,
    }


# ------------------------------------------------------------------------ running

PROCESS_VARIANTS: list[tuple[str, list[list[str]], str | None]] = [
    ("x1", [[]], "1w"),
    ("x1-prefetch20", [["--prefetch", "20"]], None),
    ("x2", [[], []], "2w"),
    ("x2-prefetch20", [["--prefetch", "20"], ["--prefetch", "20"]], None),
]


def run_self(
    args: argparse.Namespace,
    url: str,
    own_server: bool,
    out: dict[str, Any],
    redis_pid: int | None = None,
) -> None:
    """django_zqueue's own figures on ``url`` (Django configured for it by main())."""
    import redis

    from django_zqueue.engine import scripts

    from . import _redis, _zqueue

    skip = set(filter(None, args.skip.split(",")))
    client = redis.Redis.from_url(url)
    prefix = os.environ["ZQUEUE_PREFIX"]
    out["redis_server"] = _redis.server_info(client)
    bench = _zqueue.Bench(client, prefix, args.out / "logs", redis_pid=redis_pid)
    load = out.setdefault("loadavg", {})
    load["start"] = _redis.loadavg()
    try:
        sources = {name: scripts.source(name) for name in scripts.SCRIPT_NAMES}
        slowlog = _redis.Slowlog(client, own_server, sources, client_name=prefix)
        if "ceiling" not in skip:
            log("ceiling: one redis-py connection")
            out["ceiling_py"] = _redis.py_ceiling(client, prefix, args.n)
            if not args.peers or not own_server:  # the harness runs it on this server
                log("ceiling: redis-benchmark")
                out["ceiling_redis_benchmark"] = _redis.redis_benchmark(url, prefix)
        if "enqueue" not in skip:
            log(f"enqueue: {args.n} single, {args.n} bulk")
            out["enqueue"] = bench.enqueue(args.n)
        if "process" not in skip:
            out["process"] = []
            for name, cmds, headline in PROCESS_VARIANTS:
                log(f"process: {name}")
                res = bench.process(name, cmds, args.n, args.timeout)
                res["headline"] = headline
                out["process"].append(res)
                log(f"   {res.get('rate_steady') or 0:,.0f} jobs/s steady")
        if "latency" not in skip:
            log(f"latency: {args.latency_count} jobs 20 ms apart")
            out["latency"] = bench.latency(args.latency_count)
        if "big" not in skip:
            log(f"big: {args.big:,} jobs queued")
            out["big"] = bench.big(args.big, slowlog)
        load["after own figures"] = _redis.loadavg()
        out["script_calls"] = slowlog.summary()
    finally:
        bench.reset()
        n = _redis.unlink_prefix(client, f"*{prefix}*")
        if n:
            log(f"removed {n} leftover keys under {prefix}")


def main() -> int:
    args = parse_args()
    if args.compare:
        from . import compare

        return compare.main(args.compare, args.pairs, args.n, args.latency_count)
    # SIGTERM (e.g. from `timeout`) becomes SystemExit, so workers and the server are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "logs").mkdir(exist_ok=True)
    from . import _redis

    t0 = time.monotonic()
    server = None
    url = args.redis_url
    own_server = url is None
    if url is None:
        server = _redis.start_private(log_path=str(args.out / "logs" / "redis-server.log"))
        url = server.url
        log(f"started a private redis-server on port {server.port} (pid {server.proc.pid})")
    prefix = f"zqbench-{uuid.uuid4().hex[:8]}"
    os.environ["ZQUEUE_REDIS_URL"] = url
    os.environ["ZQUEUE_PREFIX"] = prefix
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.django_settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()

    out: dict[str, Any] = {
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "redis_url": url if own_server else "(given)",
        "private_server": own_server,
        "prefix": prefix,
        "n": args.n,
        "big_n": args.big,
        "machine": machine(),
        "versions": versions(),
        "settings": {
            "worker": "testproject/manage.py zqueue_worker (default queues: default, emails, "
            "reports), -v 1 (an INFO line per job) unless stated",
            "job": "zqbench.noop(t): INCR (t=0) or RPUSH+INCR in one round trip",
            "timeout_per_drain_s": args.timeout,
        },
    }
    try:
        run_self(args, url, own_server, out, server.proc.pid if server else None)
        if args.peers:
            run_peers(args, server, out)
    finally:
        if server is not None:
            server.stop()
            log(f"stopped the private redis-server (port {server.port})")
    out["wall_s"] = time.monotonic() - t0
    from . import _report

    table, md = _report.render(out)
    print(table)
    (args.out / "latest.json").write_text(json.dumps(out, indent=2, default=str) + "\n")
    (args.out / "latest.md").write_text(md)
    log(f"wrote {args.out / 'latest.json'} and {args.out / 'latest.md'} ({out['wall_s']:.0f}s)")
    return 0


def run_peers(args: argparse.Namespace, server: Any, out: dict[str, Any]) -> None:
    from . import _harness, _redis

    src = args.harness or _harness.DEFAULT_HARNESS
    harness = _harness.prepare_harness(src.resolve())
    peers = [p for p in args.peer_list.replace(",", " ").split() if p] or None
    if peers and "zqueue" not in peers:
        peers.append("zqueue")
    _harness.ensure_bench_venv()
    _harness.ensure_peer_venvs(harness, peers)
    # same server as our own figures when it is ours; else the harness starts its own
    port = server.port if server is not None else _redis.free_port()
    run = _harness.run_harness(
        harness, port, peers, args.out / "logs" / "harness.log", {"N": str(args.n)}
    )
    out.setdefault("loadavg", {})["after harness"] = _redis.loadavg()
    res = _harness.read_results(run)
    res["harness_dir"] = str(harness)
    res["same_server"] = server is not None
    res["results_md"] = str(harness / "RESULTS.md")
    log("memory per job of every peer (their snapshots, RESTOREd into an empty server)")
    res["memory"] = _harness.snapshot_memory(
        harness / "state", args.n, args.out / "logs" / "redis-memory.log"
    )
    out["peers"] = res


if __name__ == "__main__":
    sys.exit(main())
