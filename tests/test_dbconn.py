"""Database connections of a worker (django_zqueue.worker.dbconn): kept across back-to-back jobs
under Django's default CONN_MAX_AGE=0, closed when idle, broken or left in a transaction,
never shared with a forked child; no database work at all for jobs that use none."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.db.backends.signals import connection_created

from django_zqueue import get_queue, task
from django_zqueue.worker import Worker, dbconn
from testproject.demo.models import Article

#: closing needs a real server: Django never closes an in-memory SQLite database
#: (pytest-django's test database on SQLite); CI runs these on PostgreSQL (-m orm)
needs_server = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs PostgreSQL (backend pids, real closes)"
)


def _pid() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        return int(cur.fetchone()[0])


def _alive(pid: int) -> bool:
    """Whether backend ``pid`` is connected (asked on a connection of its own)."""
    raw = connection.get_new_connection(connection.get_connection_params())
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            row = cur.fetchone()
            return bool(row and row[0])
    finally:
        raw.close()


def _terminate(pid: int) -> None:
    """End backend ``pid`` from another session and wait (bounded) until it is gone."""
    raw = connection.get_new_connection(connection.get_connection_params())
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        raw.close()
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


@task(store_result=True)
def backend_pid() -> int:
    return _pid()


@task(isolation="process", store_result=True)
def backend_pid_in_child() -> int:
    return _pid()


@task(store_result=True)
def killed_under_it() -> int:
    """Uses the connection, then the server ends it: the job itself does not notice."""
    pid = _pid()
    _terminate(pid)
    return pid


@task(max_retries=0)
def suicide() -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_terminate_backend(pg_backend_pid())")


@task(max_retries=0)
def leave_atomic(title: str) -> None:
    transaction.atomic().__enter__()  # never exited: the transaction stays open
    Article.objects.create(title=title)


@task(max_retries=0)
def autocommit_off(title: str) -> None:
    transaction.set_autocommit(False)
    Article.objects.create(title=title)


@task(max_retries=0)
def failed_query_left_open() -> None:
    transaction.atomic().__enter__()
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT no_such_column FROM demo_article")
    except Exception:
        pass  # swallowed: the transaction is aborted and still open


@task(store_result=True)
def count_articles() -> int:
    return Article.objects.count()


def _result(job: Any) -> Any:
    """The job's result, waited for (at most 10 s)."""
    deadline = time.monotonic() + 10
    while job.status() != "finished" and time.monotonic() < deadline:
        time.sleep(0.02)
    return job.result()


def burst(**kwargs: Any) -> Worker:
    w = Worker(["default"], burst=True, concurrency=1, scan_interval=0.05, **kwargs)
    w.run()
    return w


@pytest.fixture
def max_age(monkeypatch: pytest.MonkeyPatch) -> Callable[[int | None], None]:
    def set_to(value: int | None) -> None:
        for conn in connections.all():
            monkeypatch.setitem(conn.settings_dict, "CONN_MAX_AGE", value)

    set_to(0)  # Django's default (the test settings may say otherwise)
    return set_to


@pytest.fixture
def opened() -> Iterator[list[str]]:
    """The names of the threads that open a database connection meanwhile."""
    names: list[str] = []

    def note(sender: object, **kwargs: object) -> None:
        names.append(threading.current_thread().name)

    connection_created.connect(note, dispatch_uid="test_dbconn.opened")
    yield names
    connection_created.disconnect(dispatch_uid="test_dbconn.opened")


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_a_connection_is_kept_across_back_to_back_jobs(
    project: dict[str, str], max_age: Callable[[int | None], None], opened: list[str]
) -> None:
    jobs = [backend_pid.enqueue() for _ in range(6)]
    w = burst()
    assert w.failed == 0
    pids = {j.result() for j in jobs}
    assert len(pids) == 1, pids  # one connection for the six jobs, not one each
    assert [n for n in opened if n.startswith("zqueue-consumer")] == ["zqueue-consumer-0"]
    assert not _alive(pids.pop())  # and closed when the consumer ended


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("health_checks", [False, True])
def test_conn_health_checks_check_a_kept_connection_at_each_job(
    project: dict[str, str],
    max_age: Callable[[int | None], None],
    monkeypatch: pytest.MonkeyPatch,
    health_checks: bool,
) -> None:
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", health_checks)
    checked: list[str] = []
    cls = type(connections["default"])
    real = cls.is_usable

    def counted(self: Any) -> bool:
        checked.append(threading.current_thread().name)
        return bool(real(self))

    monkeypatch.setattr(cls, "is_usable", counted)
    for _ in range(4):
        count_articles.enqueue()
    w = burst()
    assert w.failed == 0
    # the first job's connection is new (healthy); each later job checks it once
    mine = [n for n in checked if n.startswith("zqueue-consumer")]
    assert len(mine) == (3 if health_checks else 0)


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_is_renewed_after_keep_seconds(
    project: dict[str, str], max_age: Callable[[int | None], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dbconn, "KEEP_SECONDS", 0.0)  # continuous work past the limit
    jobs = [backend_pid.enqueue() for _ in range(3)]
    burst()
    assert len({j.result() for j in jobs}) == 3


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_with_a_max_age_django_rule_applies(
    project: dict[str, str], max_age: Callable[[int | None], None]
) -> None:
    max_age(600)
    jobs = [backend_pid.enqueue() for _ in range(3)]
    burst()
    pid = jobs[0].result()
    assert {j.result() for j in jobs} == {pid}
    assert _alive(pid)  # a persistent connection outlives the loop, as Django keeps it


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_a_connection_is_closed_when_the_worker_is_idle(
    project: dict[str, str], max_age: Callable[[int | None], None]
) -> None:
    w = Worker(["default"], concurrency=1, scan_interval=0.05)
    runner = threading.Thread(target=w.run, daemon=True)
    runner.start()
    try:
        pid = _result(backend_pid.enqueue())
        t0 = time.monotonic()
        while _alive(pid) and time.monotonic() - t0 < 10:  # closed ~1-2 s after the job
            time.sleep(0.05)
        assert not _alive(pid)
        assert _result(backend_pid.enqueue()) != pid  # a new one for new work
    finally:
        w.stop()
        runner.join(15)


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_a_connection_the_server_ended_does_not_fail_the_next_job(
    project: dict[str, str], max_age: Callable[[int | None], None]
) -> None:
    for age in (0, 600):  # a kept connection, and a persistent one
        max_age(age)
        first = killed_under_it.enqueue()
        after = backend_pid.enqueue()
        w = burst()
        assert w.failed == 0, get_queue("default").dead_letters()
        assert after.result() != first.result()


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_a_job_that_failed_its_own_connection_does_not_fail_the_next(
    project: dict[str, str], max_age: Callable[[int | None], None]
) -> None:
    suicide.enqueue()
    after = backend_pid.enqueue()
    w = burst()
    assert w.failed == 1 and isinstance(after.result(), int)


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("job", [leave_atomic, autocommit_off])
def test_a_transaction_left_open_is_rolled_back_before_the_next_job(
    project: dict[str, str], max_age: Callable[[int | None], None], job: Any
) -> None:
    job.enqueue("never committed")
    counted = count_articles.enqueue()
    w = burst()
    assert w.failed == 0
    assert counted.result() == 0
    assert not Article.objects.filter(title="never committed").exists()
    assert connection.get_autocommit()


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_a_failed_query_in_a_transaction_left_open_does_not_fail_the_next_job(
    project: dict[str, str], max_age: Callable[[int | None], None]
) -> None:
    failed_query_left_open.enqueue()
    counted = count_articles.enqueue()
    w = burst()
    assert w.failed == 0 and counted.result() == 0


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_an_isolated_child_never_uses_the_parent_connection(
    project: dict[str, str], max_age: Callable[[int | None], None]
) -> None:
    before = backend_pid.enqueue()
    child = backend_pid_in_child.enqueue()
    after = backend_pid.enqueue()
    w = burst()
    assert w.failed == 0, get_queue("default").dead_letters()
    assert child.result() not in (before.result(), after.result())
    assert not _alive(child.result())  # the child closed its own


@pytest.mark.django_db(transaction=True)
def test_jobs_that_use_no_database_cost_no_database_work(
    project: dict[str, str], opened: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from testproject.demo import tasks

    passes: list[int] = []
    real = dbconn.connections

    class Counted:
        def all(self, initialized_only: bool = False) -> Any:
            passes.append(1)
            return real.all(initialized_only=initialized_only)

    monkeypatch.setattr(dbconn, "connections", Counted())
    tasks.noop.enqueue_many([()] * 50)
    w = burst()
    assert w.processed == 50
    assert opened == []  # no connection opened by the worker
    assert len(passes) <= 4  # the first check of the thread finds none; then none at all
