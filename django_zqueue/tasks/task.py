"""``@task``: a function made enqueueable. Enqueueing it returns a
:class:`~django_zqueue.tasks.job.Job` (:mod:`django_zqueue.tasks.job`), a handle on one
enqueued call.

::

    @task(queue="emails", priority=10, max_retries=5)
    def send_welcome(user): ...

    job = send_welcome.enqueue(user)        # after the transaction commits, if in one
    job.rank(); job.score(); job.status()
    send_welcome.enqueue_in(60, user)       # delayed; also enqueue_at(datetime, ...)
    send_welcome.using(priority=50).enqueue(user)
    send_welcome(user)                      # an ordinary call, in-process

The payload is JSON: ``{"task": name, "args": [...], "kwargs": {...}}`` with arguments
encoded by :mod:`django_zqueue.tasks.serializer` (model instances by reference).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, TypeVar, cast, overload

from django.db import transaction

from .. import conf
from ..conf import Backoff
from ..conf.bounds import check_job_options
from ..engine.records.links import OptionalParent
from ..engine.records.spec import JobOptions
from ..exceptions import InvalidArgument
from ..queue import NewJob, Queue, get_queue
from . import lean, oncommit, registry, tracing
from .callcheck import check_call
from .chunk import Chunk, check_chunk, check_item
from .job import Job as Job  # the handle enqueue returns (here too: its first home)
from .options import (
    TASK_OPTIONS,
    by_call,
    call_body,
    call_of,
    keyed,
    of_call,
    seconds,
    taken,
    task_options,
)
from .schedules import Schedule, declare

if TYPE_CHECKING:
    from opentelemetry.trace import Span


log = logging.getLogger("django_zqueue.task")
P = ParamSpec("P")
R = TypeVar("R")


@dataclasses.dataclass(frozen=True)
class Task(Generic[P, R]):
    """A registered task. Frozen: :meth:`using` returns a configured copy."""

    func: Callable[P, R]
    name: str
    queue_name: str = "default"
    #: the options of its jobs (priority, max_retries, visibility_timeout, debounce,
    #: unique_for, expires, ...) as one value, checked once when made; None: the queue's
    options: JobOptions = dataclasses.field(default_factory=JobOptions)
    retry_backoff: Backoff | None = None  # None: the queue's option
    timeout: float | None = None  # seconds a run may take
    tag: Callable[..., str] | None = None  # dedup tag from the call's arguments
    store_result: bool = False
    result_ttl: float = 86400.0
    on_commit: bool | None = None  # None: ZQUEUE["ENQUEUE_ON_COMMIT"]
    on_failure: Callable[..., Any] | None = None  # called as on_failure(job, exc) when dead
    using_db: str | None = None  # database whose transaction to wait for
    isolation: Literal["thread", "process"] | None = None  # None: the worker's --pool
    group: Callable[..., str] | None = None  # group key from the call's arguments
    #: a chunk task: its handler gets many jobs' items at once (``tasks/chunk.py``)
    chunk: Chunk | None = None
    #: ordering key from the call's arguments (docs/job-control.md, "Strict order per key")
    ordering_key: Callable[..., str] | None = None
    aliases: tuple[str, ...] = ()  # old names whose queued jobs it runs (docs/tasks.md)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    @property
    def queue(self) -> Queue:
        return get_queue(self.queue_name)

    # the options of its jobs by name (``options``)
    @property
    def priority(self) -> int:
        return self.options.priority

    @property
    def max_retries(self) -> int | None:
        return self.options.max_retries

    @property
    def visibility_timeout(self) -> float | None:
        return seconds(self.options.visibility_timeout)

    @property
    def debounce(self) -> float | None:
        return cast("float | None", self.options.debounce)

    @property
    def unique_for(self) -> float | None:
        return cast("float | None", self.options.unique_for)

    @property
    def expires(self) -> float | None:
        return cast("float | None", self.options.expires)

    def using(
        self,
        *,
        queue: str | None = None,
        priority: int | None = None,
        tag: Callable[..., str] | str | None = None,
        on_commit: bool | None = None,
        using_db: str | None = None,
        max_retries: int | None = None,
        visibility_timeout: float | None = None,
        debounce: float | None = None,
        unique_for: float | None = None,
        group: Callable[..., str] | str | None = None,
        expires: float | None = None,
        ordering_key: Callable[..., str] | str | None = None,
        on_dead: Literal["block", "skip"] | None = None,
    ) -> Task[P, R]:
        """A copy with other enqueue options (the registered task is unchanged): the
        job options given replace those of ``options`` (``dataclasses.replace``).

        ``tag``, ``group`` and ``ordering_key`` may each be a fixed string for the next
        enqueue or a function of the call's arguments."""
        given = locals()  # the job options by name: a new one is one more parameter here
        job = {n: given[n] for n in TASK_OPTIONS}
        changes: dict[str, Any] = {"options": task_options(self.name, self.options, job)}
        if queue is not None:
            changes["queue_name"] = queue
        if tag is not None:
            changes["tag"] = (lambda *a, **k: tag) if isinstance(tag, str) else tag
        if on_commit is not None:
            changes["on_commit"] = on_commit
        if using_db is not None:
            changes["using_db"] = using_db
        if group is not None:
            changes["group"] = by_call(group, "group", self.name)
        if ordering_key is not None:
            changes["ordering_key"] = by_call(ordering_key, "ordering_key", self.name)
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ enqueueing

    def _body(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return call_body(self.name, args, kwargs)

    def _call_options(
        self,
        kwargs: dict[str, Any],
        *,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
    ) -> dict[str, Any]:
        """A call's own job options, checked by :meth:`_prepare` after the call: its delay,
        run-at, ``expires`` and ``ordering_key`` taken out of its keyword arguments
        (:func:`taken`)."""
        call = {"delay": delay, "run_at": run_at}
        call |= {n: taken(self.func, kwargs, n) for n in ("expires", "ordering_key")}
        return {n: v for n, v in call.items() if v is not None}

    def _new_job(
        self,
        queue: Queue,
        body: Any,
        call: tuple[tuple[Any, ...], Mapping[str, Any]],
        o: JobOptions,
    ) -> NewJob:
        """One call's job: its tag, group and ordering key from the call (Queue.publish's
        errors)."""
        o = keyed(self.name, o, self.group, self.ordering_key, *call)
        return queue.prepare(body, of_call(self.tag, call, "tag", self.name), options=o)

    def _prepare(
        self,
        calls: list[tuple[tuple[Any, ...], Mapping[str, Any]]],
        changes: Mapping[str, Any] | None,
        span: Span | None,
    ) -> tuple[Queue, list[NewJob]]:
        """The jobs of ``calls`` with the task's options and the call's ``changes``, checked
        (the call first; a call's option raises Queue.publish's error) and encoded, each
        body carrying the trace context of ``span`` (:mod:`.tracing`)."""
        for i, (a, k) in enumerate(calls):
            self._check_call(a, k, i if len(calls) > 1 else None)
        if self.options.once and self.tag is None:
            raise InvalidArgument(
                f"task {self.name!r}: debounce and unique_for need a tag: give "
                "@task(tag=...) or .using(tag=...)"
            )
        options = self.options
        if changes:
            if options.debounce is not None and ("delay" in changes or "run_at" in changes):
                raise InvalidArgument(f"task {self.name!r}: debounce sets the run-at: no delay")
            options = dataclasses.replace(options, **changes)
        queue = self.queue
        jobs = []
        for call in calls:
            body = self._body(*call)
            tracing.inject(span, body)
            jobs.append(self._new_job(queue, body, call, options))
        return queue, jobs

    def _check_call(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int | None = None
    ) -> None:
        """``check_call``; a keyword the function does not take that is an option of
        :meth:`using` (``queue=``, ``priority=``, ...) gets a pointer to ``using()``. A
        job of a chunk task is one item: one positional argument."""
        if self.chunk is not None:
            return check_item(self.name, args, kwargs, index)
        try:
            check_call(self.name, self.func, args, kwargs, index)
        except TypeError as exc:
            options = [k for k in kwargs if k in USING_OPTIONS and repr(k) in str(exc)]
            if not options:
                raise
            given = ", ".join(f"{k}=..." for k in options)
            short = self.func.__name__
            raise TypeError(
                f"{exc}; {', '.join(options)}: an option of the enqueue, not an argument of "
                f"the task: set it with using(), e.g. {short}.using({given}).enqueue(...)"
            ) from None

    # ------------------------------------------------------------------ workflows

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature: this task with these arguments, not yet sent (see
        :mod:`django_zqueue.tasks.workflows`). In a chain it gets the previous job's return
        value as its first argument; in a chord's callback, the list of results."""
        return Signature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """An immutable signature: it gets no parent's result."""
        return Signature(self, args, kwargs, immutable=True)

    def prepare_call(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], flow: Mapping[str, Any]
    ) -> NewJob:
        """A workflow job of this task, validated and encoded, not sent. ``flow``: how it
        takes part (``{"in": "one" | "list", "out": 1, "keep": 1}``): with ``in``, a
        parent's result (or the list of them) comes first in its arguments.
        ``InvalidArgument`` for a task with ``debounce`` or ``unique_for``: a workflow
        job is published without those rules, as ``depends_on`` is."""
        if self.options.once or self.ordering_key or self.options.ordering_key:
            what = "debounce or unique_for" if self.options.once else "ordering_key"
            raise InvalidArgument(
                f"task {self.name!r}: a workflow (chain, group, chord) does not go with {what}"
            )
        received = (None,) if flow.get("in") else ()
        self._check_call((*received, *args), kwargs)
        body = {**self._body(args, kwargs), "flow": dict(flow)}
        return self._new_job(self.queue, body, (args, kwargs), self.options)

    def _submit(
        self,
        calls: list[tuple[tuple[Any, ...], Mapping[str, Any]]],
        changes: Mapping[str, Any] | None = None,
        depends_on: Iterable[Any] | None = None,
    ) -> list[Job]:
        """Enqueue ``calls`` with the task's job options and the call's own ``changes``."""
        options = self.options  # its rules of publish_once (a call changes none of them)
        span = tracing.start_send(self.queue_name, self.name, len(calls))
        try:
            # Everything is validated and encoded now, inside the caller's transaction: a
            # bad call raises here and writes nothing, whenever the jobs are sent.
            queue, jobs = self._prepare(calls, changes, span)
            parents = None
            if depends_on is not None:  # one tag or Job, as enqueue(depends_on=...) takes
                alone = isinstance(depends_on, Job | str | OptionalParent)
                parents = [depends_on] if alone else list(depends_on)
            keyed = any(j.spec.ordering_key for j in jobs)
            if parents is not None and (options.once or keyed):
                what = "debounce or unique_for" if options.once else "ordering_key"
                raise InvalidArgument(f"task {self.name!r}: depends_on does not go with {what}")
            deferred = self._send(queue, jobs, options, parents)
        except BaseException as exc:
            tracing.fail_send(span, exc)
            raise
        tracing.end_send(span, queue, [j.tag for j in jobs], deferred=deferred)
        return [Job(j.tag, queue.name, self.name) for j in jobs]

    def _send(
        self, queue: Queue, jobs: list[NewJob], options: JobOptions, parents: list[Any] | None
    ) -> bool:
        """Publish ``jobs`` now, or when the transaction commits (returns True then):
        with ``ZQUEUE["OUTBOX"]``, by writing them to the outbox table in the transaction."""
        config = conf.get_config()
        on_commit = self.on_commit
        if on_commit is None:
            on_commit = config.enqueue_on_commit
        if on_commit and transaction.get_connection(self.using_db).in_atomic_block:
            if config.outbox and parents is None:
                # a row in the caller's transaction: committed with it, published by the
                # relay (outbox.py), never lost when Redis is down at commit
                from . import outbox

                outbox.write(
                    queue.name,
                    self.name,
                    jobs,
                    using=self.using_db,
                    debounce=seconds(options.debounce),
                    unique_for=seconds(options.unique_for),
                )
                return True

            # sent with the transaction's other jobs, in one round trip (oncommit.py); the
            # debounce and unique-for rules and a workflow's links by calls of their own
            alone = None
            if parents is not None or options.once:
                alone = functools.partial(self._publish, queue, jobs, options, parents)
            deferred = oncommit.Deferred(queue, jobs, self.name, alone, outbox=parents is None)
            oncommit.defer(self.using_db, deferred)
            return True
        self._publish(queue, jobs, options, parents)
        return False

    def _publish(
        self, queue: Queue, jobs: list[NewJob], options: JobOptions, parents: list[Any] | None
    ) -> None:
        """Send prepared jobs: in one round trip; each waiting for ``parents``
        (``Queue.publish_after``); or one by one under the debounce and unique-for rules
        of ``options`` (``Queue.publish_once``)."""
        if parents is not None:
            for job in jobs:
                queue.publish_after(job, parents)
            return
        if not options.once:
            queue.publish_prepared(jobs)
            return
        for job in jobs:
            queue.publish_once(job, debounce=options.debounce, unique_for=options.unique_for)

    async def _asubmit(
        self,
        calls: list[tuple[tuple[Any, ...], Mapping[str, Any]]],
        changes: Mapping[str, Any] | None = None,
        depends_on: list[Any] | None = None,
    ) -> list[Job]:
        from ..queue.aio import get_async_queue

        options = self.options  # its rules of publish_once (a call changes none of them)
        span = tracing.start_send(self.queue_name, self.name, len(calls))
        try:
            queue, jobs = self._prepare(calls, changes, span)
            if depends_on is not None and options.once:
                raise InvalidArgument(
                    f"task {self.name!r}: depends_on does not go with debounce or unique_for"
                )
            if depends_on is None and not options.once:
                await get_async_queue(queue.name).publish_prepared(jobs)
            else:  # one script call per job (the once rules, a workflow's links): the sync
                # client, in a thread
                await asyncio.to_thread(self._publish, queue, jobs, options, depends_on)
        except BaseException as exc:
            tracing.fail_send(span, exc)
            raise
        tracing.end_send(span, queue, [j.tag for j in jobs], deferred=False)
        return [Job(j.tag, queue.name, self.name) for j in jobs]

    @functools.cached_property
    def is_async(self) -> bool:
        """True for an ``async def`` task: a worker runs it on its event-loop lane. (Read
        for every job a worker runs: found once per task object, which is frozen.)"""
        return inspect.iscoroutinefunction(self.func)

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """:meth:`enqueue` from asyncio code (redis-py's asyncio client, the same script).

        Published at once: async code holds no open transaction (Django's
        ``transaction.atomic`` is sync-only), so there is no commit to wait for.
        ``depends_on`` as in :meth:`enqueue`."""
        parents, options = self._depends_on(kwargs), self._call_options(kwargs)
        return (await self._asubmit([(args, kwargs)], options, parents))[0]

    async def aenqueue_in(self, delay: float | timedelta, *args: P.args, **kwargs: P.kwargs) -> Job:
        """:meth:`enqueue_in` from asyncio code."""
        options = self._call_options(kwargs, delay=delay)
        return (await self._asubmit([(args, kwargs)], options))[0]

    async def aenqueue_at(self, when: datetime, *args: P.args, **kwargs: P.kwargs) -> Job:
        """:meth:`enqueue_at` from asyncio code."""
        options = self._call_options(kwargs, run_at=when)
        return (await self._asubmit([(args, kwargs)], options))[0]

    def _depends_on(self, kwargs: dict[str, Any]) -> list[Any] | None:
        """``depends_on`` taken out of a call's keyword arguments (:func:`taken`)."""
        parents = taken(self.func, kwargs, "depends_on")
        if parents is None:
            return None
        return [parents] if isinstance(parents, Job | str | OptionalParent) else list(parents)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Put one call in line; returns its :class:`Job`. Inside ``transaction.atomic``
        the job is published when the transaction commits (and never on rollback), with
        the transaction's other jobs in one round trip (:mod:`.oncommit`),
        unless ``on_commit`` is off for this task or in settings; with
        ``ZQUEUE["OUTBOX"]`` it is written to the outbox table in the transaction and
        published by the relay (docs/outbox.md).

        ``depends_on=[job, ...]`` (Job handles, tags of the task's queue or ``(queue,
        tag)`` pairs) makes the job wait (status ``"waiting"``) until every one of them
        has succeeded (docs/workflows.md).

        ``expires=`` (seconds or a timedelta from now, or an aware datetime; default: the
        task's ``expires``): a job not started by then never starts and ends in the state
        ``expired``."""
        job = self._lean.enqueue(args, kwargs)  # a plain call (tasks/lean.py)
        if job is not None:
            return job
        parents, options = self._depends_on(kwargs), self._call_options(kwargs)
        return self._submit([(args, kwargs)], options, parents)[0]

    @functools.cached_property
    def _lean(self) -> lean.Slot:
        return lean.Slot(self)  # (made once per task object, as is_async)

    def enqueue_in(self, delay: float | timedelta, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Like :meth:`enqueue`, to run ``delay`` seconds (or a timedelta) from now."""
        options = self._call_options(kwargs, delay=delay)
        return self._submit([(args, kwargs)], options)[0]

    def enqueue_at(self, when: datetime, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Like :meth:`enqueue`, to run at ``when`` (an aware datetime under USE_TZ)."""
        options = self._call_options(kwargs, run_at=when)
        return self._submit([(args, kwargs)], options)[0]

    def enqueue_many(
        self,
        calls: Iterable[
            tuple[Any, ...] | Mapping[str, Any] | tuple[tuple[Any, ...], Mapping[str, Any]]
        ],
        *,
        depends_on: Iterable[Any] | None = None,
    ) -> list[Job]:
        """Enqueue many calls in one round trip. Each call is a tuple of positional
        arguments, a dict of keyword arguments, or an ``(args, kwargs)`` pair. With
        ``depends_on``, each waits for those jobs (one round trip per call then)."""
        normalised = [call_of(call) for call in calls]
        if not normalised:
            return []
        return self._submit(normalised, depends_on=depends_on)


@dataclasses.dataclass(frozen=True)
class Signature:
    """A task with its arguments, not yet sent: the unit of chains, groups and chords
    (:mod:`django_zqueue.tasks.workflows`). ``immutable`` (``.si()``): it gets no parent's
    result; ``optional`` (``optional(sig)``): its dependents run however it ends (its
    failure passes None)."""

    task: Task[..., Any]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    immutable: bool = False
    optional: bool = False

    def enqueue(self) -> Job:
        """Enqueue this one call, as ``task.enqueue(*args, **kwargs)``."""
        return self.task._submit([(self.args, self.kwargs)])[0]


#: the options of :meth:`Task.using`: a keyword of an enqueue that the task's function
#: does not take and that is one of these is an option given in the wrong place
USING_OPTIONS = frozenset(p for p in inspect.signature(Task.using).parameters if p != "self")

F = TypeVar("F", bound=Callable[..., Any])


@overload
def task(func: Callable[P, R], /) -> Task[P, R]: ...


@overload
def task(
    *,
    name: str | None = None,
    queue: str = "default",
    priority: int = 0,
    max_retries: int | None = None,
    retry_backoff: Mapping[str, float] | Backoff | None = None,
    timeout: float | None = None,
    visibility_timeout: float | None = None,
    tag: Callable[..., str] | None = None,
    group: Callable[..., str] | str | None = None,
    store_result: bool = False,
    result_ttl: float = 86400.0,
    on_commit: bool | None = None,
    on_failure: Callable[..., Any] | None = None,
    cron: str | None = None,
    debounce: float | None = None,
    unique_for: float | None = None,
    isolation: Literal["thread", "process"] | None = None,
    expires: float | None = None,
    chunk: Chunk | None = None,
    ordering_key: Callable[..., str] | str | None = None,
    on_dead: Literal["block", "skip"] | None = None,
    aliases: Sequence[str] = (),
) -> Callable[[Callable[P, R]], Task[P, R]]: ...


def task(func: Any = None, /, **options: Any) -> Any:
    """Register a function as a task; usable bare (``@task``) or with options."""

    def wrap(f: Callable[P, R]) -> Task[P, R]:
        opts = dict(options)  # the same decorator may wrap several functions
        name = opts.pop("name", None) or f"{f.__module__}.{f.__qualname__}"
        backoff = opts.pop("retry_backoff", None)
        if isinstance(backoff, Mapping):
            backoff = conf.queue_options(name, retry_backoff=backoff).retry_backoff
        check_job_options(
            f"task {name!r}",
            max_retries=opts.get("max_retries"),
            visibility_timeout=opts.get("visibility_timeout"),
            retry_backoff=backoff,
        )
        job = {n: opts.pop(n) for n in TASK_OPTIONS if n in opts}
        opts["options"] = task_options(name, JobOptions(), job)  # the one check of them
        if "queue" in opts:
            opts["queue_name"] = opts.pop("queue")
        if opts.get("group") is not None:
            opts["group"] = by_call(opts["group"], "group", name)
        if opts.get("ordering_key") is not None:
            opts["ordering_key"] = by_call(opts["ordering_key"], "ordering_key", name)
        ttl = opts.get("result_ttl", 1.0)
        if (
            isinstance(ttl, bool)
            or not isinstance(ttl, int | float)
            or not 0.001 <= ttl <= 10 * 365 * 86400
        ):
            raise InvalidArgument(f"task {name!r}: result_ttl must be a positive number of seconds")
        timeout = opts.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise InvalidArgument(f"task {name!r}: timeout must be a positive number of seconds")
        if opts.get("isolation") not in (None, "thread", "process"):
            raise InvalidArgument(f"task {name!r}: isolation must be 'thread' or 'process'")
        opts["aliases"] = aliases_of(name, opts.get("aliases", ()))
        cron = opts.pop("cron", None)
        check_chunk(name, f, opts, cron)
        t: Task[P, R] = Task(func=f, name=name, retry_backoff=backoff, **opts)
        registry.register(t)
        if cron is not None:
            declare(
                Schedule(
                    name=t.name, task=t.name, queue=t.queue_name, cron=cron, priority=t.priority
                )
            )
        return t

    if func is not None:
        return wrap(func)
    return wrap


def aliases_of(name: str, given: Any) -> tuple[str, ...]:
    """``@task(aliases=...)`` checked: a list or tuple of distinct non-empty names."""
    if isinstance(given, str) or not isinstance(given, list | tuple):
        raise InvalidArgument(f"task {name!r}: aliases must be a list of task names")
    for alias in given:
        if not isinstance(alias, str) or not alias or len(alias) > 256:
            raise InvalidArgument(
                f"task {name!r}: alias {alias!r} is not a task name (1 to 256 characters)"
            )
    if len(set(given)) != len(given):
        raise InvalidArgument(f"task {name!r}: aliases are given twice")
    return tuple(given)


def registered(name: str) -> Task[..., Any] | None:
    """The registered task ``name`` (autodiscovering ``<app>.tasks`` once), or None."""
    found = registry.get(name)
    return found if isinstance(found, Task) else None
