"""What a newcomer meets first: the messages of a mistake name the fix (an enqueue option
passed as an argument, a naive expiry), an expired job's error gives a readable time, a
final failure logs at ERROR, a publish lost at commit to an outage names the outbox."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from django.conf import settings
from django.db import transaction
from django.test import override_settings

import django_zqueue
from django_zqueue import InvalidArgument, JobEnded, SignalRefused, chain, conf
from django_zqueue.engine.redis.embedded import free_port
from django_zqueue.engine.scripts.source import helper_order, lua_file
from django_zqueue.queue import Queue
from django_zqueue.worker import Worker
from testproject.demo import tasks

from .conftest import snapshot


@pytest.fixture
def redis_down() -> Iterator[str]:
    """The project's settings with REDIS_URL on a port nothing listens on."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": url}):
        yield url
    conf.reset()


# ------------------------------------------------------------------ exports


def test_the_package_exports_the_exceptions_the_guides_use() -> None:
    for name in ("SignalRefused", "JobEnded"):
        assert name in django_zqueue.__all__
    assert django_zqueue.SignalRefused is SignalRefused
    assert issubclass(SignalRefused, LookupError) and issubclass(JobEnded, LookupError)


# ------------------------------------------------------------------ an option as an argument


def test_an_enqueue_option_given_as_an_argument_points_to_using(project: dict[str, str]) -> None:
    with pytest.raises(TypeError) as caught:
        tasks.add.enqueue(1, 2, queue="emails")
    text = str(caught.value)
    assert "unexpected keyword argument 'queue'" in text and "nothing was enqueued" in text
    assert "add.using(queue=...).enqueue(...)" in text
    with pytest.raises(TypeError) as caught:
        tasks.add.enqueue(1, 2, priority=5, max_retries=1)
    assert "add.using(priority=..., max_retries=...)" in str(caught.value)
    flow = chain(tasks.add.s(1, 2, queue="emails"))  # a signature (a workflow job) too
    with pytest.raises(TypeError) as caught:
        flow.enqueue()
    assert ".using(queue=...)" in str(caught.value)
    assert get_default_queue_is_empty()


def test_a_keyword_that_is_no_option_gets_no_pointer(project: dict[str, str]) -> None:
    with pytest.raises(TypeError) as caught:
        tasks.add.enqueue(1, 2, colour="red")
    assert "using(" not in str(caught.value)


def get_default_queue_is_empty() -> bool:
    return django_zqueue.get_queue("default").counts() == {
        "ready": 0,
        "delayed": 0,
        "inflight": 0,
        "dead": 0,
    }


# ------------------------------------------------------------------ expires


def test_a_naive_expiry_names_expires_and_writes_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    before = snapshot(redis_client, prefix)
    naive = datetime.now() + timedelta(minutes=5)
    with pytest.raises(InvalidArgument) as caught:
        q.publish("x", expires=naive)
    assert "expires is a naive datetime" in str(caught.value)
    assert "run_at" not in str(caught.value)
    far = datetime.now(UTC) + timedelta(days=4000)
    with pytest.raises(InvalidArgument) as caught:
        q.publish("x", expires=far)
    assert "expires" in str(caught.value) and "run_at" not in str(caught.value)
    assert snapshot(redis_client, prefix) == before


def test_an_expired_jobs_error_gives_a_readable_utc_time(q: Queue) -> None:
    tag = q.publish("late", expires=0.05)
    time.sleep(0.1)
    assert q.scan().expired == 1
    info = q.info(tag)
    assert info is not None and info.state == "expired" and info.expires_at is not None
    at = info.expires_at
    want = f"expired: not started by {at:%Y-%m-%d %H:%M:%S}.{at.microsecond // 1000:03d} UTC"
    assert info.last_error == want


def test_utc_text_matches_python_for_any_date(redis_client: redis.Redis) -> None:
    code = "\n".join([*(lua_file(f"_{h}") for h in helper_order(["_expire"])), lua_file("_expire")])
    code += (
        "\nlocal out = {}"
        "\nfor i, v in ipairs(ARGV) do out[i] = utc_text(tonumber(v)) end"
        "\nreturn out"
    )
    rng = random.Random(7)
    values = [0, 999, 951782400000, 951868799999, 4107542400000, 1735689599999, 1709164800000]
    values += [rng.randrange(0, 4_102_444_800_000) for _ in range(300)]
    got = [v.decode() for v in redis_client.eval(code, 0, *values)]
    want = [
        f"{d:%Y-%m-%d %H:%M:%S}.{v % 1000:03d} UTC"
        for v, d in ((v, datetime.fromtimestamp(v // 1000, tz=UTC)) for v in values)
    ]
    assert got == want


# ------------------------------------------------------------------ log levels and hints


def test_a_final_failure_logs_at_error_a_retry_at_warning(
    project: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    tasks.always_fails.enqueue()  # max_retries=2: two retries, then dead
    Worker(["default"], burst=True, scan_interval=0.05).run()
    failed = [r for r in caplog.records if "event=job_failed" in r.getMessage()]
    assert [(r.levelno, "retry=True" in r.getMessage()) for r in failed] == [
        (logging.WARNING, True),
        (logging.WARNING, True),
        (logging.ERROR, False),
    ]


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_a_publish_lost_to_an_outage_at_commit_names_the_outbox(
    redis_down: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with transaction.atomic():
        tasks.noop.enqueue()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1
    assert "event=publish_after_commit_failed" in errors[0]
    assert "hint=\"ZQUEUE['OUTBOX'] = True" in errors[0] and "docs/outbox.md" in errors[0]


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_a_workflow_lost_at_commit_does_not_name_the_outbox(
    redis_down: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The outbox does not take workflows: the hint would mislead."""
    caplog.set_level(logging.DEBUG)
    with transaction.atomic():
        chain(tasks.add.s(1, 2), tasks.add.s(3)).enqueue()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and "event=publish_after_commit_failed" in errors[0]
    assert "hint=" not in errors[0]
