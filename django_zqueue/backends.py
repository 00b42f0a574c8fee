"""A backend for Django's Tasks framework (``django.tasks``; the ``django-tasks`` backport
on Django 5.2), running on the same queues and workers as ``@task``::

    TASKS = {
        "default": {
            "BACKEND": "django_zqueue.backends.ZQueueBackend",
            "QUEUES": ["default", "emails"],          # names from ZQUEUE["QUEUES"]
            "OPTIONS": {"RESULT_TTL": 86400, "ENQUEUE_ON_COMMIT": False},
        }
    }

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

import json
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from . import conf
from ._django_tasks import (
    AnyResult,
    AnyTask,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
)
from .queue import Queue, get_queue, new_tag

log = logging.getLogger("django_zqueue.backends")

#: marks a payload as a Django Tasks call (the worker dispatches on it)
MARKER = "django_task"
OPTION_KEYS = {"RESULT_TTL", "ENQUEUE_ON_COMMIT"}


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

    # ------------------------------------------------------------------ checks

    def check(self, **kwargs: Any) -> list[Any]:
        return list(super().check(**kwargs)) + list(self._check_options())

    def _check_options(self) -> Iterable[checks.CheckMessage]:
        unknown = set(self.options) - OPTION_KEYS
        if unknown:
            yield checks.Error(
                f"TASKS[{self.alias!r}]['OPTIONS'] has unknown key(s) {sorted(unknown)}.",
                hint=f"Known: {', '.join(sorted(OPTION_KEYS))}.",
                id="django_zqueue.E101",
            )
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

    def enqueue(self, task: AnyTask, args: Any, kwargs: Any) -> AnyResult:  # type: ignore[override]
        self.validate_task(task)
        # QUEUES = [] lets any queue name through validate_task, as Django specifies; a
        # name must still be a django_zqueue queue to be enqueued.
        if task.queue_name not in conf.get_config().queues:
            raise InvalidTask(f"Queue {task.queue_name!r} is not configured in ZQUEUE['QUEUES'].")
        queue = get_queue(task.queue_name)
        result = TaskResult(
            task=task,
            id=new_tag(),
            status=TaskResultStatus.READY,
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
        job = queue.prepare(body, result.id, task.priority, run_at=task.run_after)

        def send() -> None:
            queue.publish_prepared([job])
            task_enqueued.send(type(self), task_result=result)

        if self.enqueue_on_commit and transaction.get_connection().in_atomic_block:
            transaction.on_commit(send, robust=True)
        else:
            send()
        return result

    # ------------------------------------------------------------------ results

    def get_result(self, result_id: str) -> AnyResult:
        if not isinstance(result_id, str) or not result_id:
            raise TaskResultDoesNotExist(result_id)
        # QUEUES = [] accepts any configured queue, so the result may be in any of them
        names = self.queues or set(conf.get_config().queues)
        queues = [get_queue(name) for name in sorted(names)]
        batch = queues[0].batch()
        reads = []
        for q in queues:
            shard = q.shard_for(result_id)  # the job's partition (the queue's own if one)
            info_call = batch.add(shard.info(result_id, True))
            reads.append((q, info_call, batch.command("get", shard.keys.result(result_id))))
        replies = queues[0].send(batch)
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
        func = import_string(spec["path"])
        task = task_backends[spec.get("backend", self.alias)].task_class(
            func=getattr(func, "func", func),
            priority=spec.get("priority", 0),
            queue_name=spec.get("queue_name", q.name),
            backend=spec.get("backend", self.alias),
            run_after=_dt(spec.get("run_after")),
            takes_context=spec.get("takes_context", False),
        )
        result = TaskResult(
            task=task,
            id=result_id,
            status=status,
            enqueued_at=_dt(spec.get("enqueued_at")),
            started_at=_dt(record.get("started_at")),
            last_attempted_at=_dt(record.get("last_attempted_at")),
            finished_at=_dt(record.get("finished_at")),
            args=args,
            kwargs=kwargs,
            backend=spec.get("backend", self.alias),
            errors=[TaskError(**e) for e in record.get("errors", [])],
            worker_ids=list(record.get("worker_ids", [])),
        )
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", record.get("return_value"))
        return result


def task_rank(result: AnyResult | str, backend: str = "default") -> tuple[int | None, float | None]:
    """(rank, score) of a waiting Django task, from its ``TaskResult`` or id; (None, None)
    unless it is waiting ready in its queue."""
    if isinstance(result, str):
        result = task_backends[backend].get_result(result)
    q = get_queue(result.task.queue_name)
    if q.partitions > 1:  # the global rank: one read per partition
        return q.rank(result.id), q.score(result.id)
    pipe = q.client.pipeline(transaction=False)
    pipe.zrank(q.keys.ready, result.id)
    pipe.zscore(q.keys.ready, result.id)
    rank, score = pipe.execute()
    return (None if rank is None else int(rank), None if score is None else float(score))


# ---------------------------------------------------------------------- worker side


def resolve(path: str) -> AnyTask | None:
    """The Django ``Task`` at ``path``, if ``path`` is a module of an installed app and
    names a Task object; None otherwise. Nothing else is imported from a payload."""
    module = path.rpartition(".")[0]
    if not any(
        module == cfg.name or module.startswith(cfg.name + ".") for cfg in apps.get_app_configs()
    ):
        return None
    try:
        obj = import_string(path)
    except ImportError:
        return None
    return obj if isinstance(obj, Task) else None


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
    backend = task_backends[record["task"].get("backend", "default")]
    assert isinstance(backend, ZQueueBackend)
    return backend._build(result_id, get_queue(record["task"]["queue_name"]), None, dict(record))


def now_iso() -> str:
    return timezone.now().isoformat()


def start_record(
    q: Queue, result_id: str, body: Mapping[str, Any], worker_id: str, ttl: float
) -> dict[str, Any]:
    """Mark a run as started: worker id appended, times set, status RUNNING; stored
    before the task runs."""
    previous_raw = q.client.get(q.keys_for(result_id).result(result_id))
    record = record_for(body, json.loads(previous_raw) if previous_raw else None)
    now = now_iso()
    record["started_at"] = record["started_at"] or now
    record["last_attempted_at"] = now
    record["worker_ids"].append(worker_id)
    record["status"] = "RUNNING"
    store_record(q, result_id, record, ttl)
    return record


def store_record(q: Queue, result_id: str, record: Mapping[str, Any], ttl: float) -> None:
    q.client.set(
        q.keys_for(result_id).result(result_id), json.dumps(record), px=max(1, int(ttl * 1000))
    )


def send_started(task_result: AnyResult) -> None:
    from ._django_tasks import task_started

    _robust(task_started, type(task_result.task.get_backend()), task_result=task_result)


def send_finished(result_id: str, record: Mapping[str, Any]) -> None:
    from ._django_tasks import task_finished

    result = result_from_record(result_id, record)
    _robust(task_finished, type(result.task.get_backend()), task_result=result)


def _robust(signal: Any, sender: Any, **kwargs: Any) -> None:
    """Send a signal; a failing receiver is logged and cannot strand the job."""
    for receiver, outcome in signal.send_robust(sender, **kwargs):
        if isinstance(outcome, Exception):
            log.error("event=signal_receiver_error receiver=%r error=%r", receiver, outcome)
