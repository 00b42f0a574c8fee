"""What a test sees of the jobs enqueued (docs/testing.md): :class:`EnqueuedJob`, read
through the queues' read side, and how a job is matched against what a test expects
(task, args, kwargs, queue)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..engine.records import JobInfo
from ..queue import Queue
from ..tasks.django_tasks.backend import MARKER
from ..tasks.serializer import decode_call, encode_call

#: the states of a job that has not ended, as listed
LIVE_STATES = ("ready", "delayed", "leased")
#: most jobs listed per queue and state
LIST_LIMIT = 1000


@dataclass(frozen=True)
class EnqueuedJob:
    """One job not ended yet, as a test sees it."""

    id: str
    task: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    queue: str
    state: str  # ready, delayed, leased (running), or waiting (for its workflow parents)
    priority: int
    run_at: datetime | None  # while delayed: when it is due
    group: str | None
    #: the arguments as they travel (JSON), compared with what a test expects
    raw_args: Any = None
    raw_kwargs: Any = None
    #: a task of Django's Tasks framework (its arguments travel as plain JSON)
    django_task: bool = False

    @property
    def tag(self) -> str:
        """The job's tag in its queue (its id; ``@task(tag=...)`` chooses it)."""
        return self.id

    def __str__(self) -> str:
        call = ", ".join(
            [*(repr(a) for a in self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())]
        )
        extra = f", run_at={self.run_at.isoformat()}" if self.run_at else ""
        return f"{self.task}({call}) [queue={self.queue}, {self.state}{extra}, id={self.id}]"


def task_name(task: Any) -> str:
    """The name a job's body carries for ``task``: a ``@task`` (its ``name``), a task of
    Django's Tasks framework (its ``module_path``), or a name given as text."""
    if isinstance(task, str):
        return task
    path = getattr(task, "module_path", None)
    if isinstance(path, str) and not hasattr(task, "options"):  # django.tasks' Task
        return path
    name = getattr(task, "name", None)
    if isinstance(name, str):
        return name
    raise TypeError(f"expected a task or a task name, got {task!r}")


def _decoded(body: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A body's arguments as the task gets them (model instances loaded); as they
    travel when they cannot be decoded (a deleted row, a corrupt body)."""
    if MARKER in body:
        return tuple(body.get("args") or ()), dict(body.get("kwargs") or {})
    try:
        return decode_call(body)
    except Exception:
        return tuple(body.get("args") or ()), dict(body.get("kwargs") or {})


def from_info(info: JobInfo) -> EnqueuedJob:
    body = info.body if isinstance(info.body, dict) else {}
    args, kwargs = _decoded(body)
    return EnqueuedJob(
        id=info.tag,
        task=str(body.get("task", "")),
        args=args,
        kwargs=kwargs,
        queue=info.queue,
        state=info.state,
        priority=info.priority,
        run_at=info.run_at,
        group=info.group,
        raw_args=body.get("args", []),
        raw_kwargs=body.get("kwargs", {}),
        django_task=MARKER in body,
    )


def live_jobs(queue: Queue) -> list[EnqueuedJob]:
    """The jobs of ``queue`` that have not ended (ready, delayed, running, and a
    workflow's jobs waiting for their parents), in order."""
    out: list[EnqueuedJob] = []
    for state in LIVE_STATES:
        page = queue.read.page(state, 0, LIST_LIMIT)
        infos = queue.read.infos([(tag, p) for tag, _, p in page])
        out.extend(from_info(i) for i in infos)
    waiting = queue.read.listing("waiting", 1, LIST_LIMIT).jobs
    if waiting:
        infos = queue.read.infos([(j.tag, j.shard) for j in waiting])
        out.extend(from_info(i) for i in infos if i.state == "waiting")
    return out


def _as_travelled(job: EnqueuedJob, args: Any, kwargs: Any) -> tuple[Any, Any]:
    """``args`` and ``kwargs`` (None: any) as they would travel for ``job``'s kind: as
    ``@task`` encodes them, or as JSON for a task of Django's Tasks framework."""
    if args is not None and not isinstance(args, list | tuple):
        raise TypeError(f"args must be a list or a tuple, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"kwargs must be a dict, got {type(kwargs).__name__}")
    if job.django_task:
        return (
            None if args is None else json.loads(json.dumps(list(args))),
            None if kwargs is None else json.loads(json.dumps(kwargs)),
        )
    encoded = encode_call(tuple(args or ()), dict(kwargs or {}))
    return (
        encoded["args"] if args is not None else None,
        encoded["kwargs"] if kwargs is not None else None,
    )


def matches(job: EnqueuedJob, task: str | None, args: Any, kwargs: Any, queue: str | None) -> bool:
    """Whether ``job`` is a call of ``task`` (None: any) with ``args`` and ``kwargs``
    (None: any; compared as they travel, so a model instance matches its row) on
    ``queue`` (None: any)."""
    if task is not None and job.task != task:
        return False
    if queue is not None and job.queue != queue:
        return False
    if args is None and kwargs is None:
        return True
    want_args, want_kwargs = _as_travelled(job, args, kwargs)
    if want_args is not None and job.raw_args != want_args:
        return False
    return want_kwargs is None or job.raw_kwargs == want_kwargs
