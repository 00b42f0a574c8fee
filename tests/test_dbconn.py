"""dbconn.tidy: Django's connection check around a job, skipped while a thread holds none."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from django_zqueue import dbconn


def in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a fresh thread (its own connections and flag); return its result."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    if errors:
        raise errors[0]
    return out[0]


#: closing needs a real server: Django never closes an in-memory SQLite database
#: (pytest-django's test database on SQLite); CI runs these on PostgreSQL (-m orm)
needs_server = pytest.mark.skipif(
    connection.vendor == "sqlite", reason="in-memory SQLite connections are never closed"
)


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the close_old_connections calls tidy makes (the real function still runs)."""
    calls: list[int] = []
    real = dbconn.close_old_connections

    def counted() -> None:
        calls.append(1)
        real()

    monkeypatch.setattr(dbconn, "close_old_connections", counted)
    return calls


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_a_connection_past_its_age_is_closed_after_the_job(
    checks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)  # Django's default

    def job() -> tuple[bool, bool, int]:
        dbconn.tidy()  # first check of the thread: nothing open
        before = len(checks)
        connection.ensure_connection()  # the "task" opens one
        opened = connection.connection is not None
        dbconn.tidy()
        return opened, connection.connection is None, len(checks) - before

    opened, closed, checked = in_thread(job)
    assert opened and closed and checked == 1


@pytest.mark.django_db(transaction=True)
def test_no_check_while_the_thread_holds_no_connection(checks: list[int]) -> None:
    def jobs() -> int:
        for _ in range(5):
            dbconn.tidy()
        return len(checks)

    assert in_thread(jobs) == 1  # the first check finds none open; then none until one is


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_is_checked_each_time(
    checks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 600)

    def jobs() -> tuple[int, bool]:
        connection.ensure_connection()
        for _ in range(3):
            dbconn.tidy()
        kept = connection.connection is not None
        connection.close()  # closed elsewhere: the next check notices and stops checking
        dbconn.tidy()
        dbconn.tidy()
        return len(checks), kept

    count, kept = in_thread(jobs)
    assert kept and count == 4


@pytest.mark.orm
@needs_server
@pytest.mark.django_db(transaction=True)
def test_a_broken_connection_is_closed(checks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 600)

    def job() -> bool:
        connection.ensure_connection()
        connection.errors_occurred = True  # as after a failed query
        connection.connection.close()  # the server went away
        dbconn.tidy()
        return connection.connection is None

    assert in_thread(job)
