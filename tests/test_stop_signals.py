"""A stop signal that lands while the main thread holds the stop event's lock.

Python runs a handler in the main thread between two bytecodes, including inside
``Event.wait()`` while that thread holds the event's lock; a handler calling
``event.set()`` there waits for ever (a worker logged ``worker_stopping`` and never
stopped, CI). The first test makes that moment on purpose in a child process, bounded by
a timeout (the child hangs if the handler takes the lock); the others check the relay that
takes the work out of the handler.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from django_zqueue.worker.stopsignals import SignalRelay

# the child holds the event's lock, is signalled, and only then lets the lock go
WORKER_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import django
    django.setup()
    from django_zqueue.worker.worker import Worker

    w = Worker(["default"])
    w.install_signal_handlers()
    with w.stopping._cond:  # the lock Event.wait() holds around its checks
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # bytecodes: the handler runs here, the lock held
            pass
    sys.exit(0 if w.stopping.wait(5.0) else 3)
    """
)


def test_a_worker_signalled_while_its_stop_event_is_locked_stops(
    project: dict[str, str],
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", WORKER_CHILD],
        env=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        out, _ = child.communicate()
        pytest.fail(f"the worker's signal handler waited on the event's lock (hung):\n{out}")
    assert child.returncode == 0, out


def test_the_relay_calls_back_on_its_own_thread_for_each_signal() -> None:
    seen: list[tuple[int, str]] = []
    done = threading.Event()
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def on_signal(signum: int) -> None:
        seen.append((signum, threading.current_thread().name))
        if len(seen) == 2:
            done.set()

    try:
        SignalRelay(on_signal).install()
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        assert done.wait(5.0)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    assert seen == [(signal.SIGTERM, "zqueue-signals"), (signal.SIGINT, "zqueue-signals")]


def test_a_flood_of_signals_neither_blocks_the_handler_nor_is_lost_as_a_stop() -> None:
    """More signals than the pipe holds while the relay's callback is stuck: the handler
    drops the extra ones (they all say "stop") and the main thread runs on."""
    release = threading.Event()
    calls: list[int] = []
    old = signal.getsignal(signal.SIGTERM)

    def on_signal(signum: int) -> None:
        calls.append(signum)
        release.wait(10.0)

    relay = SignalRelay(on_signal)
    try:
        relay.install([signal.SIGTERM])
        deadline = time.monotonic() + 10.0
        for _ in range(70_000):  # > 64 KiB of pipe: writes beyond it are dropped
            relay._handler(signal.SIGTERM, None)
            assert time.monotonic() < deadline
        release.set()
        deadline = time.monotonic() + 10.0
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        release.set()
        signal.signal(signal.SIGTERM, old)
    assert calls and set(calls) == {signal.SIGTERM}
