"""The options of a task's jobs as ``@task(...)`` and :meth:`Task.using
<django_zqueue.tasks.task.Task.using>` take them: which they are, how one is replaced in
the task's one value (:class:`~django_zqueue.engine.records.spec.JobOptions`, checked once
when made), and how a call's arguments are read (``enqueue_many``'s calls, a keyword an
enqueue takes for itself, a fixed tag or group)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, cast

from ..conf.bounds import MAX_DELAY, check_job_options, ordering_key_problem
from ..conf.fairness import group_problem
from ..engine.records.spec import JobOptions
from ..exceptions import InvalidArgument
from .serializer import encode_call

#: the job options (:class:`JobOptions`' fields) that ``@task(...)`` and :meth:`Task.using`
#: take by name (``score``, ``delay`` and ``run_at`` are a call's own, never a task's;
#: ``group`` is a function of the call's arguments on a task: the task's own field)
TASK_OPTIONS = (
    "priority",
    "max_retries",
    "visibility_timeout",
    "debounce",
    "unique_for",
    "expires",
    "on_dead",
)
#: the task options given in seconds (a number, never a timedelta or a datetime)
SECONDS_OPTIONS = ("debounce", "unique_for", "expires")


def call_of(
    call: tuple[Any, ...] | Mapping[str, Any] | tuple[tuple[Any, ...], Mapping[str, Any]],
) -> tuple[tuple[Any, ...], Mapping[str, Any]]:
    """One call of :meth:`Task.enqueue_many` as an ``(args, kwargs)`` pair."""
    if isinstance(call, Mapping):
        return (), call
    if (
        isinstance(call, tuple)
        and len(call) == 2
        and isinstance(call[0], tuple)
        and isinstance(call[1], Mapping)
    ):
        return call[0], call[1]
    if isinstance(call, tuple):
        return call, {}
    raise InvalidArgument(
        f"enqueue_many takes tuples of arguments, dicts of keyword arguments or "
        f"(args, kwargs) pairs; got {call!r}"
    )


def taken(func: Callable[..., Any], kwargs: dict[str, Any], name: str) -> Any:
    """``kwargs[name]`` taken out of a call's keyword arguments, unless the task's
    function has a parameter of that name (None then, or when not given)."""
    if name not in kwargs or name in inspect.signature(func).parameters:
        return None
    return kwargs.pop(name)


def replaced(name: str, options: JobOptions, changes: Mapping[str, Any]) -> JobOptions:
    """``options`` with ``changes`` (``dataclasses.replace``, which checks the new value
    once, in :class:`JobOptions`); a bad value's error names the task."""
    try:
        return dataclasses.replace(options, **changes)
    except InvalidArgument as exc:
        raise InvalidArgument(f"task {name!r}: {exc}") from None


def task_options(name: str, options: JobOptions, given: Mapping[str, Any]) -> JobOptions:
    """``options`` with the task options ``given`` (:data:`TASK_OPTIONS`, None left out),
    each checked with its task message (``max_retries``, ``visibility_timeout``; seconds
    as a float for ``debounce``, ``unique_for`` and ``expires``), then by
    :class:`JobOptions` (``priority``): an error names the task."""
    changes = {n: v for n, v in given.items() if v is not None}
    if not changes:
        return options
    check_job_options(
        f"task {name!r}",
        max_retries=changes.get("max_retries"),
        visibility_timeout=changes.get("visibility_timeout"),
    )
    for option in SECONDS_OPTIONS:
        if option in changes:
            changes[option] = once_seconds(name, option, changes[option])
    return replaced(name, options, changes)


def once_seconds(name: str, option: str, value: object) -> float:
    """A task's ``debounce``, ``unique_for`` or ``expires``: seconds (an int or a float,
    not a timedelta), at least 1 ms, within 3650 days, as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0.001:
        raise InvalidArgument(f"task {name!r}: {option} must be a positive number of seconds")
    if value > MAX_DELAY:
        raise InvalidArgument(f"task {name!r}: {option} must be within 3650 days")
    return float(value)


def seconds(value: float | timedelta | None) -> float | None:
    """A rule of ``publish_once`` in seconds, as the outbox keeps it."""
    return value.total_seconds() if isinstance(value, timedelta) else value


def by_call(value: object, what: str, task_name: str) -> Callable[..., str]:
    """A fixed string, or a function of the call's arguments, as such a function."""
    if isinstance(value, str):
        problem = ordering_key_problem(value) if what == "ordering_key" else group_problem(value)
        if problem:
            raise InvalidArgument(f"task {task_name!r}: {problem}")
        return lambda *a, **k: value
    if not callable(value):
        raise InvalidArgument(f"task {task_name!r}: {what} must be a string or a callable")
    return cast("Callable[..., str]", value)


def of_call(
    fn: Callable[..., str] | None,
    call: tuple[tuple[Any, ...], Mapping[str, Any]],
    what: str,
    task_name: str,
) -> str | None:
    """What a task's function of the call's arguments (its ``tag`` or ``group``) gives
    for ``call``, checked to be a string; None without one."""
    if fn is None:
        return None
    value = fn(*call[0], **call[1])
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} function of task {task_name!r} returned {value!r}")
    return value


def keyed(
    task_name: str,
    options: JobOptions,
    group: Callable[..., object] | None,
    ordering_key: Callable[..., object] | None,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> JobOptions:
    """``options`` with a call's group and ordering key from the task's functions (an
    ordering key the call gives itself wins), each checked (docs/job-control.md, "Strict
    order per key")."""
    if group is not None:
        value = group(*args, **kwargs)
        if not isinstance(value, str):
            raise InvalidArgument(f"group function of task {task_name!r} returned {value!r}")
        options = dataclasses.replace(options, group=value)
    if ordering_key is not None and options.ordering_key is None:
        key = ordering_key(*args, **kwargs)
        problem = ordering_key_problem(key)
        if problem:
            raise InvalidArgument(f"task {task_name!r}: ordering_key function: {problem}")
        options = dataclasses.replace(options, ordering_key=cast(str, key))
    return options


def call_body(task: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a job of task ``task`` called with ``args`` and ``kwargs``: its name,
    then :func:`~.serializer.encode_call`'s arguments (what a worker decodes)."""
    return {"task": task, **encode_call(args, dict(kwargs))}
