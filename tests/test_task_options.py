"""A task's job options as one value (:class:`JobOptions`): ``@task(...)`` makes it,
``using()`` replaces fields of it, ``Queue.prepare`` takes it whole; it is checked once,
when made, by the same check as ``Queue.publish``'s."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from django_zqueue import InvalidArgument, get_queue, task
from django_zqueue.engine.records import spec as spec_module
from django_zqueue.engine.records.spec import OPTION_FIELDS, JobOptions
from django_zqueue.tasks.options import TASK_OPTIONS
from django_zqueue.tasks.task import Task

NAME = "tests.task_options.plain"

#: a good value of every job option a task takes (a new field of JobOptions must be
#: added here or to CALL_ONLY: the first test says so)
GOOD: dict[str, Any] = {
    "priority": 7,
    "max_retries": 3,
    "visibility_timeout": 45.0,
    "debounce": 2.0,
    "unique_for": 60.0,
    "expires": 600.0,
    "on_dead": "skip",
}

#: the job options that are a call's own (``Queue.publish``, ``enqueue_in``/``enqueue_at``),
#: never a task's: ``@task`` refuses them as unexpected keywords; ``group`` and
#: ``ordering_key`` are the task's own fields (functions of the call's arguments)
CALL_ONLY = {"score", "delay", "run_at", "group", "ordering_key"}

#: a bad value of each option ``using()`` takes, as ``Queue.publish`` also takes it
BAD: dict[str, Any] = {
    "priority": 5000,
    "max_retries": -1,
    "visibility_timeout": 0.001,
    "debounce": 0,
    "unique_for": float("nan"),
    "expires": -5,
}


def plain(x: int = 0) -> int:
    return x


def using_options() -> list[str]:
    return [n for n in inspect.signature(Task.using).parameters if n in TASK_OPTIONS]


def test_every_job_option_is_taken_by_task_and_replaced_by_using() -> None:
    """Field-driven: each field of JobOptions (but ``group``, a function of the call on
    a task) passes through ``@task(...)`` into the task's one value, and each that
    ``using()`` takes replaces that field alone, leaving the others as they were."""
    assert set(GOOD) == set(TASK_OPTIONS) == set(OPTION_FIELDS) - CALL_ONLY
    base = task(name=NAME, priority=1, max_retries=2)(plain)
    assert base.options == JobOptions(priority=1, max_retries=2)
    for name, value in GOOD.items():
        made = task(name=f"{NAME}.{name}", **{name: value})(plain)
        assert made.options == JobOptions(**{name: value}), name
        assert getattr(made.options, name) == value
    assert set(using_options()) == set(TASK_OPTIONS)
    for name in CALL_ONLY - {"group", "ordering_key"}:
        with pytest.raises(TypeError, match="unexpected keyword"):
            task(name=f"{NAME}.{name}", **{name: 1})(plain)
    for name in using_options():
        value = GOOD[name]
        copy = base.using(**{name: value})
        assert copy.options == dataclasses.replace(base.options, **{name: value}), name
        assert copy.options.spec == dataclasses.replace(base.options, **{name: value}).spec
    assert base.options == JobOptions(priority=1, max_retries=2)  # the task is unchanged


def test_the_options_reach_the_job_through_prepare(zqueue_settings: dict[str, Any]) -> None:
    """The task's value is what ``Queue.prepare(options=...)`` encodes, the same as the
    keywords of ``Queue.prepare`` give."""
    t = task(name=NAME)(plain).using(priority=9, max_retries=4, visibility_timeout=40.0)
    job = t.enqueue(1)
    q = get_queue("default")
    info = q.info(job.id)
    assert info is not None and (info.priority, info.max_retries) == (9, 4)
    by_keywords = q.prepare("b", priority=9, max_retries=4, visibility_timeout=40.0)
    assert q.prepare("b", options=t.options).spec == by_keywords.spec
    with pytest.raises(InvalidArgument, match="not both"):
        q.prepare("b", priority=3, options=t.options)


@pytest.mark.parametrize("name", sorted(BAD))
def test_using_refuses_a_bad_value_with_the_message_of_task_and_of_publish(
    zqueue_settings: dict[str, Any], name: str
) -> None:
    """``using()`` and ``@task(...)`` refuse a bad value with the same message, naming
    the task and the option (the task's own messages for max_retries,
    visibility_timeout and the seconds of debounce, unique_for and expires; that of
    ``Queue.publish`` for priority); ``Queue.publish`` refuses it too."""
    bad = {name: BAD[name]}
    base = task(name=NAME)(plain)
    with pytest.raises(InvalidArgument) as by_using:
        base.using(**bad)
    with pytest.raises(InvalidArgument) as by_task:
        task(name=NAME, **bad)(plain)
    with pytest.raises(InvalidArgument) as by_publish:
        get_queue("default").publish("x", tag="t", **bad)
    assert str(by_using.value) == str(by_task.value)
    assert str(by_task.value).startswith(f"task {NAME!r}: ") and name in str(by_task.value)
    assert name in str(by_publish.value)
    if name == "priority":
        assert str(by_task.value) == f"task {NAME!r}: {by_publish.value}"


def test_the_options_are_checked_once_not_per_job(
    zqueue_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``using()`` checks its value once; enqueueing fifty calls checks nothing more; a
    call's own expiry is one more check for that call."""
    checked: list[JobOptions] = []
    real = spec_module._checked
    monkeypatch.setattr(spec_module, "_checked", lambda o: (checked.append(o), real(o))[1])
    base = task(name=NAME)(plain)
    checked.clear()
    t = base.using(priority=5, expires=600)
    assert len(checked) == 1
    jobs = t.enqueue_many([(i,) for i in range(50)])
    assert len(jobs) == 50 and len(checked) == 1
    t.enqueue(1, expires=60)
    assert len(checked) == 2 and checked[-1].expires == 60
    info = get_queue("default").info(jobs[0].id)
    assert info is not None and info.priority == 5 and info.expires_at is not None
