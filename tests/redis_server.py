"""Find a Redis for the tests, or start a private one.

Order: $ZQUEUE_TEST_REDIS_URL, then $ZQUEUE_REDIS_URL, then redis://127.0.0.1:6379/0 if it
answers, else a private ``redis-server`` (no persistence) on a free loopback port, stopped
at exit. Tests never FLUSHALL/FLUSHDB: each uses its own key prefix.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis


def _answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2).ping())
    except redis.RedisError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_private(extra: list[str] | None = None) -> tuple[str, subprocess.Popen[bytes], str]:
    """Start a private redis-server; returns (url, process, work dir)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("no Redis reachable and no redis-server binary on PATH")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="zq-redis-")
    args = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        workdir,
        *(extra or []),
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while not _answers(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"private redis-server on port {port} did not start")
        time.sleep(0.05)
    return url, proc, workdir


def stop(proc: subprocess.Popen[bytes], workdir: str) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
    shutil.rmtree(workdir, ignore_errors=True)


_url: str | None = None


def redis_url() -> str:
    global _url
    if _url is None:
        for candidate in (
            os.environ.get("ZQUEUE_TEST_REDIS_URL"),
            os.environ.get("ZQUEUE_REDIS_URL"),
            "redis://127.0.0.1:6379/0",
        ):
            if candidate and _answers(candidate):
                _url = candidate
                break
        else:
            url, proc, workdir = start_private()
            atexit.register(stop, proc, workdir)
            _url = url
    return _url
