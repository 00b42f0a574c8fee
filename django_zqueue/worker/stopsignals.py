"""Stop signals (SIGTERM, SIGINT) handled on a thread of their own, not in the handler.

Python runs a signal handler in the main thread between two bytecodes, wherever that
thread is, including inside ``threading.Event.wait()`` while it holds the event's
lock. A handler that then calls ``event.set()`` waits for that lock, held by the very
thread it interrupted, for ever: a worker logged ``worker_stopping`` and never stopped.
So the handler here does one thing that takes no lock, ``os.write`` of the signal's
number to a pipe; a daemon thread reads the pipe and calls ``on_signal(signum)``, where
taking locks, logging and setting events are safe.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class SignalRelay:
    """Calls ``on_signal(signum)`` on the relay's thread for each stop signal received."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self.on_signal = on_signal
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)  # a full pipe drops a signal, never blocks
        os.set_inheritable(self._read, False)
        os.set_inheritable(self._write, False)

    def install(self, signals: Iterable[signal.Signals] = STOP_SIGNALS) -> None:
        """Start the relay's thread, then point ``signals`` at it (from the main thread)."""
        threading.Thread(target=self._relay, name="zqueue-signals", daemon=True).start()
        for signum in signals:
            signal.signal(signum, self._handler)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(BlockingIOError):  # 64 KiB of signals not yet read
            os.write(self._write, bytes([signum]))

    def _relay(self) -> None:
        while True:
            for signum in os.read(self._read, 64):
                self.on_signal(signum)
