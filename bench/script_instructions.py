"""Redis CPU per job of the hot scripts, as instructions (callgrind: deterministic).

    python -m bench.script_instructions [--n 2000] [--batch 17] [--keep 10000]
        [--single] [--tree PATH] [--timeout 600]

Starts a private ``redis-server`` under ``valgrind --tool=callgrind`` (instrumentation
zeroed after a warm-up) and, from a client process in ``--tree`` (default: this
checkout; a git worktree of another commit compares the two, its client API and its
scripts), under the bench's Django settings (``bench.django_settings``, queue ``default``
with ``keep_finished = --keep``):

1. publishes ``--n`` no-op jobs of the task layer with ``enqueue_many`` (1,000 per call;
   with ``--single``, ``enqueue``: one call per job);
2. claims them all, ``--batch`` per call (a worker's claim);
3. acks them, ``--batch`` per ``ack_many`` call (a worker's flush).

After each phase (and each publish call) it dumps the server's counters
(``callgrind_control -d``) and prints the instructions the server executed in it, in all
and per job (the first publish call fills an empty queue, whose hashes are listpacks for
their first 512 small entries: it is printed apart from the others): the scripts' Lua, the
commands they call, and reading the calls and writing the replies. ``--batch 1`` gives a
single job's calls (the latency path). Instruction counts repeat within about 1 % from
run to run, whatever else the host is doing, where times on a shared host move by much
more: this is the figure to compare two commits by. A server under callgrind runs about
50 times slower: keep ``--n`` small.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._redis import free_port, server_args

ROOT = Path(__file__).resolve().parent.parent

#: the client's side, run in the tree measured (its own package and API)
CLIENT = r"""
import os, subprocess, sys
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.django_settings")
import django
django.setup()
from django_zqueue import get_queue
from bench.tasks import noop

n, batch, single = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
q = get_queue("default")
calls = getattr(q, "engine", q)  # the engine's calls, or a release's Queue before it


def dump():
    subprocess.run(["callgrind_control", "-d"], check=True, stdout=subprocess.DEVNULL)


def fill(count, each=None):
    for i in range(0, count, 1000):
        if single:
            for _ in range(min(1000, count - i)):
                noop.enqueue(0.0)
        else:
            noop.enqueue_many([(0.0,)] * min(1000, count - i))
        if each:
            each()


def ack(msgs):
    b = calls.batch()
    calls.add_acks(b, [calls.make_ack(m, run_ms=0) for m in msgs])
    calls.send(b)


fill(200)  # warm-up: the library loaded, the keys made
while True:
    msgs, _ = q.claim(batch, "bench-warm")
    if not msgs:
        break
    ack(msgs)
subprocess.run(["callgrind_control", "-z"], check=True, stdout=subprocess.DEVNULL)
fill(n, dump)  # a dump after each call of 1,000
held = []
while True:
    msgs, _ = q.claim(batch, "bench-worker")
    if not msgs:
        break
    held.append(msgs)
dump()
assert sum(len(m) for m in held) == n, "not every job was claimed"
for msgs in held:
    ack(msgs)
dump()
"""

PHASES = ("publish", "claim", "ack (ack_many)")


def totals(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.script_instructions")
    ap.add_argument("--n", type=int, default=2000, help="jobs (2000)")
    ap.add_argument("--batch", type=int, default=17, help="jobs per claim and per ack (17)")
    ap.add_argument("--keep", type=int, default=10000, help="keep_finished (10000; 0: none)")
    ap.add_argument("--single", action="store_true", help="publish with enqueue, one call per job")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose client runs")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run (600)")
    args = ap.parse_args()
    if not 1 <= args.batch <= 100 or args.n < 1:
        ap.error("--batch must be 1..100 and --n at least 1")
    for tool in ("valgrind", "callgrind_control", "redis-server"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (apt-get install valgrind redis-server)")
            return 2
    port = free_port()
    out = Path(tempfile.mkdtemp(prefix="zq-script-instr-"))
    callgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/redis.out"]
    server = subprocess.Popen(
        [*callgrind, "redis-server", *server_args(port, str(out))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("redis-server under valgrind did not start") from None
                time.sleep(0.2)
        env = {
            **os.environ,
            "ZQUEUE_REDIS_URL": f"redis://127.0.0.1:{port}/0",
            "ZQUEUE_PREFIX": f"zqinstr{os.getpid()}",
            "ZQUEUE_BENCH_KEEP_FINISHED": str(args.keep),
            "PYTHONPATH": str(args.tree),
        }
        subprocess.run(
            [sys.executable, "-c", CLIENT, str(args.n), str(args.batch), str(int(args.single))],
            cwd=args.tree,
            env=env,
            check=True,
            timeout=args.timeout,
        )
        dumps = sorted(out.glob("redis.out.*"), key=lambda p: int(p.suffix[1:]))
        calls = -(-args.n // 1000)  # publish calls: one dump each
        if len(dumps) != calls + 2:
            raise RuntimeError(f"expected {calls + 2} dumps in {out}, found {len(dumps)}")
        print(f"tree {args.tree}: {args.n} jobs, {args.batch} per claim and ack, ", end="")
        print(f"keep_finished {args.keep}")
        print("| phase | instructions | per job |")
        print("|---|---:|---:|")
        publish = [totals(p) for p in dumps[:calls]]
        rows = [
            (f"{PHASES[0]} ({'enqueue' if args.single else 'enqueue_many'})", sum(publish), args.n)
        ]
        if calls > 1:  # the first call fills an empty queue (see docs/performance.md)
            for i, total in enumerate(publish):
                jobs = min(1000, args.n - 1000 * i)
                rows.append((f"publish call {i + 1} ({jobs:,} jobs)", total, jobs))
        rows += [(name, totals(p), args.n) for name, p in zip(PHASES[1:], dumps[-2:], strict=True)]
        for name, total, jobs in rows:
            print(f"| {name} | {total:,} | {total // jobs:,} |")
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
