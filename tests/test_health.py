"""Health probes (``--health-port``): ``/livez`` and ``/readyz`` of a worker, of the parent
of ``--processes`` and of the scanner (django_zqueue/worker/health.py).

The verdicts are tested on their facts with a fake clock; the probes end to end with real
processes on a private redis-server (its clients killed, its client limit lowered so the
worker cannot reconnect, the server killed and started again: never the shared one)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from django_zqueue.engine.redis.embedded import free_port
from django_zqueue.engine.redis.outages import Outage
from django_zqueue.worker.health import Board, Probes, Vitals, serve

from .redis_private import PrivateRedis

ROOT = Path(__file__).resolve().parent.parent


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def vitals(timeout: float = 5.0) -> tuple[Vitals, Outage, Clock]:
    clock = Clock()
    outage = Outage(logging.getLogger("test.health"), clock=clock)
    return Vitals(outage, timeout, clock=clock), outage, clock


# ------------------------------------------------------------------ the verdicts


def test_live_fails_on_a_silent_heartbeat_or_claim_loop_not_on_a_long_job() -> None:
    v, _, clock = vitals(timeout=5.0)
    v.beat()
    v.tick("zqueue-consumer-0")
    v.tick("zqueue-consumer-1")
    assert v.live() is None
    v.job("zqueue-consumer-1", True)  # a job of an hour is not a blocked loop
    clock.now += 4.0
    v.beat()
    v.tick("zqueue-consumer-0")
    clock.now += 4.0
    v.beat()
    v.tick("zqueue-consumer-0")
    assert v.live() is None
    clock.now += 5.5  # consumer-0 blocked (not in a job): past the timeout
    v.beat()
    assert v.live() == "zqueue-consumer-0 has not ticked for 5.5s past its wait"
    v.tick("zqueue-consumer-0")
    assert v.live() is None
    clock.now += 6.0  # the heartbeat itself stuck (a call that never returns)
    v.tick("zqueue-consumer-0")
    assert v.live() == "heartbeat has not ticked for 6.0s past its wait"
    v.beat()
    v.job("zqueue-consumer-1", False)  # the job ended: a tick, watched again
    assert v.live() is None
    v.gone("zqueue-consumer-0")  # a loop that ended on a clean stop is not watched
    clock.now += 100.0
    v.beat()
    v.tick("zqueue-consumer-1")
    assert v.live() is None


def test_live_fails_once_redis_is_lost_longer_than_the_timeout_and_ready_at_once() -> None:
    v, outage, clock = vitals(timeout=5.0)
    assert v.ready() == "starting"
    v.prepared = True
    assert v.ready() is None
    outage.failed(ConnectionError("Error 111 connecting to 127.0.0.1:1"))
    assert v.ready() == "redis unreachable for 0.0s"
    assert v.live() is None  # a short outage is ridden out
    clock.now += 5.1
    assert v.live() == "redis unreachable for 5.1s"
    outage.ok()
    assert v.live() is None and v.ready() is None
    v.stopping.set()
    assert v.ready() == "stopping"
    assert v.live() is None


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_a_timeout_that_is_not_positive_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="health timeout"):
        vitals(timeout=bad)


def test_the_board_says_which_child_is_silent_or_not_live() -> None:
    board = Board(2, timeout=5.0)
    now = time.monotonic()
    board.started(0, now)
    board.started(1, now)
    assert board.live() is None  # starting children are live, not ready
    assert board.ready() == "child 0 starting"
    board.write(0, now, None, None)
    board.write(1, now, "redis unreachable for 7.0s", "redis unreachable for 7.0s")
    assert board.live() == "child 1: redis unreachable for 7.0s"
    board.write(1, now, None, "stopping")
    assert board.live() is None
    assert board.ready() == "child 1: stopping"
    board.write(1, time.monotonic() - 6.0, None, None)  # its last report is stale
    assert (board.live() or "").startswith("child 1 has not reported for 6.")
    board.started(1, time.monotonic() - 6.0)  # restarted long ago, never reported
    assert (board.live() or "").startswith("child 1 has not reported")
    board.ended(1)  # ended for good (not restarted): not watched
    assert board.live() is None and board.ready() is None
    board.write(0, time.monotonic(), None, None)
    assert board.ready() is None
    board.stopping = True
    assert board.ready() == "stopping"
    board.write(0, time.monotonic(), "x" * 500, None)  # a long reason is cut, not overflowed
    assert board.live() == "child 0: " + "x" * 199


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_server_answers_one_line_and_404_elsewhere() -> None:
    verdicts: dict[str, str | None] = {"live": None, "ready": "redis unreachable\nfor 2s"}
    server = serve(Probes(lambda: verdicts["live"], lambda: verdicts["ready"]), 0)
    port = server.server_address[1]
    try:
        assert get(port, "/livez") == (200, "ok\n")
        assert get(port, "/readyz?verbose") == (503, "redis unreachable for 2s\n")
        assert get(port, "/")[0] == 404
        verdicts["live"] = "heartbeat has not ticked for 9.0s"
        assert get(port, "/livez") == (503, "heartbeat has not ticked for 9.0s\n")

        def broken() -> str | None:
            raise RuntimeError("boom")

        server.probes = Probes(broken, broken)
        assert get(port, "/livez") == (503, "health check failed: RuntimeError: boom\n")
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------ real processes


@pytest.fixture
def private(tmp_path: Path, prefix: str) -> Iterator[tuple[PrivateRedis, dict[str, str]]]:
    server = PrivateRedis(tmp_path / "redis")
    env = {
        **os.environ,
        "ZQUEUE_REDIS_URL": server.url,
        "ZQUEUE_PREFIX": prefix,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
    }
    try:
        yield server, env
    finally:
        server.stop()


def command(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def until(port: int, path: str, status: int, timeout: float = 30.0) -> str:
    """Poll ``path`` until it answers ``status``; its body (fails past ``timeout``)."""
    deadline = time.monotonic() + timeout
    seen: tuple[int, str] = (0, "")
    while time.monotonic() < deadline:
        try:
            seen = get(port, path)
        except OSError as exc:  # not listening yet
            seen = (0, str(exc))
        if seen[0] == status:
            return seen[1]
        time.sleep(0.05)
    raise AssertionError(f"{path} never answered {status}; last: {seen}")


def stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
    return out


@pytest.mark.slow
def test_worker_livez_fails_when_its_connections_are_killed_and_it_cannot_reconnect(
    private: tuple[PrivateRedis, dict[str, str]],
) -> None:
    server, env = private
    port = free_port()
    proc = command(
        env, "zqueue_worker", "--health-port", str(port), "--health-timeout", "1", "--grace", "1"
    )
    admin = server.client()
    try:
        assert until(port, "/readyz", 200) == "ok\n"
        assert until(port, "/livez", 200) == "ok\n"
        admin.config_set("maxclients", 1)  # this connection is the one: no reconnecting
        admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        body = until(port, "/livez", 503)
        assert body.startswith("redis unreachable for "), body
        assert until(port, "/readyz", 503).startswith("redis unreachable for ")
        admin.config_set("maxclients", 10000)
        assert until(port, "/livez", 200) == "ok\n"
        assert until(port, "/readyz", 200) == "ok\n"
        # the server itself down: not ready at once, not live past the timeout; back after
        server.kill()
        assert until(port, "/readyz", 503).startswith("redis unreachable for ")
        assert until(port, "/livez", 503).startswith("redis unreachable for ")
        server.start()
        assert until(port, "/readyz", 200) == "ok\n"
        assert until(port, "/livez", 200) == "ok\n"
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    assert "event=redis_lost" in out and "event=redis_back" in out


def child_pids(parent: int) -> list[int]:
    path = Path(f"/proc/{parent}/task/{parent}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.mark.slow
def test_the_parent_of_processes_answers_for_its_children(
    private: tuple[PrivateRedis, dict[str, str]],
) -> None:
    _, env = private
    port = free_port()
    proc = command(
        env,
        "zqueue_worker",
        "--processes",
        "2",
        "--health-port",
        str(port),
        "--health-timeout",
        "1",
        "--grace",
        "1",
    )
    stopped: list[int] = []
    try:
        assert until(port, "/readyz", 200) == "ok\n"
        assert until(port, "/livez", 200) == "ok\n"
        children = child_pids(proc.pid)
        assert len(children) == 2
        os.kill(children[1], signal.SIGSTOP)  # a child stuck as a whole: it reports nothing
        stopped.append(children[1])
        assert "has not reported for" in until(port, "/livez", 503)
        os.kill(children[1], signal.SIGCONT)
        stopped.clear()
        assert until(port, "/livez", 200) == "ok\n"
        os.kill(children[0], signal.SIGKILL)  # a dead child: started again, live again
        assert until(port, "/livez", 200) == "ok\n"
        deadline = time.monotonic() + 30
        while children[0] in child_pids(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert until(port, "/readyz", 200) == "ok\n"
        assert len(child_pids(proc.pid)) == 2
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        out = stop(proc)
    assert proc.returncode == 0, out
    assert "event=child_died" in out


@pytest.mark.slow
def test_scanner_probes(private: tuple[PrivateRedis, dict[str, str]]) -> None:
    server, env = private
    port = free_port()
    proc = command(
        env,
        "zqueue_scanner",
        "--interval",
        "0.1",
        "--health-port",
        str(port),
        "--health-timeout",
        "1",
    )
    try:
        assert until(port, "/readyz", 200) == "ok\n"
        assert until(port, "/livez", 200) == "ok\n"
        server.kill()
        assert until(port, "/readyz", 503).startswith("redis unreachable for ")
        assert until(port, "/livez", 503).startswith("redis unreachable for ")
        server.start()
        assert until(port, "/livez", 200) == "ok\n"
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out


def test_a_port_in_use_is_one_line(private: tuple[PrivateRedis, dict[str, str]]) -> None:
    _, env = private
    held = serve(Probes(lambda: None, lambda: None), 0)
    try:
        port = held.server_address[1]
        proc = command(env, "zqueue_worker", "--burst", "--health-port", str(port))
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 1, out
        assert f"CommandError: cannot serve the health probes on 127.0.0.1:{port}" in out
        assert "Traceback" not in out
        bad = command(env, "zqueue_worker", "--burst", "--health-port", "0")
        out, _ = bad.communicate(timeout=60)
        assert bad.returncode == 2 and "must be a port number" in out
    finally:
        held.shutdown()
        held.server_close()


def test_the_worker_loops_tick_the_vitals(project: dict[str, str]) -> None:
    """A Worker in this process: its heartbeat and consumer threads tick its vitals;
    once stopped, the consumers are no longer watched."""
    from django_zqueue.worker import Worker

    w = Worker(["default"], concurrency=2, burst=False, scanner=False, health_timeout=30)
    runner = threading.Thread(target=w.run)
    runner.start()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if {"heartbeat", "zqueue-consumer-0", "zqueue-consumer-1"} <= set(w.vitals.ticks):
                break
            time.sleep(0.02)
        assert {"heartbeat", "zqueue-consumer-0", "zqueue-consumer-1"} <= set(w.vitals.ticks)
        assert w.vitals.live() is None
        assert w.vitals.ready() is None
    finally:
        w.stop()
        runner.join(30)
    assert w.vitals.ready() == "stopping"
    assert not {"zqueue-consumer-0", "zqueue-consumer-1"} & set(w.vitals.ticks)
