"""The process supervisor of ``zqueue_worker --processes N`` (rq's worker pool): forks
the workers, restarts one that dies, and passes SIGTERM/SIGINT on to them. With
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

if TYPE_CHECKING:
    from .health import Board, HealthServer
    from .worker import Worker

HEALTH_POLL = 0.1  # seconds: with probes, how often the parent looks for a dead child


def run_processes(
    processes: int,
    make_worker: Callable[[], Worker],
    health: tuple[HealthServer, Board] | None = None,
) -> int:
    """Fork ``processes`` children, each running ``make_worker().run()``; restart a child
    that dies unexpectedly; forward SIGTERM/SIGINT. With ``health`` (a server whose probes
    read the board), each child reports to its slot of the board and the parent serves
    the probes. Returns 0 after a clean stop."""
    from django.db import connections

    connections.close_all()
    children: dict[int, int] = {}
    stopping = False

    def spawn(slot: int) -> None:
        if health is not None:
            health[1].started(slot)
        pid = os.fork()
        if pid == 0:
            _child(make_worker, slot, health)
        children[pid] = slot

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if health is not None:
            health[1].stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    for slot in range(processes):
        spawn(slot)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    restarts = 0
    while children:
        try:
            pid, status = _wait(health[0] if health is not None else None)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == 0:
            continue
        slot = children.pop(pid, -1)
        if slot < 0:
            continue
        code = os.waitstatus_to_exitcode(status)
        if not stopping and code != 0 and restarts < 100:
            restarts += 1
            log.warning(kv(event="child_died", pid=pid, code=code, restarting=True))
            time.sleep(min(5.0, 0.1 * restarts))
            spawn(slot)
        elif health is not None:
            health[1].ended(slot)  # not started again: no longer watched
    return 0


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
        w.run()
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
