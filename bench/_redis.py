"""Redis side of ``python -m bench``: a private server, the ceiling, memory, SLOWLOG.

Everything here talks only to the Redis it is given (a private server on 127.0.0.1 unless
``--redis-url`` says otherwise) and touches only keys under the run's prefix.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import redis

from django_zqueue.engine.redis.embedded import free_port

#: the ceiling's script: one ZADD, as in the shared harness (ceiling/py_ceiling.py)
ZADD_LUA = "redis.call('zadd',KEYS[1],ARGV[1],ARGV[2]) return 1"
#: the same one-ZADD script as a function (the ceiling of an FCALL on this connection)
ZADD_LIBRARY = (
    "#!lua name=zqbench_ceiling\n"
    "redis.register_function('zqbench_zadd', function(keys, args) "
    "redis.call('zadd', keys[1], args[1], args[2]) return 1 end)"
)


def load_zadd_function(client: redis.Redis) -> None:
    """Load :data:`ZADD_LIBRARY` (kept if already there)."""
    try:
        client.function_load(ZADD_LIBRARY)
    except redis.ResponseError as exc:
        if "already exists" not in str(exc):
            raise


@dataclass
class PrivateRedis:
    """A redis-server on 127.0.0.1:<port>, no persistence, stopped by :meth:`stop`."""

    port: int
    proc: subprocess.Popen[bytes]
    workdir: str

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                redis.Redis(port=self.port, socket_timeout=5).shutdown(nosave=True)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
        shutil.rmtree(self.workdir, ignore_errors=True)


def server_args(port: int, workdir: str) -> list[str]:
    """The arguments of a private ``redis-server``: loopback, no persistence, in front."""
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    return [*args, "--dir", workdir, "--daemonize", "no"]


def start_private(port: int | None = None, log_path: str | None = None) -> PrivateRedis:
    """Start ``redis-server`` (from PATH) on a free port with ``--save '' --appendonly no``."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on PATH: install it or pass --redis-url")
    port = port or free_port()
    workdir = tempfile.mkdtemp(prefix="zqbench-redis-")
    log = open(log_path or os.devnull, "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [binary, *server_args(port, workdir)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    log.close()
    server = PrivateRedis(port, proc, workdir)
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return server
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                server.stop()
                raise SystemExit(f"redis-server did not start on port {port}") from None
            time.sleep(0.05)


def server_info(client: redis.Redis) -> dict[str, Any]:
    info = client.info("server")
    out = {k: info.get(k) for k in ("redis_version", "redis_mode", "os", "process_id", "tcp_port")}
    with contextlib.suppress(redis.ResponseError):
        for key in ("save", "appendonly", "maxmemory-policy"):
            out[key] = client.config_get(key).get(key)
    return out


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def steady_memory(client: redis.Redis, timeout: float = 5.0, step: float = 0.25) -> int:
    """used_memory once it stops moving (two readings ``step`` s apart within 4 KiB, or
    ``timeout`` s): right after a RESTORE of a big key the server still holds about the
    size of its payload for a moment (a 1 MB hash: about 1 MB more for a few hundred ms),
    which is no part of what the restored data keeps."""
    last = used_memory(client)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(step)
        now = used_memory(client)
        if abs(now - last) < 4096:
            return now
        last = now
    return last


def settled_memory(client: redis.Redis, timeout: float = 30.0) -> int:
    """used_memory once background (UNLINK) frees are done: a delta taken while a big
    key is still being freed would be too small."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = client.info("memory")
        if int(info.get("lazyfree_pending_objects", 0)) == 0:
            break
        time.sleep(0.05)
    time.sleep(0.1)
    return used_memory(client)


def seq_evalsha_rate(client: redis.Redis, key: str, n: int = 5000) -> float:
    """Sequential EVALSHA (one ZADD) per second on this connection, right now."""
    script = client.register_script(ZADD_LUA)
    script(keys=[key], args=[0, "warm"])
    t0 = time.perf_counter()
    for i in range(n):
        script(keys=[key], args=[i, i])
    rate = n / (time.perf_counter() - t0)
    client.delete(key)
    return rate


def seq_fcall_rate(client: redis.Redis, key: str, n: int = 5000) -> float:
    """Sequential FCALL (one ZADD) per second on this connection, right now."""
    load_zadd_function(client)
    client.execute_command("FCALL", "zqbench_zadd", 1, key, 0, "warm")
    t0 = time.perf_counter()
    for i in range(n):
        client.execute_command("FCALL", "zqbench_zadd", 1, key, i, i)
    rate = n / (time.perf_counter() - t0)
    client.delete(key)
    return rate


def commandstats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    """command -> (calls, usec) from INFO commandstats."""
    return {
        k[8:]: (int(v.get("calls", 0)), int(v.get("usec", 0)))
        for k, v in client.info("commandstats").items()
    }


def usec_per_call(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], cmd: str
) -> float | None:
    c0, u0 = before.get(cmd, (0, 0))
    c1, u1 = after.get(cmd, (0, 0))
    return (u1 - u0) / (c1 - c0) if c1 > c0 else None


#: the commands a script call is counted under in INFO commandstats (FCALL_RO: the
#: read-only functions; EVALSHA: a server without Functions)
SCRIPT_COMMANDS = ("fcall", "fcall_ro", "evalsha")


def script_usec(stats: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """Calls and µs of Redis time of the script calls in ``commandstats``' reply (the
    commands the scripts run inside are counted in the script's time, and apart)."""
    got = [stats.get(cmd, (0, 0)) for cmd in SCRIPT_COMMANDS]
    return sum(c for c, _ in got), sum(u for _, u in got)


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return ""


def unlink_prefix(client: redis.Redis, pattern: str) -> int:
    """UNLINK every key matching ``pattern`` (SCAN, in batches; lazy free, no long block)."""
    n = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=pattern, count=2000):
        batch.append(key)
        if len(batch) >= 1000:
            n += int(client.unlink(*batch))
            batch.clear()
    if batch:
        n += int(client.unlink(*batch))
    return n


# ------------------------------------------------------------------------- ceiling


def _timed(n: int, fn: Callable[[int], None]) -> float:
    t0 = time.perf_counter()
    fn(n)
    return n / (time.perf_counter() - t0)


def py_ceiling(client: redis.Redis, prefix: str, n: int) -> dict[str, float]:
    """What one Python process gets through one redis-py connection (ops/s)."""
    k = f"{{{prefix}}}:ceil"
    zkey, lkey, ckey = f"{k}:z", f"{k}:l", f"{k}:c"
    payload = b"x" * 200
    script = client.register_script(ZADD_LUA)
    script(keys=[zkey], args=[0, "warm"])
    out: dict[str, float] = {}

    def seq_ping(m: int) -> None:
        for _ in range(m):
            client.ping()

    def seq_incr(m: int) -> None:
        for _ in range(m):
            client.incr(ckey)

    def seq_evalsha(m: int) -> None:
        for i in range(m):
            script(keys=[zkey], args=[i, i])

    def seq_fcall(m: int) -> None:
        for i in range(m):
            client.execute_command("FCALL", "zqbench_zadd", 1, zkey, i, i)

    def pipe_evalsha(batch: int) -> Callable[[int], None]:
        def run(m: int) -> None:
            p = client.pipeline(transaction=False)
            for i in range(m):
                script(keys=[zkey], args=[i, i], client=p)
                if (i + 1) % batch == 0:
                    p.execute()
            p.execute()

        return run

    def pipe_lpush(m: int) -> None:
        p = client.pipeline(transaction=False)
        for i in range(m):
            p.lpush(lkey, payload)
            if (i + 1) % 1000 == 0:
                p.execute()
        p.execute()

    try:
        out["seq PING"] = _timed(n, seq_ping)
        out["seq INCR"] = _timed(n, seq_incr)
        client.delete(zkey)
        out["seq EVALSHA zadd"] = _timed(n, seq_evalsha)
        client.delete(zkey)
        load_zadd_function(client)
        out["seq FCALL zadd"] = _timed(n, seq_fcall)
        client.delete(zkey)
        out["pipeline EVALSHA zadd batch=100"] = _timed(5 * n, pipe_evalsha(100))
        client.delete(zkey)
        out["pipeline EVALSHA zadd batch=1000"] = _timed(5 * n, pipe_evalsha(1000))
        out["pipeline LPUSH 200B batch=1000"] = _timed(5 * n, pipe_lpush)
    finally:
        client.delete(zkey, lkey, ckey)
    return out


def redis_benchmark(url: str, prefix: str, db: int = 0) -> list[dict[str, Any]]:
    """redis-benchmark (the C client), if installed, on keys under ``prefix``."""
    binary = shutil.which("redis-benchmark")
    if binary is None:
        return []
    u = urlsplit(url)
    base = [binary, "-h", u.hostname or "127.0.0.1", "-p", str(u.port or 6379)]
    if u.password:
        base += ["-a", u.password]
        if u.username:
            base += ["--user", u.username]
    base += ["--dbnum", str(db), "--csv", "-r", "100000"]
    zkey, lkey = f"{{{prefix}}}:rb:z", f"{{{prefix}}}:rb:l"
    cases = [
        ("EVAL zadd", ["eval", ZADD_LUA, "1", zkey, "__rand_int__", "__rand_int__"]),
        ("LPUSH", ["lpush", lkey, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]),
    ]
    out = []
    for pipeline, clients in ((1, 1), (1, 50), (16, 1)):
        n = 30000 if (pipeline, clients) == (1, 1) else 200000
        for name, cmd in cases:
            args = [*base, "-n", str(n), "-c", str(clients), "-P", str(pipeline), *cmd]
            try:
                res = subprocess.run(args, capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                continue
            for row in csv.reader(io.StringIO(res.stdout)):
                if len(row) >= 8 and row[0] != "test":
                    out.append(
                        {
                            "test": name,
                            "pipeline": pipeline,
                            "clients": clients,
                            "rps": float(row[1]),
                            "p50_ms": float(row[4]),
                            "p99_ms": float(row[6]),
                        }
                    )
    with contextlib.suppress(Exception):
        u_db = redis.Redis.from_url(url)
        u_db.delete(zkey, lkey)
    return out


# ------------------------------------------------------------ script-call durations


class Slowlog:
    """Longest single script calls, from SLOWLOG, mapped back to script names.

    On our own server every command over ``threshold_us`` is logged (and the log is
    read and reset now and then, so nothing is pushed out); :meth:`window` logs every
    command for a moment to time single calls server-side. Note that with a threshold of
    0 Redis also logs the commands a script runs; only EVALSHA/EVAL entries are counted.
    On someone else's server nothing is changed: only what its own settings log is read.
    """

    def __init__(
        self,
        client: redis.Redis,
        own_server: bool,
        sources: dict[str, str],
        threshold_us: int = 1000,
        client_name: str | None = None,
    ) -> None:
        self.client = client
        self.own = own_server
        self.client_name = client_name  # on a shared server: count only these clients
        self.threshold_us = threshold_us
        self.by_sha = {hashlib.sha1(src.encode()).hexdigest(): n for n, src in sources.items()}
        self.per_script: dict[str, dict[str, Any]] = {}
        self.other_max = 0.0
        self.last_id = -1
        self.since = time.time()
        if own_server:
            client.config_set("slowlog-log-slower-than", threshold_us)
            client.config_set("slowlog-max-len", 100000)
            client.slowlog_reset()
        else:
            last = client.slowlog_get(1)
            self.last_id = last[0]["id"] if last else -1

    @staticmethod
    def function_script(function: str) -> str | None:
        """The script a function of the scripts' library runs (``zq_<hash>_<script>``)."""
        named = re.fullmatch(r"zq_[0-9a-f]{12}_(\w+)", function)
        return named.group(1) if named else None

    def _name(self, cmd: Any) -> str | None:
        parts = cmd.split()[:2] if isinstance(cmd, bytes | str) else list(cmd)[:2]
        words = [p.decode() if isinstance(p, bytes) else str(p) for p in parts]
        if len(words) == 2 and words[0].lower() in ("evalsha", "evalsha_ro"):
            return self.by_sha.get(words[1].lower(), "(not django_zqueue)")
        if len(words) == 2 and words[0].lower() in ("fcall", "fcall_ro"):
            return self.function_script(words[1]) or "(not django_zqueue)"
        if words and words[0].lower() in ("eval", "eval_ro"):
            return "(not django_zqueue)"
        return None

    def harvest(self, top_level_only: bool = False) -> list[tuple[str, float]]:
        """Read new entries into the totals; returns [(script, ms)] of script calls."""
        got = []
        for e in self.client.slowlog_get(-1 if self.own else 10000):
            if e["id"] <= self.last_id or e["start_time"] < self.since - 1:
                continue
            if not self.own and self.client_name:
                name = e.get("client_name") or b""
                if (name.decode() if isinstance(name, bytes) else name) != self.client_name:
                    continue
            name = self._name(e["command"])
            ms = e["duration"] / 1000
            if name is None:
                if not top_level_only:
                    self.other_max = max(self.other_max, ms)
                continue
            got.append((name, ms))
            s = self.per_script.setdefault(
                name, {"count_logged": 0, "max_ms": 0.0, "over_5ms": 0, "top_ms": []}
            )
            s["count_logged"] += 1
            s["max_ms"] = max(s["max_ms"], ms)
            if ms > 5.0:
                s["over_5ms"] += 1
            s["top_ms"] = sorted([*s["top_ms"], ms], reverse=True)[:5]
        if self.own:
            self.client.slowlog_reset()
        else:
            last = self.client.slowlog_get(1)
            self.last_id = last[0]["id"] if last else self.last_id
        return got

    def window(self, fn: Callable[[], Any]) -> tuple[Any, float, float | None]:
        """Run ``fn``; returns (its result, client ms, longest script call in it, server ms;
        None unless on our own server)."""
        if not self.own:
            t = time.perf_counter()
            r = fn()
            return r, (time.perf_counter() - t) * 1000, None
        self.harvest()
        self.client.config_set("slowlog-log-slower-than", 0)
        try:
            t = time.perf_counter()
            r = fn()
            client_ms = (time.perf_counter() - t) * 1000
        finally:
            self.client.config_set("slowlog-log-slower-than", self.threshold_us)
        # commands that scripts ran are logged too at 0 us: they do not count as "other"
        calls = self.harvest(top_level_only=True)
        return r, client_ms, max((ms for _, ms in calls), default=None)

    def summary(self) -> dict[str, Any]:
        self.harvest()
        threshold = None
        with contextlib.suppress(redis.ResponseError):
            raw = self.client.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
            threshold = int(raw)
        stats = self.client.info("commandstats")
        cmdstats = {
            k: {"calls": v.get("calls"), "usec_per_call": v.get("usec_per_call")}
            for k, v in stats.items()
            if k
            in (
                "cmdstat_evalsha",
                "cmdstat_eval",
                "cmdstat_fcall",
                "cmdstat_fcall_ro",
                "cmdstat_zrank",
                "cmdstat_zscore",
            )
        }
        return {
            "slowlog_threshold_us": threshold,
            "slowlog_set_by_bench": self.own,
            "per_script": self.per_script,
            "max_script_ms": max(
                (s["max_ms"] for n, s in self.per_script.items() if n != "(not django_zqueue)"),
                default=0.0,
            ),
            "max_other_command_ms": self.other_max,
            "commandstats": cmdstats,
        }
