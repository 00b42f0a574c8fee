"""Fixtures of the fault suite: private Redis servers, worker-process pools, the ledger.

Every test here is marked ``fault``. The short variants run in the normal pytest
command (and so in CI); ``--fault-long`` (option defined in tests/conftest.py) runs the
long ones with more jobs, more time and more faults.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from django_zqueue import conf
from django_zqueue.queue import Queue, get_queue
from testproject.demo import ledger

from ..redis_private import PrivateRedis

ROOT = Path(__file__).resolve().parents[2]
#: the suite's queue: no periodic task of the test project fires into it (a cron job
#: on "default" would add an ack the suite did not enqueue)
QUEUE = "fault"


@pytest.fixture
def long_run(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--fault-long"))


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[Callable[..., PrivateRedis]]:
    """private_redis(*args) -> a PrivateRedis, stopped after the test."""
    servers: list[PrivateRedis] = []

    def make(*args: str) -> PrivateRedis:
        server = PrivateRedis(tmp_path / f"redis{len(servers)}", *args)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@dataclass
class Fault:
    """One test's setting: a Redis, a prefix, a lease, a ledger file, worker processes."""

    url: str
    prefix: str
    ledger: str
    lease: float = 300.0
    skew: float = 0.0
    workers: list[subprocess.Popen[str]] = field(default_factory=list)
    killed: dict[int, float] = field(default_factory=dict)  # pid -> time of its SIGKILL
    started: int = 0  # commands started (numbers their log files)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "ZQUEUE_REDIS_URL": self.url,
            "ZQUEUE_PREFIX": self.prefix,
            "ZQ_FAULT_LEASE": str(self.lease),
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "tests.fault.settings",
            **extra,
        }

    def queue(self) -> Queue:
        return get_queue(QUEUE)

    def command(self, *args: str, skew: float = 0.0) -> subprocess.Popen[str]:
        """Start a management command; its output goes to ``<ledger dir>/<n>-<name>.log``
        (kept with the test's tmp_path, for a post-mortem)."""
        logs = Path(self.ledger).parent
        self.started += 1
        with (logs / f"{self.started:03d}-{args[0]}.log").open("w") as out:
            return subprocess.Popen(
                [sys.executable, str(ROOT / "testproject" / "manage.py"), *args],
                env=self.env(ZQ_FAULT_SKEW=str(skew)),
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def start_worker(self, *args: str, skew: float = 0.0) -> subprocess.Popen[str]:
        args = ("--queues", QUEUE, "--grace", "5", *args)
        proc = self.command("zqueue_worker", *args, skew=skew)
        self.workers.append(proc)
        return proc

    def alive(self) -> list[subprocess.Popen[str]]:
        return [p for p in self.workers if p.poll() is None]

    def kill_random(self, rng: random.Random, *restart_args: str) -> int:
        """SIGKILL one live worker, start a new one in its place; the victim's pid."""
        victim = rng.choice(self.alive())
        victim.kill()
        self.killed[victim.pid] = ledger.now()
        victim.wait(10)
        self.start_worker(*restart_args)
        return victim.pid

    def restart_dead(self, *args: str) -> int:
        """Start a new worker for each one that exited on its own; how many."""
        dead = [p for p in self.workers if p.poll() is not None and p.pid not in self.killed]
        for p in dead:
            self.killed[p.pid] = ledger.now()
            self.start_worker(*args)
        return len(dead)

    def stop_all(self) -> None:
        for p in self.alive():
            p.send_signal(signal.SIGTERM)
        for p in self.workers:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)

    def runs(self) -> list[ledger.Run]:
        return ledger.runs(self.ledger) if Path(self.ledger).exists() else []


@pytest.fixture
def fault(prefix: str, tmp_path: Path) -> Iterator[Callable[..., Fault]]:
    """fault(url=None, lease=300) -> a Fault whose queues are configured in this process too."""
    from .. import redis_server

    made: list[Fault] = []
    stack: list[Any] = []

    def make(url: str | None = None, lease: float = 300.0) -> Fault:
        f = Fault(url or redis_server.redis_url(), prefix, str(tmp_path / "ledger.sqlite3"), lease)
        ledger.connect(f.ledger).close()  # the table before any worker writes
        value = {
            "REDIS_URL": f.url,
            "PREFIX": prefix,
            "QUEUES": {"default": {}, QUEUE: {"visibility_timeout": lease}},
        }
        ctx = override_settings(ZQUEUE=value)
        ctx.enable()
        stack.append(ctx)
        conf.reset()
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop_all()
    for ctx in reversed(stack):
        ctx.disable()
    conf.reset()


def wait_for(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
