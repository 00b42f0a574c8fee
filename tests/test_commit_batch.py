"""The jobs enqueued inside one ``transaction.atomic`` go to Redis together at commit
(django_zqueue/tasks/oncommit.py, queue/sets.py): one round trip for all, in enqueue order;
Django's rules for on-commit callbacks (savepoints, rollbacks, databases) decide which.

Round trips are counted on redis-py's connections (tests/roundtrips.py) against the real
server; every test has its own key prefix.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings

from django_zqueue import conf, get_queue
from django_zqueue.engine.redis.connection import is_cluster
from django_zqueue.tasks.task import Job
from testproject.demo import tasks

from .roundtrips import round_trips
from .test_first_hour import redis_down  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.orm, pytest.mark.django_db(transaction=True)]


class Rollback(Exception):
    pass


@contextlib.contextmanager
def rolled_back() -> Iterator[None]:
    """An atomic block (a savepoint inside another) that ends by raising: rolled back."""
    with contextlib.suppress(Rollback), transaction.atomic():
        yield
        raise Rollback


def ready(queue: str = "default") -> list[str]:
    """The tags of the queue's ready jobs, in line."""
    return [e[0] for e in get_queue(queue).read.page("ready", 0, 1000)]


def nodes(*queues: str) -> int:
    """The round trips of one pipeline to these queues: 1; on a Redis Cluster, one per
    master serving their slots (redis-py's cluster pipeline sends to each node)."""
    client = get_queue(queues[0]).engine._client
    if not is_cluster(client):
        return 1
    return len({client.get_node_from_key(get_queue(q).engine._keys.ready).name for q in queues})


def warm() -> None:
    """Connect and load the scripts before counting."""
    get_queue("default").engine._scripts.load_all()


def test_five_enqueues_pay_one_round_trip_at_commit(project: dict[str, str]) -> None:
    warm()
    with round_trips() as n:
        with transaction.atomic():
            jobs = [tasks.add.enqueue(i, i) for i in range(5)]
            assert not n and get_queue("default").total_count() == 0
            n.clear()
    assert len(n) == 1, n
    assert ready() == [j.id for j in jobs]


def test_one_enqueue_is_one_round_trip(project: dict[str, str]) -> None:
    warm()
    with round_trips() as n, transaction.atomic():
        job = tasks.noop.enqueue()
    assert len(n) == 1, n
    assert job.status() == "ready"


def test_jobs_of_several_queues_share_the_round_trip(project: dict[str, str]) -> None:
    warm()
    with round_trips() as n, transaction.atomic():
        jobs = [tasks.add.using(queue=q).enqueue(i, 0) for i, q in enumerate(["default"] * 2)]
        jobs += [tasks.add.using(queue="emails").enqueue(2, 0)]
        jobs += [tasks.add.using(queue="default").enqueue(3, 0)]
        jobs += tasks.add.using(queue="reports").enqueue_many([(4, 0), (5, 0)])
    assert len(n) == nodes("default", "emails", "reports"), n
    assert ready("default") == [jobs[0].id, jobs[1].id, jobs[3].id]
    assert ready("emails") == [jobs[2].id]
    assert ready("reports") == [jobs[4].id, jobs[5].id]


def test_a_savepoint_rolled_back_last_sends_none_of_its_jobs(project: dict[str, str]) -> None:
    warm()
    kept: list[Job] = []
    dropped: list[Job] = []
    with round_trips() as n, transaction.atomic():
        kept.append(tasks.add.enqueue(1, 1))
        with rolled_back():
            dropped += [tasks.add.enqueue(2, 2), tasks.add.enqueue(3, 3)]
    assert len(n) == 1, n
    assert ready() == [kept[0].id]
    assert [j.status() for j in dropped] == ["unknown", "unknown"]


def test_savepoints_keep_what_commits_and_drop_what_rolls_back(project: dict[str, str]) -> None:
    warm()
    sent: list[Job] = []
    dropped: list[Job] = []
    with round_trips() as n, transaction.atomic():
        sent.append(tasks.add.enqueue(0, 0))
        with transaction.atomic():  # released: its jobs go
            sent.append(tasks.add.enqueue(1, 0))
            with rolled_back():
                dropped.append(tasks.add.enqueue(2, 0))
                with transaction.atomic():  # released into a savepoint that rolls back
                    dropped.append(tasks.add.enqueue(3, 0))
            sent.append(tasks.add.enqueue(4, 0))
        with rolled_back():
            dropped.append(tasks.add.enqueue(5, 0))
        sent.append(tasks.add.enqueue(6, 0))
        with rolled_back():
            dropped.append(tasks.add.enqueue(7, 0))
    assert len(n) == 1, n
    assert ready() == [j.id for j in sent]
    assert {j.status() for j in dropped} == {"unknown"}


def test_a_rollback_sends_nothing_and_the_next_transaction_only_its_own(
    project: dict[str, str],
) -> None:
    warm()
    with rolled_back():
        lost = [tasks.noop.enqueue() for _ in range(3)]
    with round_trips() as n, transaction.atomic():
        job = tasks.noop.enqueue()
    assert len(n) == 1, n
    assert ready() == [job.id]
    assert {j.status() for j in lost} == {"unknown"}


def test_jobs_of_a_commit_whose_callbacks_never_ran_are_not_sent_later(
    project: dict[str, str],
) -> None:
    """A callback that raises (not robust) ends Django's commit loop: the callbacks after
    it never run. Their jobs stay unsent, also when the exception (and with it Django's
    list of those callbacks) is kept alive, and the next transaction sends only its own."""
    warm()
    kept: list[BaseException] = []

    def fails() -> None:
        raise Rollback("an earlier on-commit callback fails")

    try:
        with transaction.atomic():
            transaction.on_commit(fails)  # not robust: Django raises it out of the commit
            never = tasks.noop.enqueue()
    except Rollback as exc:
        kept.append(exc)
    assert kept and never.status() == "unknown"
    with round_trips() as n, transaction.atomic():
        job = tasks.noop.enqueue()
    assert len(n) == 1, n
    assert ready() == [job.id] and never.status() == "unknown"


def test_outside_a_transaction_each_enqueue_is_sent_at_once(project: dict[str, str]) -> None:
    warm()
    with round_trips() as n:
        jobs = [tasks.noop.enqueue() for _ in range(3)]
        assert ready() == [j.id for j in jobs]
    assert len(n) == 3 + 1, n  # and the read


def test_later_callbacks_see_every_job_of_the_transaction_published(
    project: dict[str, str],
) -> None:
    seen: list[str] = []
    with transaction.atomic():
        first = tasks.noop.enqueue()
        transaction.on_commit(lambda: seen.extend(ready()), robust=True)
        second = tasks.noop.enqueue()
    assert seen == [first.id, second.id]


def test_unique_and_workflow_jobs_keep_their_calls_and_their_place_in_the_order(
    project: dict[str, str],
) -> None:
    from django_zqueue.tasks.workflows import chain

    warm()
    parent = tasks.add.enqueue(0, 0)
    with round_trips() as alone:  # what each costs sent at once, outside a transaction
        tasks.add.using(tag="once-0", unique_for=60).enqueue(0, 0)
        chain(tasks.add.s(0, 0), tasks.add.s(0)).enqueue()
        tasks.add.enqueue(0, 0, depends_on=[parent])
    get_queue("default").clear()
    with round_trips() as n, transaction.atomic():
        a = tasks.add.enqueue(1, 0)
        b = tasks.add.enqueue(2, 0)
        once = tasks.add.using(tag="once-1", unique_for=60).enqueue(3, 0)
        c = tasks.add.enqueue(4, 0)
        flow = chain(tasks.add.s(5, 0), tasks.add.s(6)).enqueue()
        d = tasks.add.enqueue(7, 0)
        after = tasks.add.enqueue(8, 0, depends_on=[a])
        e = tasks.add.enqueue(9, 0)
    assert ready() == [a.id, b.id, once.id, c.id, flow.jobs[0].id, d.id, e.id]
    assert after.status() == "waiting" and flow.jobs[1].status() == "waiting"
    # the runs of plain jobs a b | c | d | e, one round trip each; the others as alone
    assert len(n) == 4 + len(alone), (n, alone)


def test_a_clash_in_a_shared_call_loses_only_its_own_job(
    project: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    get_queue("default").publish("x", tag="taken")
    warm()
    with round_trips() as n, transaction.atomic():
        a = tasks.noop.enqueue()
        lost = tasks.noop.using(tag="taken").enqueue()
        b = tasks.noop.enqueue()
    assert len(n) == 2, n  # the shared call is refused as a whole; then one call per job
    assert ready() == ["taken", a.id, b.id]
    assert get_queue("default").total_count() == 3  # nothing written twice
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [
        f"event=publish_after_commit_failed task=testproject.demo.tasks.noop queue=default "
        f"jobs={lost.id} error=\"DuplicateJob: job tag already in use: 'taken' (ready)\""
    ]


def test_a_full_queue_loses_only_what_does_not_fit(
    project: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    queues = {**settings.ZQUEUE["QUEUES"], "small": {"max_length": 2}}
    with override_settings(ZQUEUE={**settings.ZQUEUE, "QUEUES": queues}):
        conf.reset()
        try:
            with transaction.atomic():
                small = [tasks.noop.using(queue="small").enqueue() for _ in range(3)]
                other = tasks.noop.enqueue()
            assert ready("small") == [small[0].id, small[1].id]
            assert ready("default") == [other.id]
        finally:
            conf.reset()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and f'jobs={small[2].id} error="QueueFull: ' in errors[0]


def test_redis_down_at_commit_logs_each_lost_set_and_raises_nothing(
    redis_down: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []
    with transaction.atomic():
        one = tasks.noop.enqueue()
        many = tasks.add.enqueue_many([(1, 2), (3, 4)])
        transaction.on_commit(lambda: ran.append("later callback"), robust=True)
    assert ran == ["later callback"]
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in errors] == ["django_zqueue.task"] * 2
    assert not any(r.exc_info for r in errors)
    lines = [r.getMessage() for r in errors]
    assert lines[0].startswith(
        f"event=publish_after_commit_failed task=testproject.demo.tasks.noop queue=default "
        f'jobs={one.id} error="QueueUnavailable: '
    )
    assert lines[1].startswith(
        f"event=publish_after_commit_failed task=testproject.demo.tasks.add queue=default "
        f'jobs={many[0].id},{many[1].id} error="QueueUnavailable: '
    )


@pytest.mark.django_db  # a test in one transaction, rolled back at its end (TestCase)
def test_capture_on_commit_callbacks_sends_all_at_the_first(
    project: dict[str, str], django_capture_on_commit_callbacks: Any
) -> None:
    warm()
    with django_capture_on_commit_callbacks() as callbacks:
        jobs = [tasks.noop.enqueue() for _ in range(3)]
    assert len(callbacks) == 3 and ready() == []
    with round_trips() as n:
        callbacks[0]()
        callbacks[1]()
        callbacks[2]()
    assert len(n) == 1, n
    assert ready() == [j.id for j in jobs]


def test_django_tasks_backend_jobs_join_the_round_trip(project: dict[str, str]) -> None:
    from django_zqueue.tasks.django_tasks.compat import framework_of
    from testproject.demo import framework_tasks as ft

    signal = framework_of(ft.add).task_enqueued
    enqueued: list[str] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        enqueued.append(task_result.id)
        assert get_queue(task_result.task.queue_name).state(task_result.id) == "ready"

    options = {"ENQUEUE_ON_COMMIT": True}
    tasks_setting = {"default": {**settings.TASKS["default"], "OPTIONS": options}}
    signal.connect(receiver)
    warm()
    try:
        with override_settings(TASKS=tasks_setting), round_trips() as n:
            with transaction.atomic():
                first = ft.add.enqueue(1, 1)
                mine = tasks.noop.enqueue()
                second = ft.shout.enqueue("hi")
                assert enqueued == []
            assert len(n) == nodes("default", "emails") + 2, n  # the jobs, each receiver's read
    finally:
        signal.disconnect(receiver)
    assert enqueued == [first.id, second.id]
    assert ready("default") == [first.id, mine.id] and ready("emails") == [second.id]


def test_each_thread_sends_its_own_transaction_s_jobs(project: dict[str, str]) -> None:
    """A thread's transaction (its own connection) open while another commits: each
    commit sends the jobs of its own transaction only."""
    from django.db import connections

    started, go = threading.Event(), threading.Event()
    theirs: list[Job] = []

    def other_thread() -> None:
        try:
            with transaction.atomic():
                theirs.extend([tasks.noop.enqueue(), tasks.noop.enqueue()])
                started.set()
                assert go.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=other_thread)
    thread.start()
    assert started.wait(30)
    with transaction.atomic():
        mine = tasks.noop.enqueue()
    assert ready() == [mine.id]
    go.set()
    thread.join(30)
    assert ready() == [mine.id, theirs[0].id, theirs[1].id]


def test_each_database_sends_its_own_jobs_at_its_own_commit(
    project: dict[str, str], tmp_path: Path
) -> None:
    """Two databases (SQLite files of this test, in a process of its own): a transaction
    on each, one inside the other."""
    (tmp_path / "two_db_settings.py").write_text(
        textwrap.dedent(f"""
            from testproject.settings import *  # noqa: F403
            DATABASES = {{
                "default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": "{tmp_path}/a"}},
                "other": {{"ENGINE": "django.db.backends.sqlite3", "NAME": "{tmp_path}/b"}},
            }}
        """)
    )
    script = textwrap.dedent("""
        import json, django
        django.setup()
        from django.db import transaction
        from django_zqueue import get_queue
        from testproject.demo import tasks
        from tests.roundtrips import round_trips

        on_other = tasks.add.using(using_db="other")
        out = {}
        get_queue("default").total_count()
        with round_trips() as n:
            with transaction.atomic():
                a = tasks.add.enqueue(1, 0)
                with transaction.atomic(using="other"):
                    b, c = on_other.enqueue(2, 0), on_other.enqueue(3, 0)
                    with transaction.atomic():  # a savepoint of default
                        d = tasks.add.enqueue(4, 0)
                out["other_commit"] = [list(n), [j.status() for j in (a, b, c, d)]]
                n.clear()
                e = tasks.add.enqueue(5, 0)
        out["default_commit"] = list(n)
        out["ready"] = [e[0] for e in get_queue("default").read.page("ready", 0, 10)]
        out["order"] = [j.id for j in (b, c, a, d, e)]
        print(json.dumps(out))
    """)
    env = {
        **project,
        "PYTHONPATH": f"{tmp_path}:{ROOT}",
        "DJANGO_SETTINGS_MODULE": "two_db_settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # other's commit: b and c, in one round trip; a and d still wait (the scripts are a
    # Functions library, sent with EVALSHA on a cluster)
    verb = "EVALSHA" if is_cluster(get_queue("default").engine._client) else "FCALL"
    assert out["other_commit"] == [[verb], ["unknown", "ready", "ready", "unknown"]]
    assert out["default_commit"] == [verb]  # a, d and e
    assert out["ready"] == out["order"]
