"""A backend for Django's Tasks framework (``django.tasks``; the ``django-tasks`` backport
on Django 5.2), running on the same queues and workers as ``@task``::

    TASKS = {
        "default": {
            "BACKEND": "django_zqueue.backends.ZQueueBackend",
            "QUEUES": ["default", "emails"],          # names from ZQUEUE["QUEUES"]
            "OPTIONS": {"RESULT_TTL": 86400, "ENQUEUE_ON_COMMIT": False},
        }
    }

Django's semantics by default: a task that raises is FAILED after one attempt. Retries are
opt-in: ``OPTIONS["MAX_RETRIES"]`` (reruns after the first attempt) and
``OPTIONS["RETRY_BACKOFF"]`` (``{"base", "max", "jitter"}``; the queue's by default).

Finding a task (the worker and :meth:`ZQueueBackend.get_result` alike, :func:`find`): the
job names a module path and the alias it was enqueued with; the alias must be a
ZQueueBackend, the path is imported (narrowed by ``OPTIONS["TASK_MODULES"]`` if set) and
the object must be a ``Task`` of ``django.tasks`` or of the backport. Anything else is
refused: the job is dead and its result FAILED with one ``TaskError`` saying why.

A Django task's ``queue_name`` is the django_zqueue queue of the same name; its priority
(-100..100, higher first) is the job's priority, so ``rank()`` and ``score()`` work on it
(:func:`task_rank`). The result id is the job's tag.

Where a result lives: while the job is in a queue, its state there is the truth (READY
while ready or delayed, RUNNING while leased, FAILED once dead), and a record under the
job's result key carries what the worker learnt (worker ids, start times, errors). When
the job finishes, the worker writes the final record in the same script call as the ack,
kept for ``RESULT_TTL`` seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from ... import conf
from ...engine.records import ENDED
from ...exceptions import ConfigurationError
from ...queue import Queue, get_queue, new_tag
from .. import oncommit
from .compat import (
    FRAMEWORKS,
    TASK_CLASSES,
    AnyResult,
    AnyTask,
    BaseTaskBackend,
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    framework_of,
    task_backends,
)

log = logging.getLogger("django_zqueue.backends")

#: marks a payload as a Django Tasks call (the worker dispatches on it)
MARKER = "django_task"
OPTION_KEYS = {"RESULT_TTL", "ENQUEUE_ON_COMMIT", "MAX_RETRIES", "RETRY_BACKOFF", "TASK_MODULES"}


class UnsafeTaskPath(TaskResultDoesNotExist, SuspiciousOperation):
    """A stored job names something that is not a task this backend may run: no result
    is built from it. Both a ``TaskResultDoesNotExist`` (callers handling a missing result
    carry on) and a ``SuspiciousOperation`` (Django logs it to ``django.security``)."""


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


class ZQueueBackend(BaseTaskBackend):
    """Runs Django tasks on django_zqueue. Construction is cheap: no Redis connection and
    no app-registry access until the first enqueue or result lookup."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        ttl = self.options.get("RESULT_TTL", 86400)
        # a bad value is reported by check() (E102); construction must not fail
        self.result_ttl = float(ttl) if isinstance(ttl, int | float) and ttl > 0 else 86400.0
        self.enqueue_on_commit = bool(self.options.get("ENQUEUE_ON_COMMIT", False))
        retries = self.options.get("MAX_RETRIES", 0)
        #: reruns after a first failed attempt (0: Django's semantics, one attempt)
        self.max_retries: int = (
            retries
            if isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0
            else 0
        )
        #: the delay before each rerun; None: the queue's ``retry_backoff``
        self.retry_backoff: conf.Backoff | None = None
        raw_backoff = self.options.get("RETRY_BACKOFF")
        if raw_backoff is not None:
            with contextlib.suppress(ConfigurationError):
                self.retry_backoff = conf.queue_options(retry_backoff=raw_backoff).retry_backoff
        modules = self.options.get("TASK_MODULES")
        #: module prefixes a task path must be in; None: any importable module
        self.task_modules: tuple[str, ...] | None = (
            tuple(modules)
            if isinstance(modules, list | tuple) and all(isinstance(m, str) for m in modules)
            else None
        )

    # ------------------------------------------------------------------ checks

    def check(self, **kwargs: Any) -> list[Any]:
        return list(super().check(**kwargs)) + list(self._check_options())

    def _check_options(self) -> Iterable[checks.CheckMessage]:
        yield from self._check_option_keys()
        yield from self._check_result_options()
        yield from self._check_retry_options()
        yield from self._check_task_modules()
        yield from self._check_queues()

    def _check_option_keys(self) -> Iterable[checks.CheckMessage]:
        unknown = set(self.options) - OPTION_KEYS
        if unknown:
            yield checks.Error(
                f"TASKS[{self.alias!r}]['OPTIONS'] has unknown key(s) {sorted(unknown)}.",
                hint=f"Known: {', '.join(sorted(OPTION_KEYS))}.",
                id="django_zqueue.E101",
            )

    def _check_result_options(self) -> Iterable[checks.CheckMessage]:
        """RESULT_TTL (E102) and ENQUEUE_ON_COMMIT (E103)."""
        ttl = self.options.get("RESULT_TTL", 86400)
        if (
            isinstance(ttl, bool)
            or not isinstance(ttl, int | float)
            or not 1 <= ttl <= 10 * 365 * 86400
        ):
            yield checks.Error(
                f"TASKS[{self.alias!r}]['OPTIONS']['RESULT_TTL'] must be seconds in [1, 10 years].",
                hint="Default: 86400 (one day).",
                id="django_zqueue.E102",
            )
        if not isinstance(self.options.get("ENQUEUE_ON_COMMIT", False), bool):
            yield checks.Error(
                f"TASKS[{self.alias!r}]['OPTIONS']['ENQUEUE_ON_COMMIT'] must be True or False.",
                hint="Default: False (enqueue at once, as Django's framework specifies).",
                id="django_zqueue.E103",
            )

    def _check_retry_options(self) -> Iterable[checks.CheckMessage]:
        """MAX_RETRIES (E105) and RETRY_BACKOFF (E106)."""
        retries = self.options.get("MAX_RETRIES", 0)
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 1000:
            yield checks.Error(
                f"TASKS[{self.alias!r}]['OPTIONS']['MAX_RETRIES'] must be an integer in [0, 1000].",
                hint="Default: 0 (a task that raises is FAILED, as Django's framework specifies).",
                id="django_zqueue.E105",
            )
        raw_backoff = self.options.get("RETRY_BACKOFF")
        if raw_backoff is not None:
            try:
                conf.queue_options(retry_backoff=raw_backoff)
            except ConfigurationError as exc:
                yield checks.Error(
                    f"TASKS[{self.alias!r}]['OPTIONS']['RETRY_BACKOFF'] is invalid: {exc}",
                    hint="A dict such as {'base': 1, 'max': 300, 'jitter': 0.2}.",
                    id="django_zqueue.E106",
                )

    def _check_task_modules(self) -> Iterable[checks.CheckMessage]:
        modules = self.options.get("TASK_MODULES")
        if modules is not None and (
            not isinstance(modules, list | tuple)
            or not modules
            or not all(isinstance(m, str) and m and not m.endswith(".") for m in modules)
        ):
            yield checks.Error(
                f"TASKS[{self.alias!r}]['OPTIONS']['TASK_MODULES'] must be a non-empty list of "
                "module names.",
                hint="For example ['myproject', 'wagtail', 'modelsearch']; default: None (any).",
                id="django_zqueue.E107",
            )

    def _check_queues(self) -> Iterable[checks.CheckMessage]:
        """The queues of ``QUEUES`` are in ``ZQUEUE['QUEUES']`` (E104), unless the checks
        of ZQUEUE report that it cannot be read."""
        configured, problems = conf.parse(getattr(settings, "ZQUEUE", None))
        unreadable = {"django_zqueue.E001", "django_zqueue.E004", "django_zqueue.E005"}
        missing = sorted(set(self.queues) - set(configured.queues))
        if missing and not unreadable.intersection(p.id for p in problems):
            yield checks.Error(
                f"TASKS[{self.alias!r}]['QUEUES'] names queue(s) {missing} that are not in "
                "ZQUEUE['QUEUES'].",
                hint="Every Django task queue is a django_zqueue queue: configure it there.",
                id="django_zqueue.E104",
            )

    # ------------------------------------------------------------------ enqueue

    def validate_task(self, task: AnyTask) -> None:
        try:
            super().validate_task(task)
        except InvalidTask:
            raise
        except Exception as exc:
            # the other framework's InvalidTask: raise one that both frameworks' catch
            if any(isinstance(exc, f.InvalidTask) for f in FRAMEWORKS):
                raise InvalidTask(str(exc)) from None
            raise

    def enqueue(self, task: AnyTask, args: Any, kwargs: Any) -> AnyResult:  # type: ignore[override]
        self.validate_task(task)
        # QUEUES = [] lets any queue name through validate_task, as Django specifies; a
        # name must still be a django_zqueue queue to be enqueued.
        if task.queue_name not in conf.get_config().queues:
            raise InvalidTask(f"Queue {task.queue_name!r} is not configured in ZQUEUE['QUEUES'].")
        queue = get_queue(task.queue_name)
        fw = framework_of(task)
        result = fw.TaskResult(
            task=task,
            id=new_tag(),
            status=fw.TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        body = {
            "task": task.module_path,
            MARKER: {
                "backend": self.alias,
                "priority": task.priority,
                "queue_name": task.queue_name,
                "run_after": _iso(task.run_after),
                "takes_context": task.takes_context,
                "enqueued_at": _iso(result.enqueued_at),
            },
            "args": result.args,
            "kwargs": result.kwargs,
        }
        # The job's retries: this backend's MAX_RETRIES for attempts that raise (counted by
        # the worker, retries_spent()), plus the queue's max_retries for deliveries lost
        # to a worker that died (its lease expired), which raised nothing.
        retries = self.max_retries + queue.options.max_retries
        job = queue.prepare(
            body, result.id, task.priority, run_at=task.run_after, max_retries=retries
        )

        enqueued = functools.partial(fw.task_enqueued.send, type(self), task_result=result)
        if self.enqueue_on_commit and transaction.get_connection().in_atomic_block:
            # sent with the transaction's other jobs, in one round trip (oncommit.py)
            deferred = oncommit.Deferred(queue, [job], task.module_path, then=enqueued)
            oncommit.defer(None, deferred)
        else:
            queue.publish_prepared([job])
            enqueued()
        return result  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ finding a task

    def resolve(self, path: object) -> AnyTask | str:
        """The ``Task`` a job's path names, or why it is refused. Django's rule: import
        the path (a module within ``TASK_MODULES`` if that is set) and accept only a Task
        of ``django.tasks`` or of the backport; nothing else is returned, let alone run."""
        if not isinstance(path, str) or "." not in path.strip("."):
            return f"unknown task {path!r}: not a module path"
        module = path.rpartition(".")[0]
        if self.task_modules is not None and not any(
            module == p or module.startswith(p + ".") for p in self.task_modules
        ):
            return (
                f"unknown task {path!r}: module {module!r} is not within "
                f"TASKS[{self.alias!r}]['OPTIONS']['TASK_MODULES']"
            )
        try:
            obj = import_string(path)
        except Exception as exc:  # an import can raise anything
            return f"unknown task {path!r}: cannot be imported ({type(exc).__name__}: {exc})"
        if not isinstance(obj, TASK_CLASSES):
            return (
                f"unknown task {path!r}: not a Task of django.tasks or django_tasks "
                f"(a {type(obj).__module__}.{type(obj).__qualname__})"
            )
        return obj  # type: ignore[return-value]

    def retries_spent(self, record: Mapping[str, Any]) -> bool:
        """Whether a run that just raised (recorded in ``record``) is the last: it is,
        unless fewer than ``MAX_RETRIES`` reruns followed a raising attempt so far."""
        return len(record.get("errors", [])) > self.max_retries

    def retry_delay(self, attempt: int, default: float) -> float:
        """Seconds before the rerun that follows failed attempt ``attempt``."""
        return default if self.retry_backoff is None else self.retry_backoff.delay(attempt)

    # ------------------------------------------------------------------ results

    def get_result(self, result_id: str) -> AnyResult:
        if not isinstance(result_id, str) or not result_id:
            raise TaskResultDoesNotExist(result_id)
        # QUEUES = [] accepts any configured queue, so the result may be in any of them
        names = self.queues or set(conf.get_config().queues)
        queues = [get_queue(name) for name in sorted(names)]
        batch = queues[0].engine.batch()
        reads = []
        for q in queues:
            info_call, at = q.engine.positions.add_job_read(batch, result_id)
            reads.append((q, info_call, at))
        replies = queues[0].engine.send(batch)
        for q, info_call, at in reads:
            record_raw = replies[at]
            if isinstance(record_raw, Exception):
                raise record_raw
            record = json.loads(record_raw) if record_raw else None
            info = info_call.result()
            if info is None and record is None:
                continue
            return self._build(result_id, q, info, record)
        raise TaskResultDoesNotExist(result_id)

    def _build(
        self, result_id: str, q: Queue, info: Any, record: dict[str, Any] | None
    ) -> AnyResult:
        if info is not None and isinstance(info.body, dict) and MARKER in info.body:
            spec = {**info.body[MARKER], "path": info.body["task"]}
            args, kwargs = info.body.get("args", []), info.body.get("kwargs", {})
        elif record is not None:
            spec, args, kwargs = record["task"], record["args"], record["kwargs"]
        else:
            raise TaskResultDoesNotExist(result_id)
        if info is not None and info.state in ENDED:  # kept in the history of finished jobs:
            # the job is gone from the queue, so its result record answers, as after an ack
            # without a history (a record expired or never written: from its end)
            if record is None:
                record = {"status": "SUCCESSFUL" if info.state == "succeeded" else "FAILED"}
            info = None
        record = record or {}
        if info is not None:  # while the job is in a queue, its state there is the truth
            status = {
                "ready": TaskResultStatus.READY,
                "delayed": TaskResultStatus.READY,
                "leased": TaskResultStatus.RUNNING,
                "dead": TaskResultStatus.FAILED,
            }.get(info.state, TaskResultStatus.READY)
        else:
            status = TaskResultStatus(record["status"])
        found = find(spec["path"], spec.get("backend", self.alias))
        backend = found.backend or self  # an alias gone from TASKS: this one's rule
        obj = backend.resolve(spec["path"]) if found.backend is None else found.task
        if obj is None or isinstance(obj, str):
            raise UnsafeTaskPath(f"result {result_id!r}: {found.reason if obj is None else obj}")
        # the task as enqueued (no validation against today's settings: it is history)
        task = _replaced(
            obj,
            priority=spec.get("priority", 0),
            queue_name=spec.get("queue_name", q.name),
            backend=backend.alias,
            run_after=_dt(spec.get("run_after")),
        )
        fw = framework_of(task)
        result = fw.TaskResult(
            task=task,
            id=result_id,
            status=fw.TaskResultStatus(status.value),
            enqueued_at=_dt(spec.get("enqueued_at")),
            started_at=_dt(record.get("started_at")),
            last_attempted_at=_dt(record.get("last_attempted_at")),
            finished_at=_dt(record.get("finished_at")),
            args=args,
            kwargs=kwargs,
            backend=backend.alias,
            errors=[fw.TaskError(**e) for e in record.get("errors", [])],
            worker_ids=list(record.get("worker_ids", [])),
        )
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", record.get("return_value"))
        return result  # type: ignore[no-any-return]


def _replaced(task: Any, **changes: Any) -> Any:
    """A copy of a (frozen) Task with fields changed, without re-validating it."""
    new = object.__new__(type(task))
    for f in dataclasses.fields(task):
        object.__setattr__(new, f.name, changes.get(f.name, getattr(task, f.name)))
    return new


def task_rank(result: AnyResult | str, backend: str = "default") -> tuple[int | None, float | None]:
    """(rank, score) of a waiting Django task, from its ``TaskResult`` or id; (None, None)
    unless it is waiting ready in its queue."""
    if isinstance(result, str):
        result = task_backends[backend].get_result(result)
    q = get_queue(result.task.queue_name)
    if q.partitions > 1:  # the global rank: one read per partition
        return q.rank(result.id), q.score(result.id)
    return q.engine.positions.ready_standing(result.id)


# ---------------------------------------------------------------------- worker side


@dataclass(frozen=True)
class Found:
    """What a job names: the task to run, or (``task`` is None) why it is refused."""

    task: AnyTask | None
    backend: ZQueueBackend | None  # the job's alias, when that is a ZQueueBackend
    reason: str = ""

    @property
    def refused(self) -> bool:
        return self.task is None

    def record_refusal(self, q: Queue, result_id: str, body: Any, worker_id: str) -> None:
        """Store the refused job's result: FAILED, with one TaskError saying why."""
        spec = body.get(MARKER) if isinstance(body, Mapping) else None
        now = now_iso()
        record = {
            "task": {
                **(spec if isinstance(spec, Mapping) else {}),
                "path": body.get("task") if isinstance(body, Mapping) else None,
            },
            "args": body.get("args", []) if isinstance(body, Mapping) else [],
            "kwargs": body.get("kwargs", {}) if isinstance(body, Mapping) else {},
            "status": "FAILED",
            "started_at": now,
            "last_attempted_at": now,
            "finished_at": now,
            "worker_ids": [worker_id],
            "errors": [refusal_error(self.reason)],
        }
        ttl = self.backend.result_ttl if self.backend is not None else 86400.0
        store_record(q, result_id, record, ttl)


def find(path: object, alias: object) -> Found:
    """Django's rule for finding a job's task, as the worker and ``get_result`` apply it:
    the alias the job was enqueued with must be a ZQueueBackend, and the path must name a
    ``Task`` under that alias's :meth:`ZQueueBackend.resolve` rule."""
    try:
        backend = task_backends[alias]  # type: ignore[index]
    except Exception as exc:
        reason = f"task {path!r}: backend alias {alias!r} is not in TASKS ({exc})"
        return Found(None, None, reason)
    if not isinstance(backend, ZQueueBackend):
        reason = (
            f"task {path!r}: backend alias {alias!r} is a "
            f"{type(backend).__module__}.{type(backend).__qualname__}, not a ZQueueBackend"
        )
        return Found(None, None, reason)
    obj = backend.resolve(path)
    if isinstance(obj, str):
        return Found(None, backend, obj)
    return Found(obj, backend)


def find_for_job(body: Mapping[str, Any]) -> Found:
    """:func:`find` for a job body written by :meth:`ZQueueBackend.enqueue`."""
    spec = body.get(MARKER)
    alias = spec.get("backend", "default") if isinstance(spec, Mapping) else "default"
    return find(body.get("task"), alias)


def resolve(path: str, alias: str = "default") -> AnyTask | None:
    """The ``Task`` at ``path`` under alias ``alias``'s rule (:func:`find`), or None."""
    return find(path, alias).task


def refusal_error(reason: str) -> dict[str, str]:
    """The recorded TaskError of a refused job (the framework's InvalidTask)."""
    invalid = FRAMEWORKS[0].InvalidTask
    return {
        "exception_class_path": f"{invalid.__module__}.{invalid.__qualname__}",
        "traceback": f"{invalid.__module__}.{invalid.__qualname__}: {reason}\n",
    }


def error_entry(exc: BaseException) -> dict[str, str]:
    """The recorded TaskError of an exception raised by a task (call inside the handler)."""
    return {
        "exception_class_path": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "traceback": traceback.format_exc(),
    }


def context_for(task_result: AnyResult) -> Any:
    """The ``TaskContext`` of the task's own framework."""
    return framework_of(task_result.task).TaskContext(task_result=task_result)


def record_for(body: Mapping[str, Any], previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """The result record of a job, carrying over what earlier attempts learnt."""
    spec = {**body[MARKER], "path": body["task"]}
    record: dict[str, Any] = {
        "task": spec,
        "args": body.get("args", []),
        "kwargs": body.get("kwargs", {}),
        "status": TaskResultStatus.READY,
        "started_at": None,
        "last_attempted_at": None,
        "finished_at": None,
        "worker_ids": [],
        "errors": [],
    }
    if previous:
        for key in ("started_at", "worker_ids", "errors"):
            record[key] = previous.get(key, record[key])
    return record


def result_from_record(result_id: str, record: Mapping[str, Any]) -> AnyResult:
    """A ``TaskResult`` for signals sent by the worker."""
    found = find(record["task"]["path"], record["task"].get("backend", "default"))
    backend = found.backend
    assert backend is not None, found.reason
    return backend._build(result_id, get_queue(record["task"]["queue_name"]), None, dict(record))


def now_iso() -> str:
    return timezone.now().isoformat()


def start_record(
    q: Queue, result_id: str, body: Mapping[str, Any], worker_id: str, ttl: float
) -> dict[str, Any]:
    """Mark a run as started: worker id appended, times set, status RUNNING; stored
    before the task runs."""
    previous_raw = q.engine.results.raw(result_id)
    record = record_for(body, json.loads(previous_raw) if previous_raw else None)
    now = now_iso()
    record["started_at"] = record["started_at"] or now
    record["last_attempted_at"] = now
    record["worker_ids"].append(worker_id)
    record["status"] = "RUNNING"
    store_record(q, result_id, record, ttl)
    return record


def store_record(q: Queue, result_id: str, record: Mapping[str, Any], ttl: float) -> None:
    q.engine.results.store(result_id, json.dumps(record), max(1, int(ttl * 1000)))


def send_started(task_result: AnyResult) -> None:
    signal = framework_of(task_result.task).task_started
    _robust(signal, type(task_result.task.get_backend()), task_result=task_result)


def send_finished(result_id: str, record: Mapping[str, Any]) -> None:
    result = result_from_record(result_id, record)
    signal = framework_of(result.task).task_finished
    _robust(signal, type(result.task.get_backend()), task_result=result)


def _robust(signal: Any, sender: Any, **kwargs: Any) -> None:
    """Send a signal; a failing receiver is logged and cannot strand the job."""
    for receiver, outcome in signal.send_robust(sender, **kwargs):
        if isinstance(outcome, Exception):
            log.error("event=signal_receiver_error receiver=%r error=%r", receiver, outcome)
