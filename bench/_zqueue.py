"""django_zqueue's own figures for ``python -m bench`` (Django must be set up first).

The job is ``zqbench.noop(t)`` (bench/tasks.py): the shared harness's job body on keys
under this run's prefix. Workers are ``testproject/manage.py zqueue_worker`` processes
with ``DJANGO_SETTINGS_MODULE=bench.django_settings`` and the same ZQUEUE_REDIS_URL /
ZQUEUE_PREFIX as this process; each runs in its own session and is stopped by its pid.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis

from django_zqueue import get_queue
from django_zqueue.conf import get_config

from . import tasks as bench_tasks
from ._redis import Slowlog

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "testproject" / "manage.py"
CHUNK = 1000


def log(*a: Any) -> None:
    print("[bench]", *a, file=sys.stderr, flush=True)


def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def session_cpu(sid: int) -> float:
    """CPU seconds (user + system) of the live processes in session ``sid``."""
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 (session), counted after the ")"
            total += int(fields[11]) + int(fields[12])
    return total / _ticks()


def pid_cpu(pid: int | None) -> float:
    if not pid:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _ticks()


def machine_busy() -> float:
    """CPU seconds all cores spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / _ticks()


def pct(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (the shared harness's definition)."""
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class Bench:
    """The run's queue, counters and worker processes."""

    def __init__(
        self, client: redis.Redis, prefix: str, log_dir: Path, redis_pid: int | None = None
    ) -> None:
        self.client = client
        self.redis_pid = redis_pid
        self.prefix = prefix
        self.log_dir = log_dir
        self.queue = get_queue("default")
        self.done_key, self.lat_key = bench_tasks.counter_keys(prefix)
        self.noop = bench_tasks.noop

    # ------------------------------------------------------------------ plumbing

    def reset(self) -> None:
        """Delete this run's queue keys and counters (every configured queue)."""
        for name in get_config().queues:
            keys = get_queue(name).engine._keys.all()
            self.client.unlink(*keys)
        self.client.unlink(self.done_key, self.lat_key)

    def fill(self, n: int, chunk: int = CHUNK) -> float:
        """Enqueue n no-op jobs with enqueue_many; returns jobs/s."""
        t0 = time.perf_counter()
        for i in range(0, n, chunk):
            self.noop.enqueue_many([(0.0,)] * min(chunk, n - i))
        return n / (time.perf_counter() - t0)

    def spawn(self, cmds: list[list[str]], tag: str) -> list[subprocess.Popen[bytes]]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        )
        procs = []
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for i, args in enumerate(cmds):
            with open(self.log_dir / f"{tag}.{i}.log", "wb") as lf:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, str(MANAGE), "zqueue_worker", *args],
                        cwd=ROOT,
                        env=env,
                        stdout=lf,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
        return procs

    @staticmethod
    def kill(procs: list[subprocess.Popen[bytes]], grace: float = 10.0) -> None:
        """SIGTERM each worker's process group (by its pid), SIGKILL what is left."""
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.monotonic()))
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                log("could not reap worker", p.pid)

    def wait_done(
        self, target: int, timeout: float, procs: list[subprocess.Popen[bytes]], poll: float = 0.005
    ) -> dict[str, Any]:
        """Poll the done counter every ``poll`` s until >= target or ``timeout`` s pass."""
        t0 = time.time()
        t_first = c_first = None
        died = False
        while True:
            now = time.time()
            c = int(self.client.get(self.done_key) or 0)
            if c and t_first is None:
                t_first, c_first = now, c
            if c >= target:
                return {
                    "t_first": t_first,
                    "c_first": c_first,
                    "t_last": now,
                    "c": c,
                    "drained": True,
                }
            if now - t0 > timeout:
                break
            if any(p.poll() is not None for p in procs):
                died = True
                break
            time.sleep(poll)
        return {
            "t_first": t_first,
            "c_first": c_first,
            "t_last": now,
            "c": c,
            "drained": False,
            "died": died,
        }

    # ------------------------------------------------------------------ measurements

    def enqueue(self, n: int) -> dict[str, Any]:
        """Enqueue n jobs one call each, then n with enqueue_many (chunks of 1000); also
        the Redis memory per queued job after the bulk enqueue (used_memory delta / n)."""
        from ._redis import (
            commandstats,
            script_usec,
            seq_evalsha_rate,
            seq_fcall_rate,
            settled_memory,
        )

        # the ceiling of the command our scripts are sent with (FCALL, or EVALSHA)
        functions = self.queue.engine._scripts.library is not None
        seq_rate = seq_fcall_rate if functions else seq_evalsha_rate

        self.reset()
        self.fill(10)  # scripts loaded, connection open
        self.reset()
        ceil_key = f"{{{self.prefix}}}:ceil:paired"
        ceiling_before = seq_rate(self.client, ceil_key)
        calls0, usec0 = script_usec(commandstats(self.client))
        t0 = time.perf_counter()
        for _ in range(n):
            self.noop.enqueue(0.0)
        single = n / (time.perf_counter() - t0)
        calls1, usec1 = script_usec(commandstats(self.client))
        ceiling_after = seq_rate(self.client, ceil_key)
        queued_single = self.queue.total_count()
        self.reset()
        before = settled_memory(self.client)
        bulk = self.fill(n)
        after = settled_memory(self.client)
        queued_bulk = self.queue.total_count()
        sample = self.client.hrandfield(self.queue.engine._keys.body, 1, withvalues=True)
        self.reset()
        return {
            "n": n,
            "single_per_s": single,
            # Redis time of one publish script call (INFO commandstats; Redis's own time,
            # not its reading and writing of the sockets)
            "single_redis_us": (usec1 - usec0) / (calls1 - calls0) if calls1 > calls0 else None,
            "paired_seq_script_per_s": (ceiling_before + ceiling_after) / 2,
            "paired_seq_script_before_after": [ceiling_before, ceiling_after],
            "paired_seq_script_command": "FCALL" if functions else "EVALSHA",
            "bulk_per_s": bulk,
            "queued_after_single": queued_single,
            "queued_after_bulk": queued_bulk,
            "memory_bytes_per_job": (after - before) / n,
            "body_sample": sample[1].decode() if sample else None,
        }

    def process(self, name: str, cmds: list[list[str]], n: int, timeout: float) -> dict[str, Any]:
        """Queue n jobs, start the worker process(es), time until all n are done."""
        self.reset()
        self.fill(n)
        assert self.queue.total_count() == n
        from ._redis import commandstats, script_usec

        t_start = time.time()
        m0, r0, s0 = machine_busy(), pid_cpu(self.redis_pid), sum(os.times()[:2])
        _, usec0 = script_usec(commandstats(self.client))
        procs = self.spawn(cmds, f"process-{name}")
        cpu: dict[str, float] = {}
        try:
            w = self.wait_done(n, timeout, procs)
            el = max(time.time() - t_start, 1e-6)
            workers = sum(session_cpu(p.pid) for p in procs)
            cpu = {
                "workers": workers / el,
                "redis_server": (pid_cpu(self.redis_pid) - r0) / el if self.redis_pid else None,
                "bench_poller": (sum(os.times()[:2]) - s0) / el,
                "machine": (machine_busy() - m0) / el,
            }
            known = workers / el + (cpu["redis_server"] or 0) + cpu["bench_poller"]
            cpu["everything_else"] = cpu["machine"] - known
        finally:
            self.kill(procs)
        _, usec1 = script_usec(commandstats(self.client))
        res: dict[str, Any] = {
            "variant": name,
            "processes": sum(
                int(c[c.index("--processes") + 1]) if "--processes" in c else 1 for c in cmds
            ),
            "cmd": [" ".join(["zqueue_worker", *c]) for c in cmds],
            "n": n,
            "done": w["c"],
            "drained": w["drained"],
            "cpu_cores": cpu,
            # Redis time of the worker's script calls per job done (claims, acks, its
            # heartbeats and scans; INFO commandstats)
            "scripts_redis_us_per_job": (usec1 - usec0) / w["c"] if w["c"] else None,
        }
        el = w["t_last"] - t_start
        if w["t_first"] is None or w["c"] - (w["c_first"] or 0) < 10:
            res.update(ok=False, rate=w["c"] / el, error="no progress or worker died")
        else:
            res.update(
                ok=True,
                seconds=el,
                startup_s=w["t_first"] - t_start,
                rate=w["c"] / el,
                rate_steady=(w["c"] - w["c_first"]) / max(w["t_last"] - w["t_first"], 1e-6),
            )
        self.reset()
        return res

    def latency(
        self,
        count: int = 200,
        spacing: float = 0.02,
        warmup: int = 5,
        worker_args: Sequence[str] = (),
    ) -> dict[str, Any]:
        """One idle worker (defaults); ``count`` jobs on a fixed ``spacing`` schedule; each
        records its start time minus the time taken just before its enqueue call."""
        self.reset()
        procs = self.spawn([list(worker_args)], "latency")
        res: dict[str, Any] = {
            "count": count,
            "spacing_ms": spacing * 1000,
            "cmd": " ".join(["zqueue_worker", *worker_args]),
        }
        try:
            for _ in range(warmup):
                self.noop.enqueue(0.0)
            w = self.wait_done(warmup, 60, procs)
            if not w["drained"]:
                return {**res, "ok": False, "error": "warm-up jobs not done"}
            time.sleep(1.5)  # let the worker go idle (blocked on the notify list)
            start = time.time()
            for i in range(count):
                self.noop.enqueue(time.time())
                d = start + (i + 1) * spacing - time.time()
                if d > 0:
                    time.sleep(d)
            w = self.wait_done(warmup + count, 60, procs)
        finally:
            self.kill(procs)
        lats = [float(x) * 1000 for x in self.client.lrange(self.lat_key, 0, -1)]
        self.reset()
        return {
            **res,
            "ok": w["drained"] and len(lats) == count,
            "got": len(lats),
            "p50_ms": pct(lats, 0.5),
            "p95_ms": pct(lats, 0.95),
            "p99_ms": pct(lats, 0.99),
            "max_ms": max(lats) if lats else None,
        }

    def big(self, n: int, slowlog: Slowlog, lookups: int = 3000) -> dict[str, Any]:
        """n jobs queued: rank/score/exists latency, memory per job, and the time of
        single script calls at that size (publish, claim, ack, scan, info)."""
        import gc

        from ._redis import commandstats, settled_memory, usec_per_call

        self.reset()
        before = settled_memory(self.client)
        t0 = time.perf_counter()
        tags: list[str] = []
        chunk = 10 * CHUNK  # one pipeline of 10 publish script calls (plus a tag check)
        for i in range(0, n, chunk):
            tags.extend(j.id for j in self.noop.enqueue_many([(0.0,)] * min(chunk, n - i)))
        fill_s = time.perf_counter() - t0
        after = settled_memory(self.client)
        q = self.queue
        assert q.total_count() == n
        rng = random.Random(42)
        sample = [tags[rng.randrange(len(tags))] for _ in range(lookups)]
        out: dict[str, Any] = {
            "n": n,
            "fill_s": fill_s,
            "fill_per_s": n / fill_s,
            "memory_bytes_per_job": (after - before) / n,
        }
        ops: dict[str, Callable[[str], Any]] = {
            "rank": q.rank,
            "score": q.score,
            "exists": q.exists,
        }
        # interleaved (rank, score, exists of one tag, then the next tag), so that a
        # stall of the machine hits all three alike; the collector is off while timing
        lat: dict[str, list[float]] = {name: [] for name in ops}
        stats0 = commandstats(self.client)
        gc.collect()
        gc.disable()
        try:
            for tag in sample:
                for name, fn in ops.items():
                    t = time.perf_counter()
                    fn(tag)
                    lat[name].append((time.perf_counter() - t) * 1000)
        finally:
            gc.enable()
        stats1 = commandstats(self.client)
        for name in ops:
            out[f"{name}_p50_ms"] = pct(lat[name], 0.5)
            out[f"{name}_p99_ms"] = pct(lat[name], 0.99)
            out[f"{name}_max_ms"] = max(lat[name])
        out["lookups"] = lookups
        out["server_usec_per_call"] = {
            "zrank (rank)": usec_per_call(stats0, stats1, "zrank"),
            "zscore (score)": usec_per_call(stats0, stats1, "zscore"),
            "state.lua (exists)": usec_per_call(stats0, stats1, "fcall_ro")
            or usec_per_call(stats0, stats1, "evalsha"),
        }
        # rank of the last job is the deepest ZRANK walk
        t = time.perf_counter()
        last_rank = q.rank(tags[-1])
        out["rank_of_last_ms"] = (time.perf_counter() - t) * 1000
        out["rank_of_last"] = last_rank
        calls: dict[str, float] = {}
        server: dict[str, float] = {}

        def timed(label: str, fn: Callable[[], Any]) -> Any:
            r, calls[label], ms = slowlog.window(fn)
            if ms is not None:
                server[label] = ms
            return r

        timed("publish 1 job", lambda: self.noop.enqueue(0.0))
        for size in (10, 100, 1000):
            timed(
                f"publish {size} jobs (one script call)",
                lambda size=size: self.noop.enqueue_many([(0.0,)] * size),
            )
        msgs, _ = timed("claim 1", lambda: q.claim(1, "bench"))
        timed("ack 1", lambda: q.ack_many(msgs))
        msgs, _ = timed("claim 20", lambda: q.claim(20, "bench"))
        timed("ack 20 (pipelined, 20 script calls)", lambda: q.ack_many(msgs))
        msgs, _ = timed("claim 100", lambda: q.claim(100, "bench"))
        timed("ack 100 (pipelined, 100 script calls)", lambda: q.ack_many(msgs))
        msgs, _ = timed("claim 1000 (max batch)", lambda: q.claim(1000, "bench"))
        timed("ack 1000 (pipelined, 1000 script calls)", lambda: q.ack_many(msgs))
        timed("scan (housekeeping step)", q.scan)
        timed("info (one job)", lambda: q.info(tags[n // 2]))
        out["client_call_ms"] = calls
        out["server_call_max_ms"] = server
        t = time.perf_counter()
        self.reset()  # UNLINK: freed in the background, Redis is not blocked
        out["cleanup_s"] = time.perf_counter() - t
        return out
