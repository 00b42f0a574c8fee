"""A test's transaction, seen as the commits it stands for (docs/testing.md).

Django's ``TestCase`` (and pytest-django's ``db``) wraps each test in a transaction that
is rolled back at its end: an ``on_commit`` callback registered in the test never runs,
so a job enqueued inside ``transaction.atomic()`` (the default, ``ENQUEUE_ON_COMMIT``)
would never be sent. Here, whenever the test's code stands at the top level of its test
transaction (inside no atomic block of its own), the callbacks still registered belong
to blocks that ended without rolling back, which in production would have committed:
:func:`run_committed` runs django_zqueue's own among them then (those that send the
jobs), in order, as Django's commit does (a savepoint rolled back has discarded its own
already). Other callbacks are left to Django (and to ``captureOnCommitCallbacks``); a
callback run here is left in its place as a no-op, so the list Django and
``captureOnCommitCallbacks`` index keeps its length. The helpers call :func:`flush`
before they read or run the queues: it also relays the transactional outbox
(``ZQUEUE["OUTBOX"]``) as the workers' relay would, its rows being visible in the test's
transaction."""

from __future__ import annotations

import logging
from typing import Any

from django.db import connections

from .. import conf

log = logging.getLogger("django_zqueue.testing")


def _test_level_only(conn: object) -> bool:
    """Whether every open atomic block of ``conn`` is one of Django's test case's."""
    blocks = getattr(conn, "atomic_blocks", [])
    return all(getattr(block, "_from_testcase", False) for block in blocks)


def _ran() -> None:
    """A callback that ran already (see :func:`run_committed`)."""


def _ours(func: Any) -> bool:
    return str(getattr(func, "__module__", "")).startswith("django_zqueue.")


def run_committed() -> int:
    """Run django_zqueue's on-commit callbacks of the blocks that ended in the test's
    transaction (see the module's docstring); returns how many ran. Outside a test
    transaction, or inside an atomic block of the test's own, nothing runs."""
    ran = 0
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block or not conn.run_on_commit or not _test_level_only(conn):
            continue
        hooks: list[Any] = conn.run_on_commit
        for i, (sids, func, robust) in enumerate(list(hooks)):  # (savepoint ids, ...)
            if func is _ran or not _ours(func):
                continue
            hooks[i] = (sids, _ran, robust)
            ran += 1
            try:
                func()
            except Exception as exc:
                if not robust:
                    raise
                log.error("Error calling %s in on_commit() (%s).", func, exc, exc_info=True)
    return ran


def flush() -> None:
    """The test's commits (:func:`run_committed`), then, with ``ZQUEUE["OUTBOX"]`` on
    and the test at the top level of its transactions, one relay of the outbox."""
    run_committed()
    if not conf.get_config().outbox:
        return
    if all(_test_level_only(c) for c in connections.all(initialized_only=True)):
        from ..tasks import outbox

        outbox.relay()
