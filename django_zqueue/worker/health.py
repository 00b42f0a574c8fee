"""Health probes of a worker or scanner process (``--health-port``): ``GET /livez`` and
``GET /readyz`` served by the standard library's HTTP server in a daemon thread.

The loops record facts in a :class:`Vitals` (each loop's last tick, whether a consumer
thread is in a job, when Redis was lost, whether the process is prepared or stopping);
the handler only reads them, so a probe never waits on Redis or on a blocked loop.

``/livez`` is 503 when the heartbeat thread, or a claim loop that is not running a job,
has not ticked for ``timeout`` seconds, or Redis has been unreachable for longer than
``timeout``; ``/readyz`` is 503 before the process is prepared (the queues' layout
checked, the protocol library loaded), while Redis is unreachable, and once stopping.
A 503's body is one line saying why; a 200's is ``ok``.

With ``--processes N`` the parent serves the probes for its children: each child's
heartbeat writes its own verdict to a slot of a :class:`Board` (shared memory made before
the fork), and the parent reads the slots: a child that reports not live, or has not
reported for ``timeout`` seconds, makes ``/livez`` 503.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from multiprocessing.sharedctypes import RawArray
from typing import TYPE_CHECKING, Any

from ..events import kv, log

if TYPE_CHECKING:
    from ..engine.redis.outages import Outage

DEFAULT_TIMEOUT = 20.0  # seconds: two worker registrations (REGISTER_EVERY)
REPORT_EVERY = 0.2  # seconds between a child's reports to its parent's board
REASON_BYTES = 200

#: a verdict: None when healthy, else the one-line reason
Verdict = str | None


class Vitals:
    """The liveness facts of one process, written by its loops, read by the probes."""

    def __init__(
        self,
        outage: Outage,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        stopping: threading.Event | None = None,
    ) -> None:
        if not timeout > 0:
            raise ValueError("the health timeout must be > 0 seconds")
        self.outage = outage
        self.timeout = timeout
        self.clock = clock
        self.born = clock()
        #: loop name -> monotonic time of its last tick (written by that loop only)
        self.ticks: dict[str, float] = {}
        #: loops running a job now: a long job is not a blocked loop
        self.in_job: set[str] = set()
        self.prepared = False
        self.stopping = stopping or threading.Event()
        self._report: tuple[Board, int] | None = None
        self._reported = 0.0

    def tick(self, loop: str, wait: float = 0.0) -> None:
        """``loop`` turns; it means to wait ``wait`` seconds (a backoff, a blocking wait
        for work) before its next tick: the timeout counts from then."""
        self.ticks[loop] = self.clock() + wait

    def gone(self, loop: str) -> None:
        """``loop`` ended (a clean stop): no longer watched."""
        self.ticks.pop(loop, None)
        self.in_job.discard(loop)

    def job(self, loop: str, running: bool) -> None:
        """``loop`` starts (``running``) or ends running jobs; ends count as a tick."""
        if running:
            self.in_job.add(loop)
        else:
            self.in_job.discard(loop)
            self.ticks[loop] = self.clock()

    def live(self) -> Verdict:
        now = self.clock()
        since = self.outage.since
        if since is not None and now - since > self.timeout:
            return f"redis unreachable for {now - since:.1f}s"
        # copies (one C call each under the GIL): the loops change them meanwhile
        ticks, in_job = self.ticks.copy(), self.in_job.copy()
        for loop, at in sorted(ticks.items()):
            if loop not in in_job and now - at > self.timeout:
                return f"{loop} has not ticked for {now - at:.1f}s past its wait"
        return None

    def ready(self) -> Verdict:
        if self.stopping.is_set():
            return "stopping"
        if not self.prepared:
            return "starting"
        if self.outage.since is not None:
            return f"redis unreachable for {self.clock() - self.outage.since:.1f}s"
        return None

    # ------------------------------------------------------------------ --processes

    def report_to(self, board: Board, slot: int) -> None:
        """Report this child's verdicts to ``board``'s ``slot`` (see :meth:`beat`)."""
        self._report = (board, slot)

    def beat(self, loop: str = "heartbeat") -> None:
        """The heartbeat's tick; in a child, its verdicts go to the parent's board too
        (every REPORT_EVERY seconds)."""
        now = self.clock()
        self.ticks[loop] = now
        if self._report is not None and now - self._reported >= REPORT_EVERY:
            self._reported = now
            board, slot = self._report
            board.write(slot, now, self.live(), self.ready())


class Board:
    """Shared memory, made before the fork, where each child of ``--processes`` reports
    its verdicts, one slot per child (see :class:`Vitals`). Per slot: when the child was
    started, when it last reported (monotonic: one clock for every process of the host),
    whether it was live and ready, and the reason of the first failing verdict."""

    def __init__(self, slots: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout
        self.times = RawArray(ctypes.c_double, slots * 4)
        self.reasons = [RawArray(ctypes.c_char, REASON_BYTES) for _ in range(slots)]
        self.slots = slots
        self.stopping = False

    def started(self, slot: int, now: float | None = None) -> None:
        """A (new) child runs in ``slot``: nothing reported yet."""
        base = slot * 4
        self.times[base + 1] = 0.0
        self.times[base] = time.monotonic() if now is None else now

    def ended(self, slot: int) -> None:
        """The child of ``slot`` ended and is not started again: not watched."""
        self.times[slot * 4] = -1.0

    def write(self, slot: int, now: float, live: Verdict, ready: Verdict) -> None:
        reason = (live or ready or "").encode()[: REASON_BYTES - 1]
        self.reasons[slot].value = reason
        base = slot * 4
        self.times[base + 2] = 1.0 if live is None else 0.0
        self.times[base + 3] = 1.0 if ready is None else 0.0
        self.times[base + 1] = now  # last: a fresh time says the flags are this report's

    def _slot(self, slot: int, now: float) -> tuple[Verdict, Verdict]:
        base = slot * 4
        started, reported, live, ready = (self.times[base + i] for i in range(4))
        reason = self.reasons[slot].value.decode(errors="replace")
        if started < 0:
            return None, None
        if reported == 0.0:
            if now - started > self.timeout:
                return f"child {slot} has not reported for {now - started:.1f}s", "starting"
            return None, f"child {slot} starting"
        if now - reported > self.timeout:
            silent = f"child {slot} has not reported for {now - reported:.1f}s"
            return silent, silent
        return (
            None if live else f"child {slot}: {reason}",
            None if ready else f"child {slot}: {reason}",
        )

    def live(self) -> Verdict:
        now = time.monotonic()
        for slot in range(self.slots):
            verdict = self._slot(slot, now)[0]
            if verdict is not None:
                return verdict
        return None

    def ready(self) -> Verdict:
        if self.stopping:
            return "stopping"
        now = time.monotonic()
        for slot in range(self.slots):
            verdict = self._slot(slot, now)[1]
            if verdict is not None:
                return verdict
        return None


class Probes:
    """What the HTTP handler asks: ``live()`` and ``ready()`` (a :class:`Vitals` or a
    :class:`Board`)."""

    def __init__(self, live: Callable[[], Verdict], ready: Callable[[], Verdict]) -> None:
        self.live = live
        self.ready = ready


class _Handler(BaseHTTPRequestHandler):
    server: HealthServer
    timeout = 2.0  # a client that sends nothing does not hold the server for long

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        probes = self.server.probes
        check = {"/livez": probes.live, "/readyz": probes.ready}.get(path)
        if check is None:
            self._answer(404, "not found: GET /livez or /readyz")
            return
        try:
            verdict = check()
        except Exception as exc:  # a probe that cannot say is not healthy
            verdict = f"health check failed: {type(exc).__name__}: {exc}"[:REASON_BYTES]
        self._answer(200 if verdict is None else 503, verdict or "ok")

    def _answer(self, status: int, line: str) -> None:
        body = (line.replace("\n", " ") + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return  # a probe every few seconds is not worth a line


class HealthServer(HTTPServer):
    """One request at a time (a probe's answer is a read of memory): served by a daemon
    thread (:func:`serve`), or by the loop of the ``--processes`` parent, which has no
    thread to fork with (:meth:`handle_request` with ``timeout`` set)."""

    def __init__(self, probes: Probes, port: int, host: str = "127.0.0.1") -> None:
        super().__init__((host, port), _Handler)
        self.probes = probes
        log.info(kv(event="health_listening", host=host, port=self.server_address[1]))


def serve(probes: Probes, port: int, host: str = "127.0.0.1") -> HealthServer:
    """Serve ``probes`` on ``host:port`` from a daemon thread; the server is returned
    (``shutdown()`` stops it). An address in use raises OSError."""
    server = HealthServer(probes, port, host)
    thread = threading.Thread(target=server.serve_forever, name="zqueue-health", daemon=True)
    thread.start()
    return server
