"""The process supervisor of ``zqueue_worker --processes N`` (rq's worker pool): forks
the workers, restarts one that dies or was recycled (:mod:`.recycle`), and passes
SIGTERM/SIGINT on to them. With
``--health-port`` it answers the probes for its children between waits, in its own
thread (no thread of its own to fork with): each child reports to a slot of a
:class:`~.health.Board`."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from ..events import kv, log
from .recycle import RECYCLE_EXIT

if TYPE_CHECKING:
    from .health import Board, HealthServer
    from .worker import Worker

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
HEALTH_POLL = 0.1  # seconds: with probes, how often the parent looks for a dead child


def run_processes(
    processes: int,
    make_worker: Callable[[], Worker],
    health: tuple[HealthServer, Board] | None = None,
) -> int:
    """Fork ``processes`` children, each running ``make_worker().run()``; restart a child
    that dies unexpectedly, replace one that was recycled; forward SIGTERM/SIGINT. With
    ``health`` (a server whose probes read the board), each child reports to its slot of
    the board and the parent serves the probes. Returns 0 after a clean stop."""
    from django.db import connections

    connections.close_all()
    return Supervisor(make_worker, health).run(processes)


class Supervisor:
    """The parent of ``--processes``: its children by pid (-> slot), and whether it stops."""

    def __init__(
        self, make_worker: Callable[[], Worker], health: tuple[HealthServer, Board] | None
    ) -> None:
        self.make_worker = make_worker
        self.health = health
        self.children: dict[int, int] = {}
        self.stopping = False
        self.restarts = 0

    def spawn(self, slot: int) -> None:
        if self.health is not None:
            self.health[1].started(slot)
        # a stop signal that comes during the fork waits until the parent knows the new
        # child (and, in the child, until the worker's own handlers are in place): then
        # the parent forwards it, and the child stops; neither misses it
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            if self.stopping:  # a stop came while the parent waited to start this one
                return
            pid = os.fork()
            if pid == 0:
                _child(self.make_worker, slot, self.health)
            self.children[pid] = slot
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def forward(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True
        if self.health is not None:
            self.health[1].stopping = True
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def run(self, processes: int) -> int:
        signal.signal(signal.SIGTERM, self.forward)
        signal.signal(signal.SIGINT, self.forward)
        for slot in range(processes):
            self.spawn(slot)
        server = self.health[0] if self.health is not None else None
        while self.children:
            try:
                pid, status = _wait(server)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            slot = self.children.pop(pid, -1) if pid else -1
            if slot >= 0 and not self.stopping:
                self.ended(pid, slot, os.waitstatus_to_exitcode(status))
        return 0

    def ended(self, pid: int, slot: int, code: int) -> None:
        """Child ``pid`` of ``slot`` exited with ``code``, the parent not stopping."""
        if code == RECYCLE_EXIT:
            self.spawn(slot)  # recycled (recycle.py; the child said why): a fresh one
        elif code != 0 and self.restarts < 100:
            self.restarts += 1
            log.warning(kv(event="child_died", pid=pid, code=code, restarting=True))
            time.sleep(min(5.0, 0.1 * self.restarts))
            self.spawn(slot)
        elif self.health is not None:
            self.health[1].ended(slot)  # not started again: no longer watched


def _child(
    make_worker: Callable[[], Worker], slot: int, health: tuple[HealthServer, Board] | None
) -> NoReturn:
    """The forked child of ``slot``: run a worker, report to the board, never return."""
    code = 0
    try:
        if health is not None:
            health[0].socket.close()  # the parent's: a child does not answer
        w = make_worker()
        if health is not None:
            w.vitals.report_to(health[1], slot)
        w.install_signal_handlers()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # blocked by spawn()
        w.run()
        if w.recycler.reason is not None:
            code = RECYCLE_EXIT  # past its budget: the parent starts another
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _wait(server: HealthServer | None) -> tuple[int, int]:
    """The next child that ended (pid, status); with a health server, (0, 0) after
    answering the probes that came in HEALTH_POLL seconds and finding none ended."""
    if server is None:
        return os.wait()
    server.timeout = HEALTH_POLL
    server.handle_request()  # one probe, or none within HEALTH_POLL seconds
    return os.waitpid(-1, os.WNOHANG)
