"""The contract of a task's and a call's job options (``JobOptions``): what ``@task``,
``using()``, an enqueue and ``Queue.prepare``/``publish``/``publish_many`` take and refuse,
in which order and with which message, as before the options were one value; and the
inputs ``@task`` refuses at decoration that would only fail later (at enqueue, or inside
Redis at publish). Two behaviours changed on purpose (CHANGELOG): ``priority`` is checked
when ``@task``/``using()`` runs, and a task's job options are its one field ``options``."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_zqueue import task
from django_zqueue.engine.records.spec import JobOptions
from django_zqueue.exceptions import InvalidArgument, PayloadTooLarge
from django_zqueue.queue import Queue
from django_zqueue.tasks.task import Task
from django_zqueue.tasks.workflows import chain


def fresh(**options: Any) -> Any:
    """A task of its own name (the registry refuses a name twice)."""

    def f(x: int) -> None:
        pass

    return task(name=f"review.t{uuid.uuid4().hex[:10]}", **options)(f)


# ------------------------------------------------------------ enqueue: the call's options


def test_enqueue_expires_error_is_the_queue_message(project: dict[str, str]) -> None:
    t = fresh()
    with pytest.raises(InvalidArgument) as e:
        t.enqueue(1, expires=-1)
    assert str(e.value) == "expires must be at least 1 ms from now and within 3650 days"


def test_enqueue_at_naive_error_is_the_queue_message(project: dict[str, str]) -> None:
    t = fresh()
    with pytest.raises(InvalidArgument) as e:
        t.enqueue_at(datetime(2030, 1, 1), 1)
    assert str(e.value) == (
        "run_at is a naive datetime while USE_TZ = True; pass an aware datetime"
    )


def test_a_bad_call_is_reported_before_a_bad_expires(project: dict[str, str]) -> None:
    t = fresh()
    with pytest.raises(TypeError, match="too many positional arguments"):
        t.enqueue(1, 2, expires=-1)


def test_debounce_with_a_delay_message(project: dict[str, str]) -> None:
    t = fresh(tag=lambda x: f"k{x}", debounce=30)
    with pytest.raises(InvalidArgument) as e:
        t.enqueue_in(5, 1)
    assert str(e.value) == f"task {t.name!r}: debounce sets the run-at: no delay"


def test_debounce_with_a_delay_and_a_bad_call_reports_the_call(project: dict[str, str]) -> None:
    t = fresh(tag=lambda x: f"k{x}", debounce=30)
    with pytest.raises(TypeError, match="too many positional arguments"):
        t.enqueue_in(5, 1, 2)


def test_a_bad_group_from_the_group_function_is_the_queue_message(
    project: dict[str, str],
) -> None:
    t = fresh(group=lambda x: "g" * 300)
    with pytest.raises(InvalidArgument) as e:
        t.enqueue(1)
    assert str(e.value) == "group must be at most 200 bytes in UTF-8"


# ------------------------------------------------------------ @task and using()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"debounce": -1}, "debounce must be a positive number of seconds"),
        ({"unique_for": "5"}, "unique_for must be a positive number of seconds"),
        ({"debounce": 4000 * 86400}, "debounce must be within 3650 days"),
        ({"expires": -1}, "expires must be a positive number of seconds"),
        ({"expires": 4000 * 86400}, "expires must be within 3650 days"),
        ({"debounce": timedelta(seconds=5)}, "debounce must be a positive number of seconds"),
        (
            {"expires": datetime(2030, 1, 1, tzinfo=UTC)},
            "expires must be a positive number of seconds",
        ),
        (
            {"visibility_timeout": 0},
            "visibility_timeout must be a number of seconds in [1, 604800] (7 days), got 0",
        ),
    ],
)
def test_task_option_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument) as e:
        fresh(**options)
    assert str(e.value).split(": ", 1)[1] == message


@pytest.mark.parametrize(
    "options",
    [{"delay": 5}, {"score": 1.0}, {"run_at": datetime(2030, 1, 1, tzinfo=UTC)}],
)
def test_task_takes_no_queue_only_option(options: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="unexpected keyword"):
        fresh(**options)


def test_task_priority_is_checked_at_decoration() -> None:
    """Decision: a task's priority is checked when ``@task`` runs (fail early, at import),
    with Queue.publish's message and the task's name in front."""
    with pytest.raises(
        InvalidArgument, match=r": priority must be in \[-1000, 1000\], got 5000$"
    ) as e:
        fresh(priority=5000)
    assert str(e.value).startswith("task 'review.t")


def test_using_priority_is_checked_when_using_runs() -> None:
    t = fresh()
    with pytest.raises(
        InvalidArgument, match=r": priority must be in \[-1000, 1000\], got 5000$"
    ) as e:
        t.using(priority=5000)
    assert str(e.value).startswith(f"task {t.name!r}: ")


# ------------------------------------------------------------ Task as a dataclass


def test_task_job_options_are_one_field_and_read_by_name() -> None:
    """Decision: a task's per-job options are its one field ``options`` (a JobOptions):
    ``Task(..., priority=3)`` and ``dataclasses.replace(task, priority=4)`` are refused;
    ``using(priority=4)`` replaces it, and ``task.priority`` etc. read it."""
    with pytest.raises(TypeError, match="unexpected keyword"):
        Task(func=lambda: None, name="review.x", priority=3)  # type: ignore[call-arg]
    t = Task(
        func=lambda: None,
        name="review.x",
        options=JobOptions(priority=3, max_retries=2, expires=7.0),
    )
    assert (t.priority, t.max_retries, t.expires) == (3, 2, 7.0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        dataclasses.replace(t, priority=4)  # type: ignore[call-arg]
    assert t.using(priority=4).priority == 4
    names = {f.name for f in dataclasses.fields(t)}
    assert "options" in names and not {"priority", "max_retries", "expires"} & names


# ------------------------------------------------------------ Queue


def test_prepare_checks_the_payload_before_the_options(q: Queue) -> None:
    with pytest.raises(PayloadTooLarge):
        q.prepare("x" * (q.options.max_payload_bytes + 10), None, 5000)
    with pytest.raises(TypeError, match="not JSON serializable"):
        q.prepare(object(), None, 5000)


def test_publish_many_of_no_body_checks_no_option(q: Queue) -> None:
    assert q.publish_many([], priority=5000) == []


def test_publish_with_a_rule_and_no_tag_says_it_needs_a_tag(q: Queue) -> None:
    for bad in ({"debounce": -1}, {"debounce": 5, "delay": 3}):
        with pytest.raises(InvalidArgument) as e:
            q.publish({"a": 1}, **bad)
        assert str(e.value) == "debounce and unique_for need a tag"


# ------------------------------------------------------------ inputs @task refuses


def fresh_any(**options: Any) -> Any:
    def f(x: Any = None) -> None:
        pass

    return task(name=f"review.n{uuid.uuid4().hex[:10]}", **options)(f)


def test_a_task_takes_no_delay_so_enqueue_at_and_chains_work(project: dict[str, str]) -> None:
    """A delay is a call's own (enqueue_in): ``@task(delay=5)`` is refused, so a task's
    enqueue_at never meets "give delay or run_at, not both", nor a chain a delayed job
    that Redis refuses at publish."""
    with pytest.raises(TypeError, match="unexpected keyword"):
        fresh_any(delay=5)
    t = fresh_any()
    t.enqueue_at(datetime.now(UTC) + timedelta(seconds=60), 1)
    chain(t.s(1), t.s()).enqueue()


def test_a_task_expiry_given_as_a_datetime_is_refused_at_decoration() -> None:
    """A datetime is only a call's own ``expires=`` (checked at each enqueue): a task's
    would be checked once and then publish already-expired jobs."""
    with pytest.raises(InvalidArgument, match="expires must be a positive number of seconds"):
        fresh_any(expires=datetime.now(UTC) + timedelta(seconds=60))


def test_a_call_expiry_given_as_a_past_datetime_is_refused(project: dict[str, str]) -> None:
    t = fresh_any()
    with pytest.raises(InvalidArgument, match="in the past"):
        t.enqueue(1, expires=datetime.now(UTC) - timedelta(seconds=1))


def test_task_debounce_attribute_is_seconds_as_a_float(project: dict[str, str]) -> None:
    t = fresh_any(tag=lambda x=None: "k", debounce=3, unique_for=4, expires=5)
    assert [type(v) for v in (t.debounce, t.unique_for, t.expires)] == [float] * 3
    u = fresh_any().using(debounce=3, unique_for=4, expires=5)
    assert [type(v) for v in (u.debounce, u.unique_for, u.expires)] == [float] * 3
