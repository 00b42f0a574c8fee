"""A new user's first mistakes each get one line that says what to do (issue 22).

Every test asserts the message the user sees, not only the exception type.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.db import transaction
from django.test import override_settings

from django_zqueue import InvalidArgument, conf, get_queue, task
from django_zqueue.conf.redis_url import redacted_url
from django_zqueue.engine.redis.embedded import free_port
from django_zqueue.tasks import registry
from django_zqueue.worker import Worker
from testproject.demo import tasks

from .conftest import snapshot

ROOT = Path(__file__).resolve().parent.parent
QUEUES = {"default": {}, "emails": {}, "reports": {}}  # the ones the project's TASKS names


@pytest.fixture
def redis_down() -> Iterator[str]:
    """The project's settings with REDIS_URL on a port nothing listens on."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": url}):
        yield url
    conf.reset()


# ------------------------------------------------------------------ manage.py check


@pytest.mark.parametrize(
    ("value", "message", "hint"),
    [
        (
            "redis://:secret@127.0.0.1:6379/0",
            "(django_zqueue.E001) settings.ZQUEUE must be a dict, not a string "
            "('redis://:***@127.0.0.1:6379/0').",
            "HINT: Put the URL in a dict: ZQUEUE = {'REDIS_URL': 'redis://:***@127.0.0.1:6379/0'}.",
        ),
        (
            ["redis://127.0.0.1:6379/0"],
            "(django_zqueue.E001) settings.ZQUEUE must be a dict, not list.",
            "HINT: For example ZQUEUE = {'REDIS_URL': 'redis://127.0.0.1:6379/0', "
            "'QUEUES': {'default': {}}} (docs/settings.md).",
        ),
    ],
)
def test_zqueue_of_the_wrong_type_is_one_check_error(value: Any, message: str, hint: str) -> None:
    with override_settings(ZQUEUE=value):
        with pytest.raises(SystemCheckError) as err:
            call_command("check")
    conf.reset()
    text = str(err.value)
    assert message in text
    assert hint in text
    assert "secret" not in text
    assert "1 issue" in text  # no AttributeError, and no E104 about the queues of TASKS


def test_a_task_on_an_unknown_queue_fails_the_check() -> None:
    @task(name="first_hour.on_nosuch", queue="nosuch")
    def on_nosuch() -> None: ...

    try:
        with override_settings(ZQUEUE={"QUEUES": QUEUES}):
            with pytest.raises(SystemCheckError) as err:
                call_command("check")
    finally:
        registry._tasks.pop("first_hour.on_nosuch")
        conf.reset()
    text = str(err.value)
    assert (
        "(django_zqueue.E015) Task 'first_hour.on_nosuch' uses queue 'nosuch', which is not in "
        "ZQUEUE['QUEUES'] (configured: default, emails, reports): every enqueue of it would fail."
    ) in text
    assert (
        "HINT: Add 'nosuch' to ZQUEUE['QUEUES'], or give @task(queue=...) one of the "
        "configured queues."
    ) in text
    with override_settings(ZQUEUE={"QUEUES": QUEUES}):
        call_command("check")  # gone with the task
    conf.reset()


def test_a_schedule_naming_an_unknown_task_fails_the_check() -> None:
    schedules = {"nightly": {"task": "shop.tasks.nosuch", "cron": "0 3 * * *"}}
    with override_settings(ZQUEUE={"QUEUES": QUEUES, "SCHEDULES": schedules}):
        with pytest.raises(SystemCheckError) as err:
            call_command("check")
    conf.reset()
    assert (
        "ZQUEUE['SCHEDULES']['nightly'] names task 'shop.tasks.nosuch', which is not a "
        "registered @task"
    ) in str(err.value)
    assert "HINT: Use the dotted name of a function decorated with" in str(err.value)


# ------------------------------------------------------------------ @task and enqueue


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_max_retries_is_checked_at_decoration(bad: Any) -> None:
    with pytest.raises(InvalidArgument) as err:
        task(name="first_hour.bad_retries", max_retries=bad)(lambda: None)
    assert str(err.value) == (
        "task 'first_hour.bad_retries': max_retries must be an integer in [0, 1000] (retries "
        f"after the first run; 0: never retried), got {bad!r}"
    )
    assert registry.get("first_hour.bad_retries") is None


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((1, 2, 3), {}, "too many positional arguments"),
        ((1,), {}, "missing a required argument: 'b'"),
        ((1, 2), {"c": 3}, "got an unexpected keyword argument 'c'"),
        ((1,), {"a": 2}, "multiple values for argument 'a'"),
        (
            (1,),
            {"c": 2},
            "missing a required argument: 'b'; got an unexpected keyword argument 'c'",
        ),
        ((1, 2), {"c": 3, "d": 4}, "got unexpected keyword arguments 'c', 'd'"),
        ((), {"a": 1, "b": 2, "z": 3}, "got an unexpected keyword argument 'z'"),
    ],
)
def test_enqueue_checks_the_call_against_the_signature(
    zqueue_settings: dict[str, Any],
    redis_client: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    message: str,
) -> None:
    before = snapshot(redis_client, zqueue_settings["PREFIX"])
    for enqueue in (
        tasks.add.enqueue,
        lambda *a, **k: tasks.add.enqueue_in(60, *a, **k),
        tasks.add.using(on_commit=False).enqueue,
    ):
        with pytest.raises(TypeError) as err:
            enqueue(*args, **kwargs)
        assert str(err.value) == (
            f"testproject.demo.tasks.add(a, b): {message} (nothing was enqueued)"
        )
    assert snapshot(redis_client, zqueue_settings["PREFIX"]) == before


def test_enqueue_many_names_the_bad_call(
    zqueue_settings: dict[str, Any], redis_client: Any
) -> None:
    before = snapshot(redis_client, zqueue_settings["PREFIX"])
    with pytest.raises(TypeError) as err:
        tasks.add.enqueue_many([(1, 2), (3, 4, 5)])
    assert str(err.value) == (
        "call 1 of enqueue_many: testproject.demo.tasks.add(a, b): too many positional "
        "arguments (nothing was enqueued)"
    )
    assert snapshot(redis_client, zqueue_settings["PREFIX"]) == before


def test_calls_that_bind_are_accepted(zqueue_settings: dict[str, Any]) -> None:
    jobs = tasks.add.enqueue_many([(1, 2), {"a": 3, "b": 4}, ((5,), {"b": 6})])
    jobs.append(tasks.add.enqueue(a=7, b=8))
    jobs.append(tasks.sleep.enqueue(0))  # defaults
    Worker(["default"], burst=True, scan_interval=0.05).run()
    assert [j.result() for j in jobs[:4]] == [3, 7, 11, 15]


@pytest.mark.django_db(transaction=True)
def test_enqueue_in_a_transaction_checks_the_signature_at_the_call(
    zqueue_settings: dict[str, Any],
) -> None:
    with pytest.raises(TypeError, match=r"add\(a, b\): too many positional arguments"):
        with transaction.atomic():
            tasks.add.enqueue(1, 2, 3)
    assert get_queue("default").total_count() == 0


# ------------------------------------------------------------------ publish after commit


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_publish_failing_after_commit_logs_one_line(
    zqueue_settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    get_queue("default").publish("x", tag="taken")
    caplog.set_level(logging.DEBUG)
    with transaction.atomic():
        lost = tasks.noop.using(tag="taken").enqueue()
        kept = tasks.noop.enqueue()
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in errors] == ["django_zqueue.task"]  # Django logs nothing more
    assert not errors[0].exc_info  # one line, no traceback
    assert errors[0].getMessage() == (
        f"event=publish_after_commit_failed task=testproject.demo.tasks.noop queue=default "
        f"jobs={lost.id} error=\"DuplicateJob: job tag already in use: 'taken' (ready)\""
    )
    assert kept.exists()


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_publish_with_redis_down_after_commit_logs_one_line(
    redis_down: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with transaction.atomic():
        job = tasks.noop.enqueue()
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and not errors[0].exc_info
    port = redis_down.rsplit(":", 1)[1].split("/")[0]
    assert errors[0].getMessage() == (
        f"event=publish_after_commit_failed task=testproject.demo.tasks.noop queue=default "
        f'jobs={job.id} error="QueueUnavailable: Redis is unavailable: Error 111 connecting '
        f"to 127.0.0.1:{port}. Connection refused.\" hint=\"ZQUEUE['OUTBOX'] = True writes "
        'the jobs in the transaction and publishes them once Redis answers (docs/outbox.md)"'
    )


# ------------------------------------------------------------------ commands, Redis down


@pytest.mark.parametrize(
    "command",
    [
        ["zqueue_stats"],
        ["zqueue_stats", "--json"],
        ["zqueue_dead", "default", "list"],
        ["zqueue_dead", "default", "requeue"],
        ["zqueue_dead", "default", "purge", "--yes"],
        ["zqueue_job", "default", "abc"],
        ["zqueue_scanner", "--once"],
        ["zqueue_schedules", "list"],
        ["zqueue_schedules", "sync"],
    ],
)
def test_commands_with_redis_down_raise_one_command_error(
    redis_down: str, command: list[str]
) -> None:
    with pytest.raises(CommandError) as err:
        call_command(*command)
    port = redis_down.rsplit(":", 1)[1].split("/")[0]
    assert str(err.value) == (
        f"cannot reach Redis at {redis_down}: Error 111 connecting to 127.0.0.1:{port}. "
        "Connection refused. Check that Redis is running there and that "
        "ZQUEUE['REDIS_URL'] points to it."
    )


def test_command_with_redis_down_prints_one_line(project: dict[str, str]) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    out = subprocess.run(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), "zqueue_stats"],
        env={**project, "ZQUEUE_REDIS_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        f"CommandError: cannot reach Redis at {url}: Error 111 connecting to "
        f"127.0.0.1:{url.split(':')[2].split('/')[0]}. Connection refused. Check that Redis "
        "is running there and that ZQUEUE['REDIS_URL'] points to it."
    ]


def _refused(url: str) -> str:
    port = url.rsplit(":", 1)[1].split("/")[0]
    return (
        f"cannot reach Redis at {url}: Error 111 connecting to 127.0.0.1:{port}. Connection "
        "refused. Check that Redis is running there and that ZQUEUE['REDIS_URL'] points to it."
    )


def test_burst_worker_with_redis_down_prints_one_line(project: dict[str, str]) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    out = subprocess.run(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), "zqueue_worker", "--burst"],
        env={**project, "ZQUEUE_REDIS_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert "Traceback" not in out.stderr
    assert lines[-1] == f"CommandError: {_refused(url)}"
    assert all(" INFO " in line for line in lines[:-1])  # the worker's own start lines


@pytest.mark.slow
def test_demo_with_redis_down_prints_one_line(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "ZQUEUE_"))}
    env["ZQUEUE_REDIS_URL"] = url
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'demo.sqlite3'}"
    out = subprocess.run(
        [sys.executable, str(ROOT / "testproject" / "run_demo.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert out.stdout == f"redis: using ZQUEUE_REDIS_URL={url}\n"
    assert out.stderr.splitlines() == [f"demo: {_refused(url)}"]


def test_wrong_password_says_so(zqueue_settings: dict[str, Any]) -> None:
    import redis

    from django_zqueue.management.errors import explain_redis_error

    assert explain_redis_error(redis.AuthenticationError("invalid username-password pair")) == (
        f"Redis at {redacted_url(zqueue_settings['REDIS_URL'])} refused the login: "
        "invalid username-password pair. Check the user name and password in "
        "ZQUEUE['REDIS_URL']."
    )


# ------------------------------------------------------------------ zqueue_dead


def _dead_letters(n: int) -> list[str]:
    q = get_queue("default")
    for i in range(n):
        q.publish({"task": "nosuch"}, tag=f"dead{i}", max_retries=0)
    msgs, _ = q.claim(n)
    for m in msgs:
        q.nack(m, "boom")
    assert q.counts()["dead"] == n
    return [m.tag for m in msgs]


@pytest.mark.parametrize("answer", ["no", "", "y"])
def test_purge_asks_and_anything_but_yes_cancels(
    zqueue_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    _dead_letters(2)
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or answer)
    with pytest.raises(CommandError) as err:
        call_command("zqueue_dead", "default", "purge")
    assert str(err.value) == "purge cancelled: nothing was deleted (--yes skips this question)"
    assert asked == [
        "This deletes 2 dead letters of queue 'default' for good (their arguments and errors "
        "too).\nType 'yes' to continue, or 'no' to cancel: "
    ]
    assert get_queue("default").counts()["dead"] == 2


def test_purge_without_a_terminal_is_cancelled(
    zqueue_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _dead_letters(1)

    def no_terminal(prompt: str) -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", no_terminal)
    with pytest.raises(CommandError, match="purge cancelled: nothing was deleted"):
        call_command("zqueue_dead", "default", "purge")
    assert get_queue("default").counts()["dead"] == 1


def test_purge_after_yes(
    zqueue_settings: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _dead_letters(1)
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    call_command("zqueue_dead", "default", "purge")
    assert capsys.readouterr().out == "purged 1 dead letter\n"
    assert get_queue("default").counts()["dead"] == 0


@pytest.mark.parametrize("flag", ["--yes", "--noinput", "--no-input"])
def test_purge_with_yes_does_not_ask(
    zqueue_settings: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str,
) -> None:
    _dead_letters(2)

    def must_not_ask(prompt: str) -> str:
        raise AssertionError("asked")

    monkeypatch.setattr("builtins.input", must_not_ask)
    call_command("zqueue_dead", "default", "purge", flag)
    assert capsys.readouterr().out == "purged 2 dead letters\n"
    assert get_queue("default").counts()["dead"] == 0


def test_requeue_messages_count_in_the_singular_and_plural(
    zqueue_settings: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, c = _dead_letters(3)
    call_command("zqueue_dead", "default", "requeue", a)
    assert capsys.readouterr().out == "requeued 1 dead letter\n"
    with pytest.raises(CommandError) as err:
        call_command("zqueue_dead", "default", "requeue", b, "nosuch")
    assert str(err.value) == "requeued 1 of 2: the other is not a dead letter"
    with pytest.raises(CommandError) as err:
        call_command("zqueue_dead", "default", "requeue", c, "nosuch", "nosuch2")
    assert str(err.value) == "requeued 1 of 3: the others are not dead letters"
    call_command("zqueue_dead", "default", "requeue")
    assert capsys.readouterr().out == "requeued 0 dead letters\n"


# ------------------------------------------------------------------ the worker's log lines


def _worker_output(project: dict[str, str], *args: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "testproject" / "manage.py"),
            "zqueue_worker",
            "--burst",
            *args,
        ],
        env=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_worker_says_how_to_see_per_job_lines(project: dict[str, str]) -> None:
    """At the default verbosity one line says that -v 2 shows a line per job; with -v 2
    each job has its job_done line, as docs/commands.md and the tutorial show."""
    job = tasks.add.enqueue(1, 2)
    default = _worker_output(project, "--queues", "default")
    assert (
        'INFO event=worker_logging per_job=off hint="-v 2 logs one line per job (job_start, '
        'job_done); failures are logged at every verbosity"'
    ) in default
    assert "event=job_done" not in default
    assert job.result() == 3
    job = tasks.add.enqueue(2, 3)
    verbose = _worker_output(project, "--queues", "default", "-v", "2")
    assert "event=worker_logging" not in verbose
    assert (
        f"DEBUG event=job_done queue=default job={job.id} task=testproject.demo.tasks.add "
        "attempt=1 ms="
    ) in verbose


def test_requeue_with_front_retries_now(
    zqueue_settings: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    dead = _dead_letters(2)
    q = get_queue("default")
    q.publish({"task": "nosuch"}, tag="waiting", priority=1000)
    call_command("zqueue_dead", "default", "requeue", dead[0], "--front")
    call_command("zqueue_dead", "default", "requeue", dead[1])
    assert capsys.readouterr().out == "requeued 1 dead letter\n" * 2
    assert [q.rank(dead[0]), q.rank("waiting"), q.rank(dead[1])] == [0, 1, 2]
