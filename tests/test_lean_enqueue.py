"""The common enqueue (``tasks/lean.py``, ``engine/lean.py``): a plain call of a task
with its default options writes what the general path writes, byte for byte but its
enqueue time; every call it does not take goes the general path, with its errors; a plan
made under other settings is not used; a clash writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_zqueue import conf, get_queue, task
from django_zqueue.engine.records import encode_body
from django_zqueue.engine.records.codec import unpack_one
from django_zqueue.engine.records.spec import BODY_PARTS_MAX
from django_zqueue.exceptions import DuplicateJob, PayloadTooLarge, QueueFull
from django_zqueue.tasks import lean
from django_zqueue.tasks.options import call_body

from .conftest import snapshot


@task(name="tests.lean.anything")
def anything(*args: Any, **kwargs: Any) -> None:
    """Takes any call."""


@task(name="tests.lean.two")
def two(a: int, b: str = "") -> None:
    """Takes one or two arguments."""


@task(name="tests.lean.urgent", priority=7, max_retries=2)
def urgent(n: int) -> None:
    """Its own priority and retries: still the lean publish."""


@task(name="tests.lean.tagged", tag=lambda n: f"n{n}")
def tagged(n: int) -> None:
    """A tag from each call: the general path."""


@task(name="tests.lean.grouped", group=lambda n: f"g{n}")
def grouped(n: int) -> None:
    """A group from each call: the general path."""


@task(name="tests.lean.later", expires=60)
def later(n: int) -> None:
    """An option the lean publish does not take: the general path."""


@task(name="tests.lean.debounced", tag=lambda n: f"d{n}", debounce=30)
def debounced(n: int) -> None:
    """Debounce: the general path."""


def _record(client: redis.Redis, tag: str) -> dict[str, Any]:
    """A job's stored record, decoded, without its enqueue time."""
    raw = client.hget(get_queue("default").engine._keys.meta, tag)
    assert raw is not None, tag
    fields, _ = unpack_one(raw)
    assert isinstance(fields, dict)
    fields.pop("e")
    return fields


def _general(t: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """``t.enqueue(*args, **kwargs)`` as the general path sends it."""
    return str(t._submit([(args, kwargs)], t._call_options(dict(kwargs)), None)[0].id)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "args", "kwargs", "task", 'x","kwargs":']), inner)
    ),
    max_leaves=12,
)
KWARGS = st.dictionaries(st.sampled_from(["k", "kwargs", "args", "task", "z"]), JSON, max_size=3)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=st.lists(JSON, max_size=4).map(tuple), kwargs=KWARGS)
def test_a_plain_call_writes_what_the_general_path_writes(
    zqueue_settings: dict[str, Any],
    redis_client: redis.Redis,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    plan = anything._lean.plan()
    job = lean.enqueue(anything, plan, args, dict(kwargs))
    body = encode_body(call_body(anything.name, args, kwargs))
    if len(body) > BODY_PARTS_MAX:  # (the full publish's: the general path takes it)
        assert job is None
        return
    assert job is not None  # (the lean path took it)
    other = _general(anything, args, dict(kwargs))
    assert _record(redis_client, job.id) == _record(redis_client, other)
    a, b = get_queue("default").info(job.id), get_queue("default").info(other)
    assert a is not None and b is not None
    assert a.state == b.state == "ready" and a.body == b.body
    assert a.body["args"] == list(args) and a.body["kwargs"] == kwargs


def test_the_enqueue_of_a_plain_task_takes_it_and_keeps_the_line(
    zqueue_settings: dict[str, Any],
) -> None:
    jobs = [two.enqueue(1), urgent.enqueue(2), two.enqueue(3, b="x")]
    for t in (two, urgent):
        assert t._lean.plan().send is not None
    q = get_queue("default")
    assert q.rank(jobs[1].id) == 0  # priority 7 first, then in order of enqueue
    assert [q.rank(jobs[0].id), q.rank(jobs[2].id)] == [1, 2]
    info = q.info(jobs[1].id)
    assert info is not None and (info.priority, info.max_retries) == (7, 2)
    assert q.stats()["enqueued"] == 3


@pytest.mark.parametrize("t", [tagged, grouped, later, debounced])
def test_a_task_whose_jobs_need_more_has_no_lean_publish(
    zqueue_settings: dict[str, Any], t: Any
) -> None:
    assert t._lean.plan().send is None
    job = t.enqueue(1)  # the general path: its options apply
    assert get_queue("default").info(job.id) is not None


@pytest.mark.parametrize(
    "options", [{"max_length": 100}, {"partitions": 2}, {"fairness": "groups"}]
)
def test_a_queue_the_lean_publish_does_not_take(
    zqueue_settings: dict[str, Any], options: dict[str, Any]
) -> None:
    value = {**zqueue_settings, "QUEUES": {"default": options}}
    with override_settings(ZQUEUE=value):
        assert two._lean.plan().send is None
        job = two.enqueue(1)
        assert get_queue("default").state(job.id) == "ready"
    conf.reset()


def test_a_call_that_does_not_bind_is_the_general_paths_error(
    zqueue_settings: dict[str, Any], redis_client: redis.Redis, prefix: str
) -> None:
    before = snapshot(redis_client, prefix)
    assert lean.enqueue(two, two._lean.plan(), (), {"c": 1}) is None
    with pytest.raises(TypeError, match=r"tests\.lean\.two.*nothing was enqueued"):
        two.enqueue(c=1)  # type: ignore[call-arg]
    assert snapshot(redis_client, prefix) == before


def test_a_body_over_the_queue_limit_is_refused_by_the_general_path(
    zqueue_settings: dict[str, Any], redis_client: redis.Redis, prefix: str
) -> None:
    value = {**zqueue_settings, "QUEUES": {"default": {"max_payload_bytes": 64}}}
    with override_settings(ZQUEUE=value):
        assert lean.enqueue(two, two._lean.plan(), (1, "x" * 64), {}) is None
        with pytest.raises(PayloadTooLarge):
            two.enqueue(1, "x" * 64)
        assert snapshot(redis_client, prefix) == {}
    conf.reset()


def test_a_long_body_goes_through_the_full_publish(zqueue_settings: dict[str, Any]) -> None:
    plan = two._lean.plan()
    assert lean.enqueue(two, plan, (1, "y" * 600), {}) is None  # (not of the lean shape)
    job = two.enqueue(1, "y" * 600)
    info = get_queue("default").info(job.id)
    assert info is not None and info.body["args"] == [1, "y" * 600]


def test_a_plan_made_under_other_settings_is_not_used(zqueue_settings: dict[str, Any]) -> None:
    two.enqueue(1)  # a plan for the queue without a limit
    value = {**zqueue_settings, "QUEUES": {"default": {"max_length": 1}}}
    with override_settings(ZQUEUE=value):
        get_queue("default").clear()
        two.enqueue(1)
        with pytest.raises(QueueFull):  # a stale plan would have written it
            two.enqueue(2)
    conf.reset()


def test_a_tag_in_use_is_a_clash_that_writes_nothing(
    zqueue_settings: dict[str, Any], redis_client: redis.Redis, prefix: str
) -> None:
    job = two.enqueue(1)
    send = two._lean.plan().send
    assert send is not None
    before = snapshot(redis_client, prefix)
    body = encode_body({"task": two.name, "args": [2], "kwargs": {}})
    with pytest.raises(DuplicateJob) as exc:
        send(job.id, body)
    assert exc.value.states == ["ready"]
    assert snapshot(redis_client, prefix) == before
