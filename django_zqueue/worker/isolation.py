"""Process isolation: one job run in a forked child process the worker can kill
(``@task(isolation="process")``, ``zqueue_worker --pool process``).

The consumer thread forks a child per job (as rq's worker does), after closing its own
database connections so that the child opens its own and never shares a socket with
the parent. The child runs the job (:meth:`Runner.call`, the same code as thread mode:
signals, ``current_job()``, connection checks) and writes its outcome to a pipe as one
JSON object, then leaves with ``os._exit`` (no ``atexit``, no destructors of inherited
objects). Meanwhile the parent keeps the lease (the heartbeat) and waits on the pipe:

- past the task's ``timeout``: SIGTERM, then SIGKILL after :data:`KILL_GRACE` seconds;
  the job fails with ``JobTimeout`` under the normal retry rules, even when it was
  blocked in C code (a socket read, ``time.sleep``, a database query);
- cancelled (``JobCancelled``, raised in the waiting thread after the worker's
  ``cancel_grace``): the child is killed the same way;
- the child dies on its own (a crash, the OOM killer, someone's ``kill -9``): the job
  fails with the signal or exit code as its error, retried as usual.

In every case the parent sends the outcome (an ack or a nack), so a killed child never
leaves a lease behind. On Linux a child also dies with its worker (``PR_SET_PDEATHSIG``),
so a worker killed with SIGKILL leaves no orphan to run on.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import sys
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from django.db import connections

from ..exceptions import JobCancelled, JobTimeout
from ..queue import NO_RESULT
from ..tasks.context import JobContext
from . import dbconn
from .outcome import Failure, Outcome, ParkedRun, Released, Success, failed

if TYPE_CHECKING:
    from ..tasks.task import Task

#: seconds between SIGTERM and SIGKILL when a child must stop
KILL_GRACE = 1.0
#: longest single wait on the child's pipe (the waiting thread stays interruptible)
POLL = 0.05
MAX_OUTCOME_BYTES = 64 * 1024 * 1024


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (best effort elsewhere)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _encode(outcome: Outcome) -> bytes:
    if isinstance(outcome, Success):
        data: dict[str, Any] = {"ok": True, "run_ms": outcome.run_ms}
        if outcome.result is not NO_RESULT:
            data["result"] = outcome.result
        return json.dumps(data).encode("utf-8")
    if isinstance(outcome, Released):
        return json.dumps({"ok": False, "released": outcome.error}).encode("utf-8")
    if isinstance(outcome, ParkedRun):  # park.lua moved the job (in the child)
        return json.dumps({"ok": False, "parked": outcome.on, "wake": outcome.wake_ms}).encode()
    return json.dumps(
        {"ok": False, "error": outcome.error, "retry_in": outcome.retry_in, "dead": outcome.dead}
    ).encode("utf-8")


def _child(write: int, call: Callable[[], Outcome]) -> None:
    """In the child: run the job, write its outcome, leave at once."""
    code = 0
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the worker's handler is not ours
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the worker, which stops us
        _die_with_parent()
        dbconn.forked()  # the parent closed its connections: the child opens its own
        payload = _encode(call())
        view = memoryview(payload)
        while view:
            view = view[os.write(write, view) :]
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def fork_child(call: Callable[[], Outcome]) -> tuple[int, int]:
    """Fork a child running ``call``; returns its pid and the read end of its pipe."""
    # This thread's connections are closed, so the child opens its own: a socket shared
    # with the parent would be closed (and the parent's session ended) by the child.
    connections.close_all()
    read, write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns that fork() in a threaded process may deadlock the child.
        # The child runs the job in its only thread with fresh database connections;
        # logging and redis-py reset their locks and pools after a fork.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        os.close(read)
        _child(write, call)
    os.close(write)
    return pid, read


def stop_child(pid: int) -> int:
    """SIGTERM the child, SIGKILL it after KILL_GRACE; reap it. Returns its wait status."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def _exit_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def run_isolated(
    ctx: JobContext,
    task: Task[..., Any],
    call: Callable[[], Outcome],
    timeout: float | None,
) -> Outcome:
    """Run ``call`` (the job ``ctx``, of ``task``) in a child process and return its
    outcome; kill the child past ``timeout`` seconds or when ``JobCancelled`` is raised
    in this thread."""
    pid, read = fork_child(call)
    try:
        got = _wait(pid, read, timeout)
    except JobCancelled as exc:
        stop_child(pid)
        error = "django_zqueue.worker.JobCancelled: child process killed"
        return Failure(error, 0.0, True, ctx, exc)
    finally:
        os.close(read)
    if isinstance(got, Stopped):
        if got.why == "timeout":
            error = f"django_zqueue.worker.JobTimeout: ran past its timeout of {timeout}s"
            error += f"; child process {_exit_text(got.status)}"
            return failed(ctx, task, error, JobTimeout(), dead=False)
        error = f"the outcome of the child process is over {MAX_OUTCOME_BYTES} bytes"
        return failed(ctx, task, error, None, dead=False)
    status = os.waitpid(pid, 0)[1]
    try:
        data = json.loads(got)
    except ValueError:
        error = f"child process died before it reported an outcome: {_exit_text(status)}"
        return failed(ctx, task, error, None, dead=False)
    if data.get("ok"):
        result = data.get("result", NO_RESULT)
        return Success(task.result_ttl, int(data["run_ms"]), time.monotonic(), result)
    if "released" in data:  # not run (an outage before the call): given back
        return Released(str(data["released"]), ctx)
    if "parked" in data:  # a durable sleep or wait: the child parked the job
        return ParkedRun(str(data["parked"]), int(data["wake"]), ctx)
    error, retry_in, dead = str(data["error"]), float(data["retry_in"]), bool(data["dead"])
    return Failure(error, retry_in, dead, ctx, None, task.on_failure)


class Stopped(NamedTuple):
    """A child the worker stopped: why (``timeout``, ``too_large``), its wait status."""

    why: str
    status: int


def _wait(pid: int, read: int, timeout: float | None) -> bytes | Stopped:
    """What the child wrote to its pipe until it closed it; or, when it ran past
    ``timeout`` (or wrote too much), the child stopped and reaped."""
    t0 = time.monotonic()
    chunks: list[bytes] = []
    size = 0
    while True:
        if timeout is not None and time.monotonic() - t0 > timeout:
            return Stopped("timeout", stop_child(pid))
        ready, _, _ = select.select([read], [], [], POLL)
        if not ready:
            continue
        data = os.read(read, 65536)
        if not data:
            return b"".join(chunks)
        chunks.append(data)
        size += len(data)
        if size > MAX_OUTCOME_BYTES:
            return Stopped("too_large", stop_child(pid))
