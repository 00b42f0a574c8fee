"""The common enqueue: one call of a task with its default options, outside a
transaction that holds it back and with no tracer recording, sent as one publish made
once per task and queue (:class:`~django_zqueue.engine.lean.LeanPublish`) instead of
through the general path (``Task._submit``: the options of each call, a span, a spec per
job, the choice of script). It writes what the general path writes, byte for byte; any
other call takes the general path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import transaction

from .. import conf
from ..engine.lean import LeanPublish
from ..engine.records import encode_body, new_tag
from ..engine.records.spec import JobOptions
from ..exceptions import InvalidArgument
from ..queue import Queue
from . import tracing
from .callcheck import check_call
from .job import Job
from .options import call_body

__all__ = ["CALL_OPTIONS", "Plan", "Slot", "enqueue", "make_plan"]


class LeanTask(Protocol):
    """What the common enqueue reads of a task (``Task`` is one)."""

    @property
    def func(self) -> Callable[..., Any]: ...
    @property
    def name(self) -> str: ...
    @property
    def options(self) -> JobOptions: ...
    @property
    def tag(self) -> Callable[..., str] | None: ...
    @property
    def group(self) -> Callable[..., str] | str | None: ...
    @property
    def ordering_key(self) -> Callable[..., str] | str | None: ...
    @property
    def chunk(self) -> object | None: ...
    @property
    def on_commit(self) -> bool | None: ...
    @property
    def using_db(self) -> str | None: ...
    @property
    def queue(self) -> Queue: ...


#: the keyword arguments an enqueue takes as the job's options (when the task's function
#: has no parameter of that name): a call that gives one takes the general path
CALL_OPTIONS = frozenset({"expires", "ordering_key", "depends_on"})


@dataclass(frozen=True, slots=True)
class Plan:
    """A task's lean publish in ``queue`` (the queue object of the settings it was made
    under); ``send`` None: every job of the task takes the general path."""

    queue: Queue
    send: LeanPublish | None


def make_plan(task: LeanTask, queue: Queue) -> Plan:
    """The lean publish of ``task``'s jobs in ``queue``: none for a chunk task, a task
    whose tag, group or ordering key comes with each call, one with debounce or
    unique_for, or options or a queue the lean publish does not take."""
    if (
        task.chunk is not None
        or task.tag is not None
        or task.group is not None
        or task.ordering_key is not None
        or task.options.once
    ):
        return Plan(queue, None)
    try:  # (the queue's retries where the task sets none; Queue.prepare's spec)
        spec = task.options.job_spec(queue.options.max_retries)
    except InvalidArgument:  # the general path raises it
        return Plan(queue, None)
    return Plan(queue, queue.engine.writes.lean(spec, queue.options.max_payload_bytes))


def enqueue(
    task: LeanTask, plan: Plan, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> Job | None:
    """Publish ``task(*args, **kwargs)`` by its lean publish: its :class:`Job`; None
    (nothing sent) where the general path must take the call: no lean publish, a tracer
    recording (the call gets a span), a transaction that holds the job until it commits,
    a call that does not bind (the general path raises its error), or a body the lean
    publish does not take."""
    send = plan.send
    if send is None or tracing.sending():
        return None
    on_commit = task.on_commit
    if on_commit is None:
        on_commit = conf.get_config().enqueue_on_commit
    if on_commit and transaction.get_connection(task.using_db).in_atomic_block:
        return None
    try:
        check_call(task.name, task.func, args, kwargs)
    except TypeError:
        return None
    body = encode_body(call_body(task.name, args, kwargs))  # (Task._body's)
    tag = new_tag()
    if not send(tag, body):
        return None
    return Job(tag, plan.queue.name, task.name)


class Slot:
    """A task's lean publish (``Task._lean``), made for its queue as now configured and
    made again when the settings give a new queue object."""

    __slots__ = ("_plan", "_task")

    def __init__(self, task: LeanTask) -> None:
        self._task = task
        self._plan: Plan | None = None

    def plan(self) -> Plan:
        """The plan for the task's queue as now configured (made again for a new one)."""
        queue = self._task.queue
        plan = self._plan
        if plan is None or plan.queue is not queue:
            plan = self._plan = make_plan(self._task, queue)
        return plan

    def enqueue(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Job | None:
        """:func:`enqueue` of a call that gives no option (:data:`CALL_OPTIONS`); None
        where the general path takes the call."""
        if kwargs.keys() & CALL_OPTIONS:
            return None
        return enqueue(self._task, self.plan(), args, kwargs)
