"""The process supervisor of ``zqueue_worker --processes N`` (rq's worker pool): forks
the workers, restarts one that dies, and passes SIGTERM/SIGINT on to them."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from ..events import kv, log

if TYPE_CHECKING:
    from .worker import Worker


def run_processes(processes: int, make_worker: Callable[[], Worker]) -> int:
    """Fork ``processes`` children, each running ``make_worker().run()``; restart a child
    that dies unexpectedly; forward SIGTERM/SIGINT. Returns 0 after a clean stop."""
    from django.db import connections

    connections.close_all()
    children: dict[int, int] = {}
    stopping = False

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                w = make_worker()
                w.install_signal_handlers()
                w.run()
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        children[pid] = slot

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
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
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
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
    return 0
