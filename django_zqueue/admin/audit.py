"""Every action of the queue admin, audited in Django's admin log (``LogEntry``).

Each action that changes what a queue holds or does — requeue, retry now, delete,
cancel, run now, set priority (on selected jobs or on every job that matches), purge,
pause, resume, send an event, a schedule's pause, resume, run now, removal, change and
addition, a worker's quiet and stop, and the outbox's retry and discard — writes one
:class:`~django.contrib.admin.models.LogEntry` after it ran: the user, the queue
(``object_id`` and ``object_repr``; a schedule's changes ``schedule <name>``), and a
change message that names the action and counts the jobs it acted on: ``requeue: 3
jobs (of 5 asked)``; a worker's order, one entry per queue it works on: ``quiet:
worker host:12:ab01, 2 jobs running``. The entries show in Django's "Recent actions"
and in ``LogEntry.objects.filter(content_type=<the queue's>)``. A message is plain
English text, not translated (an audit reads the same whoever wrote it).
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.http import HttpRequest

from ..models import Queue as QueueModel

#: the log's action flag of each action (any other: a change)
FLAGS = {
    "delete": DELETION,
    "purge": DELETION,
    "remove": DELETION,
    "outbox_discard": DELETION,
    "add": ADDITION,
}
#: longest change message kept
MAX_MESSAGE = 2000


def jobs(n: int) -> str:
    """``1 job``, ``3 jobs``."""
    return f"{n} job" if n == 1 else f"{n} jobs"


def log(request: HttpRequest, target: str, action: str, message: str) -> LogEntry | None:
    """Write the entry of ``action`` on ``target`` (a queue's name, or ``schedule <name>``)
    by the request's user: ``<action>: <message>``. None when the request has no user
    with a primary key (nothing to attribute it to)."""
    user_id = getattr(getattr(request, "user", None), "pk", None)
    if user_id is None:
        return None
    return log_by(user_id, target, action, message)


def log_by(user_id: Any, target: str, action: str, message: str) -> LogEntry:
    """Write the entry of ``action`` on ``target`` by the user of primary key ``user_id``
    (:func:`log` without a request: ``manage.py zqueue_worker_ctl --user``)."""
    return LogEntry.objects.create(
        user_id=user_id,
        content_type=ContentType.objects.get_for_model(QueueModel, for_concrete_model=False),
        object_id=target[:200],
        object_repr=target[:200],
        action_flag=FLAGS.get(action, CHANGE),
        change_message=f"{action}: {message}"[:MAX_MESSAGE],
    )


def acted(request: HttpRequest, queue: str, action: str, done: int, asked: int | None) -> None:
    """An action on jobs of ``queue``: ``done`` acted on, of ``asked`` (None: every job
    that matched, counted as it went)."""
    text = jobs(done) if asked is None or asked == done else f"{jobs(done)} (of {asked} asked)"
    log(request, queue, action, text)


def worker_order(user_id: Any, order: str, worker: str, queues: list[str], running: int) -> None:
    """An order left for a worker: one entry per queue it works on, naming the worker and
    the jobs it held then."""
    for queue in queues:
        log_by(user_id, queue, order, f"worker {worker}, {jobs(running)} running")
