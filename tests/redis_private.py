"""Private redis-server processes for tests that change server state (config, ACL, AOF,
restarts, replication, TLS). Never used on the shared server.

``PrivateRedis(tmp_path, *args)`` starts ``redis-server`` on a free loopback port with its
own directory; ``kill()`` sends SIGKILL (a crash), ``start()`` starts it again on the same
port and directory (so an AOF is replayed), ``stop()`` ends it for good.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

from django_zqueue import embedded


def binary() -> str:
    path = shutil.which("redis-server")
    if path is None:
        pytest.skip("redis-server is not installed (needed for a private server)")
    return path


class PrivateRedis:
    def __init__(
        self, workdir: Path, *args: str, port: int | None = None, tls_ca: Path | None = None
    ) -> None:
        """``tls_ca``: the server listens with TLS on ``port`` (give ``--tls-port`` and
        ``--port 0`` in ``args``); clients verify it with this CA file."""
        self.tls_ca = tls_ca
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.args = list(args)
        self.port = port or embedded.free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        scheme = "rediss" if self.tls_ca else "redis"
        return f"{scheme}://127.0.0.1:{self.port}/0"

    def client(self, **kwargs: object) -> redis.Redis:
        if self.tls_ca:
            kwargs.setdefault("ssl_ca_certs", str(self.tls_ca))
        return redis.Redis.from_url(self.url, **kwargs)  # type: ignore[arg-type]

    def start(self, timeout: float = 15.0) -> None:
        assert self.process is None or self.process.poll() is not None
        log = (self.workdir / "server.log").open("ab")
        self.process = subprocess.Popen(
            [
                binary(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                str(self.workdir),
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited: {(self.workdir / 'server.log').read_text()[-2000:]}"
                )
            try:
                if self.client(socket_timeout=1, socket_connect_timeout=1).ping():
                    return
            except redis.BusyLoadingError:
                pass
            except redis.ConnectionError:
                pass
            except redis.ResponseError:  # e.g. NOAUTH: it is up
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
