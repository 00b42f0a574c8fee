"""Database connections around a job, as Django checks them around a request.

Around a request Django calls ``close_old_connections``: it closes the connections of the
thread that are broken (errors, autocommit left changed) or past ``CONN_MAX_AGE``, and
arms ``CONN_HEALTH_CHECKS``. A worker does the same before and after each job
(:func:`before_job`, :func:`after_job`), with three differences:

- kept across back-to-back jobs: in a consumer thread (:func:`consumer`) a connection
  opened under ``CONN_MAX_AGE = 0`` (Django's default, a new connection per request)
  lives for up to :data:`KEEP_SECONDS` of continuous work instead of one job, and is
  closed as soon as the thread has had no job for :data:`IDLE_SECONDS` (:func:`idle`,
  called while the consumer waits for work) or stops. A connection per job would cost
  more than a short job's own work (a connect is milliseconds, an INSERT a fraction of
  one). ``CONN_MAX_AGE > 0`` or ``None`` is left to Django's own age rule;
- a job that leaves a transaction open (an atomic block entered and never exited, or
  autocommit turned off) has it rolled back and its connection closed, so the next job
  starts clean (Django would leave the thread's connection stuck in such an atomic
  block). An atomic block that was open before the job started belongs to the caller
  and is left alone;
- a kept connection whose socket the server has closed or written to while it sat idle
  (``pg_terminate_backend``, a server restart) is closed before the next job instead of
  failing its first query; a cheap poll of the socket (PostgreSQL; no round trip).

The checks cost a pass over the configured databases only while this thread may hold a
connection: Django's ``connection_created`` signal tells when one is opened, and a check
that finds none open stops checking until the next one is.
"""

from __future__ import annotations

import contextlib
import select
import threading
import time
from collections.abc import Iterator
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from ..events import kv, log

#: seconds of continuous work a consumer thread keeps a ``CONN_MAX_AGE = 0`` connection
KEEP_SECONDS = 5.0
#: seconds without a job after which a consumer thread closes such a connection
IDLE_SECONDS = 1.0

_local = threading.local()


def _opened(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
    _local.open = True
    if getattr(_local, "keep", False) and connection.settings_dict["CONN_MAX_AGE"] == 0:
        # Django set close_at to "now" (closed by the next check); a consumer keeps it
        connection.close_at = time.monotonic() + KEEP_SECONDS


connection_created.connect(_opened, weak=False, dispatch_uid="django_zqueue.worker.dbconn")


@contextlib.contextmanager
def consumer() -> Iterator[None]:
    """Around a consumer thread's loop: ``CONN_MAX_AGE = 0`` connections it opens are
    kept across jobs (see the module's docstring), and closed when the loop ends."""
    _local.keep = True
    try:
        yield
    finally:
        _local.keep = False
        _close_kept()


@contextlib.contextmanager
def callers_connections() -> Iterator[None]:
    """Around jobs run in a thread that is not a worker's (django_zqueue.testing's
    ``drain()``, in a test's thread): the connections this thread holds open now are the
    caller's, left alone by the checks around each job as an atomic block of the caller's
    is, and never closed here."""
    before = _callers()
    opened = {c.alias for c in connections.all(initialized_only=True) if c.connection is not None}
    _local.callers = before | opened
    try:
        yield
    finally:
        _local.callers = before


def _callers() -> frozenset[str]:
    callers: frozenset[str] = getattr(_local, "callers", frozenset())
    return callers


def forked() -> None:
    """In a child process forked to run one job: its connections are its own (the parent
    closed its before the fork) and follow Django's rules, not a consumer's."""
    _local.keep = False
    _local.open = True
    _local.outer = ()


def before_job() -> None:
    """Before a job: Django's check of this thread's connections; a kept connection the
    server closed is closed here. Atomic blocks open now are the caller's (kept)."""
    if not getattr(_local, "open", True):
        return
    outer = []
    still_open = False
    callers = _callers()
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.in_atomic_block or conn.alias in callers:
            outer.append(conn.alias)  # the caller's transaction (a test, an eager run)
        elif _server_closed(conn):
            _close(conn)
        else:
            conn.close_if_unusable_or_obsolete()
        still_open = still_open or conn.connection is not None
    _local.outer = tuple(outer)
    _local.open = still_open


def after_job() -> None:
    """After a job: Django's check of this thread's connections, and the transaction of
    an atomic block the job left open rolled back (its connection closed)."""
    if not getattr(_local, "open", True):
        return
    outer = getattr(_local, "outer", ())
    still_open = False
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.alias in outer:
            pass
        elif _left_open(conn):
            log.warning(kv(event="job_left_transaction_open", database=conn.alias))
            _discard(conn)
        else:
            conn.close_if_unusable_or_obsolete()
        still_open = still_open or conn.connection is not None
    _local.outer = ()
    _local.last_job = time.monotonic()
    _local.open = still_open


def _left_open(conn: BaseDatabaseWrapper) -> bool:
    """Whether a job left ``conn`` in a transaction: an atomic block or autocommit off."""
    if conn.in_atomic_block or conn.closed_in_transaction:
        return True
    return bool(conn.get_autocommit() != conn.settings_dict["AUTOCOMMIT"])


def idle() -> None:
    """A consumer thread found no work: after :data:`IDLE_SECONDS` without a job, close
    the ``CONN_MAX_AGE = 0`` connections it kept."""
    if not getattr(_local, "open", True) or not getattr(_local, "keep", False):
        return
    if time.monotonic() - getattr(_local, "last_job", 0.0) >= IDLE_SECONDS:
        _close_kept()


def _close_kept() -> None:
    callers = _callers()
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block or conn.alias in callers:
            continue
        if conn.settings_dict["CONN_MAX_AGE"] == 0:
            _close(conn)
    _update_open()


def _update_open() -> None:
    _local.open = any(c.connection is not None for c in connections.all(initialized_only=True))


def _close(conn: BaseDatabaseWrapper) -> None:
    try:
        conn.close()
    except Exception:  # closing a broken connection may fail: it is gone either way
        conn.connection = None


def _discard(conn: BaseDatabaseWrapper) -> None:
    """Roll back and close a connection a job left in a transaction (inside an atomic
    block, or with autocommit off); the next use connects afresh (``connect()`` resets
    Django's transaction state)."""
    conn.in_atomic_block = False
    conn.closed_in_transaction = False
    conn.atomic_blocks = []
    conn.savepoint_ids = []
    conn.needs_rollback = False
    with contextlib.suppress(Exception):
        conn.rollback()  # what closing does on a server; not so an in-memory SQLite
    with contextlib.suppress(Exception):
        conn.set_autocommit(conn.settings_dict["AUTOCOMMIT"])
    _close(conn)


def _server_closed(conn: BaseDatabaseWrapper) -> bool:
    """Whether the idle connection's socket is readable: the server closed it or sent
    what an idle client does not expect (a session ended by the server). False when the
    driver has no socket (SQLite) or the poll fails."""
    raw: Any = conn.connection
    fileno = getattr(raw, "fileno", None)
    if fileno is None:
        return False
    try:
        if _poll is None:
            return bool(select.select([fileno()], [], [], 0)[0])
        poller = _poll()  # poll, not select: no limit on the descriptor's number
        poller.register(fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except Exception:  # a closed or foreign connection object: Django's checks decide
        return False


_poll = getattr(select, "poll", None)
