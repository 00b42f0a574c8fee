"""Bounds where a value becomes a lease, a delay or a count (issue 15): settings (system
checks), ``@task`` (raises at decoration), ``Task.using`` and ``publish`` (raise
``InvalidArgument``, nothing written)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import redis
from django.utils import timezone

from django_zqueue import conf, task
from django_zqueue.conf import bounds
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue

BAD_LEASES = [1e-6, 0.001, 0.999, 7 * 86400 + 1, 1e300]
GOOD_LEASES = [1, 1.5, 300, 7 * 86400]


@pytest.mark.parametrize("vt", BAD_LEASES)
def test_settings_refuse_a_lease_out_of_range(vt: float) -> None:
    _, problems = conf.parse({"QUEUES": {"q": {"visibility_timeout": vt}}})
    assert [p.id for p in problems] == ["django_zqueue.E007"]
    assert "[1, 604800]" in problems[0].msg


@pytest.mark.parametrize("vt", GOOD_LEASES)
def test_settings_take_a_lease_in_range(vt: float) -> None:
    config, problems = conf.parse({"QUEUES": {"q": {"visibility_timeout": vt}}})
    assert problems == [] and config.queues["q"].visibility_timeout == vt


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 10**30}, "max_retries"),
        ({"max_retries": 1001}, "max_retries"),
        ({"retry_backoff": {"base": 1e9}}, "retry_backoff base"),
        ({"retry_backoff": {"max": 8 * 86400}}, "retry_backoff max"),
    ],
)
def test_settings_refuse_counts_and_backoffs_out_of_range(
    options: dict[str, Any], needle: str
) -> None:
    _, problems = conf.parse({"QUEUES": {"q": options}})
    assert problems and needle in problems[0].msg


def test_manage_check_reports_a_bad_lease(settings: Any) -> None:
    from django.core import checks

    settings.ZQUEUE = {"QUEUES": {"default": {"visibility_timeout": 1e-6}}}
    errors = [e for e in checks.run_checks() if e.id == "django_zqueue.E007"]
    assert errors and "visibility_timeout" in errors[0].msg


@pytest.mark.parametrize("vt", BAD_LEASES)
def test_publish_refuses_a_lease_out_of_range(
    q: Queue, redis_client: redis.Redis, vt: float
) -> None:
    with pytest.raises(InvalidArgument, match="visibility_timeout"):
        q.publish("x", visibility_timeout=vt)
    assert q.total_count() == 0 and not redis_client.exists(q.engine._keys.meta)


@pytest.mark.parametrize("retries", [-1, 1001, 10**30])
def test_publish_refuses_max_retries_out_of_range(q: Queue, retries: int) -> None:
    with pytest.raises(InvalidArgument, match="max_retries"):
        q.publish("x", max_retries=retries)
    assert q.total_count() == 0


def test_publish_refuses_a_delay_beyond_the_horizon(q: Queue) -> None:
    with pytest.raises(InvalidArgument, match="horizon"):
        q.publish("x", delay=bounds.MAX_DELAY + 60)
    with pytest.raises(InvalidArgument, match="horizon"):
        q.publish("x", run_at=timezone.now() + timedelta(seconds=bounds.MAX_DELAY + 60))
    assert q.total_count() == 0
    q.publish("x", delay=bounds.MAX_DELAY - 60)  # within: taken
    assert q.counts()["delayed"] == 1


def test_nack_and_touch_refuse_waits_beyond_the_bounds(q: Queue) -> None:
    q.publish("x")
    msg = q.get()
    assert msg is not None
    with pytest.raises(InvalidArgument, match="horizon"):
        q.nack(msg, "e", retry_in=bounds.MAX_DELAY + 60)
    with pytest.raises(InvalidArgument, match="extend"):
        q.touch(msg, extend=bounds.MAX_VISIBILITY_TIMEOUT + 1)
    assert q.state(msg.tag) == "leased"


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"visibility_timeout": 1e-6}, "visibility_timeout"),
        ({"visibility_timeout": 1e300}, "visibility_timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 10**30}, "max_retries"),
        ({"retry_backoff": {"base": 1e9}}, "retry_backoff"),
        ({"retry_backoff": conf.Backoff(base=1, max=1e12)}, "retry_backoff max"),
    ],
)
def test_task_decorator_raises_at_decoration(options: dict[str, Any], needle: str) -> None:
    with pytest.raises((InvalidArgument, conf.ConfigurationError), match=needle):

        @task(name=f"tests.bounds.never_{needle.replace(' ', '_')}", **options)
        def never() -> None: ...


def test_task_using_refuses_a_lease_out_of_range() -> None:
    from testproject.demo import tasks

    with pytest.raises(InvalidArgument, match="visibility_timeout"):
        tasks.add.using(visibility_timeout=0.001)
    with pytest.raises(InvalidArgument, match="max_retries"):
        tasks.add.using(max_retries=10**30)
