"""``Job.wait``, ``Job.await_result`` and ``Workflow.wait`` raise at once when no result can
come: the job ended dead, expired or cancelled, or succeeded keeping no result (its task
has no ``store_result``); they name the end, the last error, and ``store_result``.

"At once" is checked against a generous timeout: a wait that polled to the end would
take ``TIMEOUT`` seconds and raise a plain ``LookupError``; each test asserts the type and
message, and at most half the timeout spent."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from django_zqueue import JobEnded, conf, get_queue, group
from django_zqueue.queue import Queue
from django_zqueue.tasks.job import Job
from testproject.demo import tasks

TIMEOUT = 30.0


def at_once(call: Callable[[], Any]) -> JobEnded:
    """``call()`` raises JobEnded well before TIMEOUT; the exception."""
    start = time.monotonic()
    with pytest.raises(JobEnded) as caught:
        call()
    assert time.monotonic() - start < TIMEOUT / 2
    return caught.value


def run_one(q: Queue, tag: str, *, error: str | None = None, result: Any = None) -> None:
    """Claim the next job (it must be ``tag``) and fail it for good, or ack it."""
    msg = q.get(consumer="w1")
    assert msg is not None and msg.tag == tag
    if error is not None:
        assert q.nack(msg, error, dead=True) == "dead"
    elif result is not None:
        assert q.ack(msg, result=result)
    else:
        assert q.ack(msg)


@pytest.fixture
def no_history(project: dict[str, str]) -> Iterator[None]:
    """The default queue keeps no history of finished jobs."""
    value = {**settings.ZQUEUE, "QUEUES": {"default": {"keep_finished": 0}}}
    with override_settings(ZQUEUE=value):
        conf.reset()
        yield
    conf.reset()


def test_a_dead_job_raises_at_once_with_its_last_error(project: dict[str, str]) -> None:
    job = tasks.add.enqueue(1, 2)
    run_one(get_queue("default"), job.id, error="ValueError: boom\nTraceback (most recent…)")
    err = at_once(lambda: job.wait(timeout=TIMEOUT))
    assert isinstance(err, LookupError)  # what callers caught so far
    assert err.state == "dead" and err.tag == job.id and err.queue == "default"
    assert err.last_error is not None and err.last_error.startswith("ValueError: boom")
    assert "dead" in str(err) and "ValueError: boom" in str(err) and job.id in str(err)
    assert "Traceback" not in str(err)  # the first line only


def test_an_expired_job_raises_at_once(project: dict[str, str]) -> None:
    job = tasks.add.enqueue(1, 2, expires=0.05)
    time.sleep(0.1)
    assert get_queue("default").scan().expired == 1
    err = at_once(lambda: job.wait(timeout=TIMEOUT))
    assert err.state == "expired" and "expired" in str(err)


def test_a_cancelled_job_raises_at_once(project: dict[str, str]) -> None:
    job = tasks.add.enqueue(1, 2)
    assert job.cancel()
    err = at_once(lambda: job.wait(timeout=TIMEOUT))
    assert err.state == "cancelled" and "cancelled" in str(err)


def test_a_cancelled_job_raises_at_once_without_a_history(no_history: None) -> None:
    job = tasks.add.enqueue(1, 2)
    assert job.cancel()
    err = at_once(lambda: job.wait(timeout=TIMEOUT))
    assert err.state == "cancelled"


def test_a_job_that_kept_no_result_names_store_result(project: dict[str, str]) -> None:
    job = tasks.noop.enqueue()
    run_one(get_queue("default"), job.id)
    err = at_once(lambda: job.wait(timeout=TIMEOUT))
    assert err.state == "succeeded" and err.last_error is None
    assert "store_result" in str(err) and "noop" in str(err)


def test_a_finished_job_of_a_task_without_store_result_names_it_without_a_history(
    no_history: None,
) -> None:
    job = tasks.noop.enqueue()
    run_one(get_queue("default"), job.id)
    err = at_once(lambda: job.wait(timeout=TIMEOUT))
    assert "store_result" in str(err)


def test_a_kept_result_is_returned(project: dict[str, str]) -> None:
    job = tasks.add.enqueue(1, 2)
    run_one(get_queue("default"), job.id, result=3)
    assert job.wait(timeout=TIMEOUT) == 3
    assert asyncio.run(job.await_result(timeout=TIMEOUT)) == 3


def test_a_job_still_waiting_times_out_as_before(project: dict[str, str]) -> None:
    job = tasks.add.enqueue(1, 2)
    with pytest.raises(LookupError) as caught:
        job.wait(timeout=0.2, interval=0.05)
    assert not isinstance(caught.value, JobEnded)
    assert "no result" in str(caught.value)


def test_await_result_raises_at_once_on_a_dead_job(project: dict[str, str]) -> None:
    job = tasks.add.enqueue(1, 2)
    run_one(get_queue("default"), job.id, error="RuntimeError: down")
    err = at_once(lambda: asyncio.run(job.await_result(timeout=TIMEOUT)))
    assert err.state == "dead" and "RuntimeError: down" in str(err)


def test_await_result_names_store_result(project: dict[str, str]) -> None:
    job = tasks.noop.enqueue()
    run_one(get_queue("default"), job.id)
    err = at_once(lambda: asyncio.run(job.await_result(timeout=TIMEOUT)))
    assert "store_result" in str(err)


def test_a_workflow_with_a_dead_final_job_raises_at_once(project: dict[str, str]) -> None:
    wf = group([tasks.add.s(1, 2), tasks.add.s(3, 4)]).enqueue()
    q = get_queue("default")
    first, second = wf.final
    run_one(q, first.id, result=3)
    run_one(q, second.id, error="ValueError: second failed")
    err = at_once(lambda: wf.wait(timeout=TIMEOUT))
    assert err.tag == second.id and err.state == "dead"
    assert "ValueError: second failed" in str(err)


def test_a_job_never_published_still_waits_until_the_timeout(project: dict[str, str]) -> None:
    job = Job("never-published", "default", "demo.add")
    with pytest.raises(LookupError) as caught:
        job.wait(timeout=0.2, interval=0.05)
    assert not isinstance(caught.value, JobEnded)
