"""Riding out Redis outages: capped exponential backoff with jitter, and one log line
when Redis is lost and one when it is back (with the outage length).

An *outage* is anything that says "not now" about Redis itself: a refused, dropped or
timed-out connection, a server still ``LOADING`` its data, a replica answering
``READONLY``, a server ``BUSY`` with a slow script, a cluster failing over
(``CLUSTERDOWN``, ``TRYAGAIN``, ``MASTERDOWN``). Anything else a script answers is a
:class:`~django_zqueue.exceptions.ScriptError`: reported as such, and retried with the
same backoff, never in a tight loop.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from ...events import kv
from ...exceptions import QueueUnavailable, RedisFull, ScriptError
from .connection import UNAVAILABLE_ERRORS, is_out_of_memory, redis_full

#: first words of server replies that mean "Redis is not available right now"
UNAVAILABLE_REPLIES = frozenset(
    {
        "LOADING",
        "READONLY",
        "BUSY",
        "MASTERDOWN",
        "TRYAGAIN",
        "CLUSTERDOWN",
        "NOREPLICAS",
        "MOVED",
        "ASK",
    }
)


def is_unavailable(exc: BaseException) -> bool:
    """True for an outage (see the module docstring), here or in the exception's causes."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (QueueUnavailable, *UNAVAILABLE_ERRORS)):
            return True
        if isinstance(cur, redis.ResponseError):
            word = str(cur).split(" ", 1)[0]
            if word in UNAVAILABLE_REPLIES:
                return True
        seen.add(id(cur))
        cur = cur.__cause__
    return False


def as_error(reply: BaseException) -> Exception:
    """A failed pipeline reply as the error it is: :class:`QueueUnavailable` for an
    outage, :class:`RedisFull` for Redis at maxmemory, :class:`ScriptError` for anything
    else."""
    if is_unavailable(reply):
        return QueueUnavailable(str(reply))
    if is_out_of_memory(reply):
        return redis_full(reply)
    return ScriptError(str(reply))


class RetryDelay:
    """Capped exponential backoff with jitter: the n-th failure in a row waits
    ``min(cap, base * 2**(n-1))`` seconds, times a random factor in [0.5, 1) (so that
    many processes that lost Redis together do not come back in step)."""

    def __init__(
        self, base: float = 0.1, cap: float = 30.0, rand: Callable[[], float] = random.random
    ) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0
        self._rand = rand

    def next(self) -> float:
        """Count a failure; the seconds to wait before the next try."""
        self.failures += 1
        raw = min(self.cap, self.base * 2 ** min(self.failures - 1, 60))
        return float(raw * (0.5 + self._rand() / 2))

    def reset(self) -> None:
        self.failures = 0


class Throttle:
    """At most one log line per ``interval`` seconds for each kind of error (``key``),
    however many threads meet it how often; thread-safe. :meth:`due` says whether to log
    now, and how many were held back since the last line."""

    def __init__(self, interval: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._traced: set[str] = set()
        self._lock = threading.Lock()

    def due(self, key: str) -> int | None:
        """None: do not log this one (counted); else log it, saying that this many were
        held back before it."""
        now = self.clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            if len(self._last) > 1000:  # (bounded: errors whose text varies)
                self._last.clear()
                self._held.clear()
            self._last[key] = now
            return self._held.pop(key, 0)

    def first(self, key: str) -> bool:
        """Whether this is the first line of its kind (``key``): its traceback is
        logged once, not at every line."""
        with self._lock:
            if key in self._traced:
                return False
            if len(self._traced) > 1000:  # (bounded: errors whose text varies)
                self._traced.clear()
            self._traced.add(key)
            return True


class QueueBackoff:
    """Per-queue backoff of one process's loops after errors that concern one queue (a
    key of the wrong type, a script's error: not an outage, which concerns every queue
    and backs off as a whole): :meth:`failed` leaves that queue alone for a growing while
    (capped exponential, with jitter), the other queues go on. :meth:`ok` after a call
    that worked starts its delay again from the base, but only once it ``proved`` it (a
    claim that brought jobs: an empty claim proves little, a corrupt key may fail only
    the claims that find work) or after ``reset_after`` seconds without an error.
    Thread-safe."""

    def __init__(
        self,
        base: float = 0.1,
        cap: float = 5.0,
        reset_after: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.base, self.cap, self.reset_after = base, cap, reset_after
        self.clock = clock
        self._rand = rand
        self._delays: dict[str, RetryDelay] = {}
        self._until: dict[str, float] = {}  # queue -> clock time its calls go on
        self._failed_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def failed(self, name: str) -> float:
        """Count a failure of queue ``name``: the seconds it is left alone."""
        now = self.clock()
        with self._lock:
            delay = self._delays.get(name)
            if delay is None:
                delay = self._delays[name] = RetryDelay(self.base, self.cap, self._rand)
            wait = delay.next()
            self._until[name] = now + wait
            self._failed_at[name] = now
        return wait

    def wait(self, name: str) -> float:
        """Seconds queue ``name`` is still left alone (0: go on)."""
        if not self._until:  # the common case: no lock
            return 0.0
        until = self._until.get(name)
        return 0.0 if until is None else max(0.0, until - self.clock())

    def ok(self, name: str, proved: bool = True) -> None:
        """A call of queue ``name`` worked (see the class docstring)."""
        if name not in self._delays:  # the common case: no lock
            return
        with self._lock:
            failed_at = self._failed_at.get(name)
            if failed_at is None:
                return
            if proved or self.clock() - failed_at > self.reset_after:
                self._delays.pop(name, None)
                self._until.pop(name, None)
                self._failed_at.pop(name, None)


class ErrorLine:
    """The log line of an error that is not an outage, for a loop that meets it again
    and again: at most one line per ``interval`` seconds for each kind of error (the
    ones held back counted in ``repeated``), with its traceback only the first time.
    Thread-safe."""

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = logger
        self.throttle = Throttle(interval, clock)

    def error(self, exc: BaseException, line: Callable[[dict[str, Any]], str]) -> bool:
        """Log ``line(fields)`` for ``exc`` unless one was logged for its kind less than
        ``interval`` ago (``fields``: ``repeated``, when some were held back). True when
        a line was logged."""
        kind = f"{type(exc).__name__}: {str(exc)[:300]}"
        held = self.throttle.due(kind)
        if held is None:
            return False
        trace = exc if self.throttle.first(kind) else None
        self.log.error(line({"repeated": held} if held else {}), exc_info=trace)
        return True


#: what a ``redis_lost`` line says to do (one line)
OUTAGE_FIX = (
    "check that Redis runs and is reachable at ZQUEUE['REDIS_URL'] "
    "(python manage.py zqueue_doctor says what fails); work resumes by itself once it is"
)
#: seconds between the ``redis_still_lost`` lines of one outage
REMIND_EVERY = 60.0


class Outage:
    """Whether Redis answers, as one process sees it: ``failed()`` logs ``redis_lost``
    once, at the first failure of an outage, with what to check; while it lasts, one
    ``redis_still_lost`` line every ``remind_every`` seconds says the process is still
    trying (a worker started with Redis down, or one whose Redis never comes back, is not
    silent for ever); ``ok()`` logs ``redis_back`` with the outage length, once, at the
    first success after it. Shared by a worker's threads (thread-safe), so a worker logs
    one pair of lines per outage, not one per thread or per attempt."""

    def __init__(
        self,
        logger: logging.Logger,
        remind_every: float = REMIND_EVERY,
        clock: Callable[[], float] = time.monotonic,
        **fields: Any,
    ) -> None:
        self.log = logger
        self.fields = fields
        self.remind_every = remind_every
        self.clock = clock
        self.since: float | None = None  # clock time of the first failure
        self.reminded = 0.0  # clock time of the last line of this outage
        self.failures = 0
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException) -> None:
        now = self.clock()
        with self._lock:
            self.failures += 1
            if self.since is None:
                self.since = self.reminded = now
                event, more = "redis_lost", {}
            elif now - self.reminded >= self.remind_every:
                self.reminded = now
                event = "redis_still_lost"
                more = {"outage_s": f"{now - self.since:.0f}", "failures": self.failures}
            else:
                return
        self.log.warning(
            kv(event=event, **self.fields, **more, error=str(exc)[:200], fix=OUTAGE_FIX)
        )

    def ok(self) -> None:
        if self.since is None:  # the common case: no lock
            return
        with self._lock:
            if self.since is None:
                return
            outage, failures = self.clock() - self.since, self.failures
            self.since, self.failures = None, 0
        self.log.warning(
            kv(event="redis_back", **self.fields, outage_s=f"{outage:.1f}", failures=failures)
        )


#: what a ``redis_full`` line says to do (one line)
FULL_NOTICE_FIX = (
    "raise maxmemory (CONFIG SET maxmemory) or free memory; workers go on draining the queues"
)


class FullNotice:
    """Writes a process goes on without while Redis refuses them at ``maxmemory``
    (:class:`~django_zqueue.exceptions.RedisFull`): its registration, statistics, periodic
    schedules. ``with notice.refusing(what):`` swallows a RedisFull and says it in one
    ``redis_full`` line with the fix: once per kind, and again only ``every`` seconds
    later (with the count of refusals since), however often memory goes over and back
    under the limit meanwhile; thread-safe."""

    def __init__(self, logger: logging.Logger, every: float = 600.0, **fields: Any) -> None:
        self.log = logger
        self.every = every
        self.fields = fields
        self.said: dict[str, float] = {}  # kind -> monotonic time of its last line
        self.count: dict[str, int] = {}  # kind -> refusals not said yet
        self._lock = threading.Lock()

    def refused(self, what: str) -> None:
        now = time.monotonic()
        with self._lock:
            self.count[what] = self.count.get(what, 0) + 1
            last = self.said.get(what)
            if last is not None and now - last < self.every:
                return
            self.said[what], times = now, self.count.pop(what)
        more = {"refusals": times} if times > 1 else {}
        line = kv(event="redis_full", **self.fields, refused=what, **more, fix=FULL_NOTICE_FIX)
        self.log.warning(line)

    def refusing(self, what: str) -> _Refusing:
        return _Refusing(self, what)


class _Refusing:
    def __init__(self, notice: FullNotice, what: str) -> None:
        self.notice, self.what = notice, what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        if exc is not None and full_refusal(exc):
            self.notice.refused(self.what)
            return True
        return False


def full_refusal(exc: BaseException) -> bool:
    """True for Redis refusing a write at ``maxmemory``, here or in the exception's causes
    (a pipeline's failure wrapped as QueueUnavailable)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, RedisFull) or is_out_of_memory(cur):
            return True
        seen.add(id(cur))
        cur = cur.__cause__
    return False
