"""Jobs enqueued inside ``transaction.atomic``, sent together when the transaction
commits: one round trip for all of them (per Redis node), however many enqueues.

Each enqueue still registers its own ``transaction.on_commit(..., robust=True)``
callback, so Django decides, as for any callback, which of them run: a savepoint that
rolls back discards the callbacks registered inside it, a rollback discards all, and
every database (``using``) has its own. The first of a transaction's callbacks that runs
sends the jobs of every callback of that transaction still registered, in enqueue
order (:func:`~django_zqueue.queue.sets.publish_sets`), and marks them sent, so the
others do nothing when their turn comes.

Which callbacks are still registered: the pending sets of a connection hold each
callback by a weak reference only. Django holds the callbacks it will run (in
``connection.run_on_commit``, then in its commit loop); one it discards, nothing else
holds, so it is gone, and its jobs are never sent. Sets left from a transaction whose
callbacks never ran (a callback before them raised, which ends Django's commit loop) are
dropped at the next enqueue, when the newest pending callback is no longer among the
connection's registered ones (``connection.run_on_commit``, read and never changed).
``tests/test_commit_batch.py`` holds each of these against Django.

Jobs with the ``debounce``/``unique_for`` rules and workflow jobs (``depends_on``) keep
their own calls (one round trip each), sent at their place in the order.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from ..exceptions import QueueUnavailable, ZQueueError
from ..queue import NewJob, Queue
from ..queue.sets import Outcome, publish_sets

#: the logger of the line a lost job set gets (that of ``@task``)
log = logging.getLogger("django_zqueue.task")


@dataclass(eq=False)
class Deferred:
    """The jobs of one enqueue, to send when its transaction commits."""

    queue: Queue
    jobs: list[NewJob]
    #: the task's name, for the log line of a lost set
    name: str
    #: sends the jobs by their own calls (the debounce and unique-for rules, a workflow's
    #: links); None: a plain publish, sent with the others
    alone: Callable[[], object] | None = None
    #: called once the jobs are written (the Django Tasks backend's ``task_enqueued``)
    then: Callable[[], object] | None = None
    #: ``ZQUEUE["OUTBOX"]`` would keep these jobs through an outage (a task's enqueue
    #: without ``depends_on``): a set lost to one names it
    outbox: bool = False
    sent: bool = False
    callback: weakref.ref[Callable[[], None]] | None = field(default=None, repr=False)

    def registered(self) -> bool:
        """Whether Django still holds this set's callback (it will run, or is running)."""
        return self.callback is not None and self.callback() is not None


_lock = threading.Lock()
#: per database connection (one per thread and alias): its sets, in enqueue order
_pending: weakref.WeakKeyDictionary[Any, list[Deferred]] = weakref.WeakKeyDictionary()


def defer(using: str | None, deferred: Deferred) -> None:
    """Send ``deferred`` when the transaction of database ``using`` commits (call inside
    ``transaction.atomic``), together with the other sets of that transaction."""
    connection = transaction.get_connection(using)
    with _lock:
        pending = _pending.setdefault(connection, [])
    _drop_stale(connection, pending)

    def send_enqueued_jobs() -> None:
        _send(pending, deferred)

    transaction.on_commit(send_enqueued_jobs, using=using, robust=True)
    deferred.callback = weakref.ref(send_enqueued_jobs)
    pending.append(deferred)


def _drop_stale(connection: Any, pending: list[Deferred]) -> None:
    """Forget the sets whose callbacks Django discarded, and all of them once the newest
    is not a callback of the connection's transaction (it belonged to an earlier one)."""
    while pending and (pending[-1].sent or not pending[-1].registered()):
        pending.pop()
    if pending and not _is_hook(connection, pending[-1]):
        pending.clear()


def _is_hook(connection: Any, deferred: Deferred) -> bool:
    """Whether ``deferred``'s callback is among those the connection holds for its
    transaction (searched from the newest)."""
    callback = deferred.callback() if deferred.callback is not None else None
    hooks: Any = getattr(connection, "run_on_commit", ())
    try:
        return callback is not None and any(hook[1] is callback for hook in reversed(hooks))
    except (TypeError, IndexError):  # not Django's (sids, func, robust): batch no more
        return False


def _send(pending: list[Deferred], own: Deferred) -> None:
    """The callback of ``own``: send it with every set still registered, unless an
    earlier callback of the transaction sent it already."""
    if own.sent:
        return
    if any(d is own for d in pending):
        batch = [d for d in pending if not d.sent and (d is own or d.registered())]
        pending.clear()
    else:  # its set was dropped from the pending ones: sent alone
        batch = [own]
    for d in batch:
        d.sent = True
    send_all(batch)


def send_all(batch: list[Deferred]) -> None:
    """Send the sets in order: runs of plain publishes in one round trip each
    (:func:`publish_sets`), the others by their own calls. A set that fails is logged
    (:func:`lost`) and nothing is raised."""
    run: list[Deferred] = []
    for d in [*batch, None]:
        if d is not None and d.alone is None:
            run.append(d)
            continue
        if run:
            outcomes = publish_sets([(r.queue, r.jobs) for r in run])
            for r, outcome in zip(run, outcomes, strict=True):
                _settle(r, outcome)
            run = []
        if d is not None and d.alone is not None:
            try:
                d.alone()
            except Exception as exc:
                lost(d, exc)


def _settle(d: Deferred, outcome: Outcome) -> None:
    if outcome is not None:
        lost(d, outcome)
    elif d.then is not None:
        try:
            d.then()
        except Exception as exc:  # a receiver's error: Django's robust callbacks log it so
            log.error(
                "event=after_publish_failed task=%s queue=%s jobs=%s error=%s",
                d.name,
                d.queue.name,
                ",".join(j.tag for j in d.jobs),
                json.dumps(f"{type(exc).__name__}: {exc}"),
                exc_info=True,
            )


def lost(d: Deferred, exc: BaseException) -> None:
    """The transaction has committed: nothing can be undone. One line with what was lost
    (a traceback only for an unexpected error), and no re-raise, which would make Django
    log it all again; later on-commit callbacks run either way."""
    log.error(
        "event=publish_after_commit_failed task=%s queue=%s jobs=%s error=%s%s",
        d.name,
        d.queue.name,
        ",".join(j.tag for j in d.jobs),
        json.dumps(f"{type(exc).__name__}: {exc}"),
        outbox_hint(exc) if d.outbox else "",
        exc_info=not isinstance(exc, ZQueueError),
    )


#: what keeps the jobs of a commit through a Redis outage (docs/outbox.md)
OUTBOX_HINT = (
    "ZQUEUE['OUTBOX'] = True writes the jobs in the transaction and publishes them once "
    "Redis answers (docs/outbox.md)"
)


def outbox_hint(exc: BaseException) -> str:
    """`` hint="..."`` naming the outbox, for a publish after commit lost to an outage
    (the outbox keeps such jobs); '' for any other error."""
    return f" hint={json.dumps(OUTBOX_HINT)}" if isinstance(exc, QueueUnavailable) else ""
