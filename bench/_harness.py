"""``python -m bench --peers``: run the shared queue harness (../shared/bench) with this
project's peer folder (bench/peers/zqueue) on PEER_PATH, and read its results.

The harness writes venvs/, logs/, state/, results/ and RESULTS.md into its own folder.
When that folder is not writable (its mode has no write bit, even if root could write
anyway), it is copied to ``.ci/work/bench-harness`` and run there. Peers' virtualenvs
are built by the harness's own ``mkvenvs.sh`` into its ``venvs/``; django_zqueue's venv
(``.ci/work/bench-venv``) is built here. Nothing is added to the project's dependencies.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from ._redis import start_private, steady_memory, used_memory

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HARNESS = ROOT.parent / "shared" / "bench"
WORK_COPY = ROOT / ".ci" / "work" / "bench-harness"
BENCH_VENV = ROOT / ".ci" / "work" / "bench-venv"
PEER_ROOT = ROOT / "bench" / "peers"


def log(*a: Any) -> None:
    print("[bench]", *a, file=sys.stderr, flush=True)


def writable(path: Path) -> bool:
    """Writable for us *and* meant to be: root passes os.access on a read-only tree."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return False
    return os.access(path, os.W_OK) and bool(mode & 0o222)


def prepare_harness(src: Path) -> Path:
    """The folder to run the harness in: ``src`` if writable, else a refreshed copy."""
    if not (src / "run_all.sh").exists():
        raise SystemExit(f"no shared harness at {src} (run_all.sh missing); see --harness")
    venvs = src / "venvs"
    if writable(src) and (not venvs.exists() or writable(venvs)):
        return src
    log(f"{src} is read-only: running a copy in {WORK_COPY}")
    shutil.copytree(
        src,
        WORK_COPY,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(
            "venvs", "logs", "state", "results", "__pycache__", "RESULTS.md"
        ),
    )
    for dirpath, dirnames, filenames in os.walk(WORK_COPY):
        dirnames[:] = [d for d in dirnames if d not in ("venvs", "results", "logs", "state")]
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            p.chmod(p.stat().st_mode | 0o200)
    WORK_COPY.chmod(WORK_COPY.stat().st_mode | 0o200)
    return WORK_COPY


def ensure_bench_venv() -> Path:
    """django_zqueue's venv for the harness: this project (editable, its declared
    dependencies), hiredis, and what the test project's settings import."""
    py = BENCH_VENV / "bin" / "python"
    stamp = BENCH_VENV / ".zqbench-installed"
    pyproject = ROOT / "pyproject.toml"
    if py.exists() and stamp.exists() and stamp.stat().st_mtime >= pyproject.stat().st_mtime:
        return BENCH_VENV
    base = getattr(sys, "_base_executable", sys.executable)
    if not py.exists():
        log(f"creating {BENCH_VENV}")
        subprocess.run([base, "-m", "venv", str(BENCH_VENV)], check=True)
    log(f"installing django_zqueue and its dependencies into {BENCH_VENV}")
    subprocess.run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-e",
            f"{ROOT}[hiredis]",
            "django-environ>=0.11",
            "django-tasks>=0.12",
        ],
        check=True,
    )
    stamp.touch()
    return BENCH_VENV


def peer_venvs(harness: Path) -> dict[str, Path]:
    """peer -> venv folder, from each peer.env on PEER_PATH (ours computes its own)."""
    out: dict[str, Path] = {}
    for root in (harness / "peers", PEER_ROOT):
        for env in sorted(root.glob("*/peer.env")):
            if env.parent.name in out:
                continue
            res = subprocess.run(
                ["bash", "-c", f'. "{env}"; echo "$VENV"'], capture_output=True, text=True
            )
            venv = res.stdout.strip()
            out[env.parent.name] = Path(venv) if venv.startswith("/") else harness / "venvs" / venv
    return out


def ensure_peer_venvs(harness: Path, peers: list[str] | None) -> None:
    venvs = peer_venvs(harness)
    wanted = [harness / "venvs" / "base"] + [
        v for p, v in venvs.items() if p != "zqueue" and (not peers or p in peers)
    ]
    missing = [v for v in wanted if not (v / "bin" / "python").exists()]
    if not missing:
        return
    log(f"building peer venvs with {harness / 'mkvenvs.sh'} (missing: {[m.name for m in missing]})")
    subprocess.run(["bash", str(harness / "mkvenvs.sh")], cwd=harness, timeout=1800, check=False)


def run_harness(
    harness: Path, port: int, peers: list[str] | None, log_path: Path, env_extra: dict[str, str]
) -> Path:
    """run_all.sh with our peer folder on PEER_PATH; returns the run's results folder."""
    env = {
        **os.environ,
        "PEER_PATH": f"peers:{PEER_ROOT}",
        "BENCH_REDIS_PORT": str(port),
        **env_extra,
    }
    # the harness spawns its workers with os.environ: keep our Django settings out of it
    for k in ("DJANGO_SETTINGS_MODULE", "ZQUEUE_REDIS_URL", "ZQUEUE_PREFIX", "PYTHONPATH"):
        env.pop(k, None)
    if peers:
        env["PEERS"] = " ".join(peers)
    log(f"running {harness / 'run_all.sh'} (PEER_PATH={env['PEER_PATH']}, port {port})")
    t0 = time.monotonic()
    cpu = PhaseCpu(port)
    with open(log_path, "w") as lf:
        proc = subprocess.Popen(
            ["bash", str(harness / "run_all.sh")],
            cwd=harness,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            cpu.line(line)
            lf.write(line)
            print("  | " + line.rstrip(), file=sys.stderr, flush=True)
        rc = proc.wait()
    cpu.line("== end")
    log(f"harness finished rc={rc} in {time.monotonic() - t0:.0f}s")
    run = (harness / "results" / "latest").resolve()
    (run / "redis_cpu.json").write_text(json.dumps(cpu.phases(), indent=1) + "\n")
    return run


#: a line of run_all.sh that starts a phase: "== <peer> <script>.py (...)", or a later step
_PHASE = re.compile(
    r"^== (?:(\S+) (enqueue|latency|process)\.py \(|memory per queued job|end|total)"
)


class PhaseCpu:
    """The CPU time of the harness's redis-server (its main thread, ``INFO cpu``; so not
    the wall time of a busy host) read at each line of ``run_all.sh`` that starts a phase:
    :meth:`phases` gives each (peer, script) the CPU seconds Redis spent in it, every
    command of every client included (the peer's workers, its prefill, its polling)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.marks: list[tuple[str | None, float]] = []

    def line(self, line: str) -> None:
        m = _PHASE.match(line)
        if not m:
            return
        label = f"{m.group(1)} {m.group(2)}" if m.group(1) else None
        try:
            info = redis.Redis(port=self.port, socket_timeout=5).info("cpu")
        except redis.RedisError:
            return
        main = ("used_cpu_user_main_thread", "used_cpu_sys_main_thread")
        keys = main if main[0] in info else ("used_cpu_user", "used_cpu_sys")
        self.marks.append((label, sum(float(info[k]) for k in keys)))

    def phases(self) -> dict[str, float]:
        """ "<peer> <script>" -> Redis CPU seconds, from one phase line to the next."""
        return {
            label: round(after - before, 6)
            for (label, before), (_, after) in zip(self.marks, self.marks[1:], strict=False)
            if label is not None
        }


def read_results(run: Path) -> dict[str, Any]:
    def jsonl(name: str) -> list[dict[str, Any]]:
        p = run / name
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]

    versions = {}
    for p in sorted(run.glob("versions-*.json")):
        try:
            versions[p.stem[9:]] = {
                d["name"].lower(): d["version"] for d in json.loads(p.read_text())
            }
        except (ValueError, KeyError):
            continue
    cpu = run / "redis_cpu.json"
    rb = run / "ceiling_redis_benchmark.csv"
    env = run / "env.txt"
    return {
        "run_dir": str(run),
        "rows": jsonl("results.jsonl"),
        "ceiling_py": jsonl("ceiling_py.jsonl"),
        "ceiling_redis_benchmark_csv": rb.read_text() if rb.exists() else "",
        "versions": versions,
        "env": env.read_text() if env.exists() else "",
        "redis_cpu": json.loads(cpu.read_text()) if cpu.exists() else {},
    }


def snapshot_memory(state_dir: Path, n: int, log_path: Path) -> dict[str, dict[str, float]]:
    """Redis memory per queued job for every peer: the queue each peer's own enqueue left
    (the harness's DUMP snapshot of ``n`` single-call enqueues), RESTOREd one at a time
    into an empty private server; used_memory delta / n once the server's memory is
    steady (``bytes_per_job``), and read at once after the RESTOREs, as the harness's
    own memory line reads it (``bytes_per_job_at_once``: it also counts what a RESTORE
    of a big key holds for a moment, about the size of its payload)."""
    snaps = sorted(state_dir.glob(f"*-{n}.snap"))
    if not snaps:
        return {}
    server = start_private(log_path=str(log_path))
    out: dict[str, dict[str, float]] = {}
    try:
        r = redis.Redis(port=server.port)
        for snap in snaps:
            peer = snap.name[: -len(f"-{n}.snap")]
            with open(snap, "rb") as f:
                items = pickle.load(f)  # written by the harness's benchlib.save_snapshot
            r.flushdb()
            time.sleep(0.2)
            before = used_memory(r)
            for i in range(0, len(items), 2000):
                p = r.pipeline(transaction=False)
                for k, v, ttl in items[i : i + 2000]:
                    if v is not None:
                        p.restore(k, ttl if ttl and ttl > 0 else 0, v)
                p.execute()
            at_once = used_memory(r)
            after = steady_memory(r)
            out[peer] = {
                "bytes_per_job": (after - before) / n,
                "bytes_per_job_at_once": (at_once - before) / n,
                "keys": len(items),
            }
            r.flushdb()
    finally:
        server.stop()
    return out
