"""``manage.py zqueue_doctor``: one line per finding, with what to do; exit 1 on errors."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_zqueue import conf, get_queue
from django_zqueue.conf.redis_url import redacted_url
from django_zqueue.engine.redis.connection import server_time_ms
from django_zqueue.engine.redis.embedded import free_port
from django_zqueue.ops import doctor
from django_zqueue.tasks.schedules import Scheduler
from testproject.demo import tasks

from .redis_private import PrivateRedis

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[list[str], str | None]:
    """(lines printed, the CommandError's message or None)."""
    out = io.StringIO()
    try:
        call_command("zqueue_doctor", *args, stdout=out, no_color=True)
        error = None
    except CommandError as exc:
        error = str(exc)
    return out.getvalue().splitlines(), error


def redis_now(name: str = "default") -> int:
    q = get_queue(name)
    return server_time_ms(q.engine._client, q.engine._keys.ready)


@pytest.fixture
def synced(project: dict[str, str]) -> dict[str, str]:
    """The project's queues under the test's prefix, schedules synced as a worker would."""
    Scheduler().sync()
    return project


def test_a_healthy_setup_has_no_warning(synced: dict[str, str]) -> None:
    lines, error = run()
    assert error is None
    assert lines[0] == "ok       settings: ZQUEUE passes the system checks"
    assert lines[1].startswith(f"ok       redis: {redacted_url(conf.get_config().redis_url)}")
    assert "ok       tasks: " in "\n".join(lines)
    assert (
        "note     workers: queue 'default': no live worker; 0 ready, 0 delayed, 0 running, 0 dead"
    ) in lines
    assert "ok       schedules: 1 schedule in Redis, none late" in lines
    assert "ok       admin: the dashboard's permissions exist (ZQueue > Queues)" in lines
    assert not [line for line in lines if line.startswith(("WARNING", "ERROR"))]
    assert lines[-1] == "no error, no warning"


def test_jobs_waiting_without_a_worker_are_an_error(synced: dict[str, str]) -> None:
    add = tasks.add.using(on_commit=False)  # the test's transaction never commits
    add.enqueue(1, 2)
    add.enqueue(3, 4)
    lines, error = run()
    assert (
        "ERROR    workers: queue 'default': 2 jobs ready and no live worker (none seen in the "
        "last 30 s) -> start one: python manage.py zqueue_worker --queues default (or read the "
        "logs of the one that should run)"
    ) in lines
    assert error == "1 error and 0 warnings: see the lines above, and docs/troubleshooting.md"
    q = get_queue("default")
    entry = {"threads": 4, "seen": int(time.time() * 1000), "host": "h", "pid": 1}
    q.engine._client.hset(q.engine._keys.workers, "h:1:abcd", json.dumps(entry))
    lines, error = run()
    assert error is None
    assert (
        "ok       workers: queue 'default': 4 worker threads live; 2 ready, 0 delayed, "
        "0 running, 0 dead"
    ) in lines


def test_overdue_delayed_jobs_and_expired_leases_mean_no_scanner(synced: dict[str, str]) -> None:
    q = get_queue("default")
    noop = tasks.noop.using(on_commit=False)  # the test's transaction never commits
    noop.enqueue()
    (msg,), _ = q.claim(1, consumer="gone")
    q.engine._client.zadd(q.engine._keys.leased, {msg.tag: redis_now() - 300_000}, xx=True)
    later = noop.enqueue_in(3600)
    q.engine._client.zadd(q.engine._keys.delayed, {later.id: redis_now() - 90_000}, xx=True)
    lines, error = run("--problems-only")
    assert lines == [
        "ERROR    scanner: queue 'default': 1 delayed job due for up to 90 seconds and still "
        "waiting: no worker claims from this queue and no scanner runs -> run a worker (its "
        "embedded scanner promotes them: no --no-scanner), or python manage.py zqueue_scanner "
        "--queues default",
        "ERROR    scanner: queue 'default': 1 lease expired up to 5 minutes ago and not recovered: "
        "no scanner runs, so those jobs are neither retried nor dead -> run a worker without "
        "--no-scanner, or python manage.py zqueue_scanner --queues default",
    ]
    assert error == "2 errors and 0 warnings: see the lines above, and docs/troubleshooting.md"
    call_command("zqueue_scanner", "--once", stdout=io.StringIO())
    lines, error = run("--problems-only")
    assert not [line for line in lines if "scanner:" in line]


def test_dead_letters_are_a_warning_with_the_newest_error(synced: dict[str, str]) -> None:
    q = get_queue("default")
    q.publish({"task": "x"}, tag="doomed", max_retries=0)
    (msg,), _ = q.claim(1)
    q.nack(msg, "builtins.RuntimeError: boom\nTraceback ...")
    lines, error = run("-v", "0")
    assert lines == [
        "WARNING  dead letters: queue 'default': 1 dead letter; the newest failed with: "
        "builtins.RuntimeError: boom -> python manage.py zqueue_dead default list, then "
        "requeue or purge",
        "no error, 1 warning: see the lines above",
    ]
    assert error is None


def test_schedules_not_synced_late_or_paused(project: dict[str, str]) -> None:
    name = "testproject.demo.tasks.heartbeat"
    lines, _ = run()
    assert (
        f"WARNING  schedules: schedule '{name}' is declared but not in Redis, so it never "
        "fires: no worker or scanner has started since it was added -> start a worker or "
        "zqueue_scanner (they sync at start), or python manage.py zqueue_schedules sync"
    ) in lines
    Scheduler().sync()
    q = get_queue("default")
    q.engine._client.zadd(q.engine._sched_keys.sched, {name: redis_now() - 600_000}, xx=True)
    lines, error = run()
    assert (
        f"ERROR    schedules: schedule '{name}' is 10 minutes late: no scanner fires it -> run a "
        "worker without --no-scanner, or python manage.py zqueue_scanner --queues default"
    ) in lines
    assert error is not None
    call_command("zqueue_schedules", "pause", name, stdout=io.StringIO())
    lines, error = run()
    assert (
        f"note     schedules: schedule '{name}' is paused -> python manage.py zqueue_schedules "
        f"resume {name}"
    ) in lines
    assert error is None


def test_clock_skew(synced: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    class Skewed:
        perf_counter = staticmethod(time.perf_counter)
        offset = 0.0

        @classmethod
        def time(cls) -> float:
            return time.time() + cls.offset

    monkeypatch.setattr(doctor.server, "time", Skewed)  # the clock check's module
    Skewed.offset = 5.0
    lines, error = run("--problems-only")
    assert lines[0].startswith("WARNING  clock: this host's clock is 5.0 s ahead of Redis'")
    assert lines[0].endswith(
        "enqueue_at() times shift by as much, and from 30 s the workers of other hosts look "
        "dead -> synchronise the clocks with NTP (timedatectl set-ntp true, or chrony) on this "
        "host and on Redis' host"
    )
    assert error is None
    Skewed.offset = -45.0
    lines, error = run("--problems-only")
    assert lines[0].startswith("ERROR    clock: this host's clock is 45.0 s behind Redis'")
    assert error is not None


def test_eviction_policy(tmp_path: Path, project: dict[str, str]) -> None:
    server = PrivateRedis(tmp_path / "lru", "--maxmemory-policy", "allkeys-lru")
    try:
        with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": server.url}):
            try:
                lines, _ = run("--problems-only")
            finally:
                conf.reset()
    finally:
        server.stop()
    assert (
        "WARNING  eviction: Redis maxmemory-policy is 'allkeys-lru': Redis may delete "
        "django_zqueue's keys (whole queues of jobs) when it runs out of memory -> CONFIG SET "
        "maxmemory-policy noeviction, and the same in redis.conf (docs/operations.md, Redis "
        "configuration)"
    ) in lines


def test_redis_down_is_one_error_and_nothing_more(project: dict[str, str]) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": url}):
        try:
            lines, error = run()
        finally:
            conf.reset()
    port = url.split(":")[2].split("/")[0]
    assert lines == [
        "ok       settings: ZQUEUE passes the system checks",
        f"ERROR    redis: cannot reach Redis at {url}: Error 111 connecting to 127.0.0.1:{port}. "
        "Connection refused -> check that Redis is running there and that ZQUEUE['REDIS_URL'] "
        "points to it",
    ]
    assert error == "1 error and 0 warnings: see the lines above, and docs/troubleshooting.md"


def test_invalid_settings_are_reported_not_a_crash() -> None:
    with override_settings(ZQUEUE="redis://127.0.0.1:6379/0"):
        try:
            lines, error = run()
        finally:
            conf.reset()
    assert lines == [
        "ERROR    settings: (django_zqueue.E001) settings.ZQUEUE must be a dict, not a string "
        "('redis://127.0.0.1:6379/0'). -> Put the URL in a dict: ZQUEUE = {'REDIS_URL': "
        "'redis://127.0.0.1:6379/0'}."
    ]
    assert error is not None


def test_no_task_registered(synced: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from django_zqueue.tasks import registry

    monkeypatch.setattr(registry, "all_tasks", dict)
    lines, _ = run("--problems-only")
    assert lines[0] == (
        "WARNING  tasks: no @task is registered, so a worker has nothing it may run -> define "
        "tasks in a module named tasks.py in an installed app (the worker imports <app>.tasks "
        "of every app in INSTALLED_APPS)"
    )


def test_admin_permissions(synced: dict[str, str]) -> None:
    from django.contrib.auth.models import Permission, User

    User.objects.create_user("staff", is_staff=True)
    lines, error = run()
    assert error is None
    assert (
        "note     admin: 1 staff user without django_zqueue.view_queue: ZQueue > Queues is not "
        "in their admin -> grant 'Can view queue' (and 'Can see job arguments and errors', "
        "'Can requeue, delete and purge dead letters' as needed) in Authentication and "
        "Authorization > Groups"
    ) in lines
    Permission.objects.filter(content_type__app_label="django_zqueue").delete()
    lines, _ = run()
    assert (
        "WARNING  admin: the permissions manage_dead_letters, view_payload, view_queue are not "
        "in the database: only superusers see the dashboard -> python manage.py migrate (it "
        "creates them; the app has no table)"
    ) in lines


def test_findings_are_one_line_each(synced: dict[str, Any]) -> None:
    findings = doctor.diagnose()
    assert all("\n" not in f.line() for f in findings)


def test_the_persistence_note_says_every_job_is_lost_without_snapshots(
    redis_client: Any,
) -> None:
    """With AOF off and save '' (the test server's settings, or CONFIG refused), the note
    does not speak of a last snapshot that does not exist."""
    from django_zqueue.engine.redis.connection import RedisServer
    from django_zqueue.ops.doctor import _memory

    server = RedisServer(on=redis_client)
    snapshots = server.snapshots()
    notes = [f.message for f in _memory(server) if f.topic == "persistence"]
    aof = str(redis_client.config_get("appendonly").get("appendonly", "yes"))
    if aof == "no" and snapshots is False:
        assert notes and all("every job it holds is lost" in n for n in notes)
        assert not any("last snapshot" in n for n in notes)
    elif aof == "no" and snapshots is True:
        assert notes and all("last snapshot" in n for n in notes)


def test_functions_libraries_of_other_releases(tmp_path: Path, project: dict[str, str]) -> None:
    """The doctor names the scripts' library, and those another release left loaded with
    the command that removes one."""
    from django_zqueue.engine.scripts import SCRIPT_NAMES
    from django_zqueue.engine.scripts.source import library

    ours = library(SCRIPT_NAMES)
    server = PrivateRedis(tmp_path / "fn")
    try:
        client = server.client()
        client.function_load(ours.code.replace(ours.name[7:], "0" * 12))
        client.function_load("#!lua name=other_app\nredis.register_function('f', function() end)")
        with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": server.url}):
            try:
                before, _ = run()
                get_queue("default").publish({"task": "x", "args": [], "kwargs": {}})
                after, _ = run()
            finally:
                conf.reset()
    finally:
        server.stop()
    note = (
        "note     redis: 1 library of other django_zqueue releases loaded: "
        "zqueue_000000000000 -> once no process of those releases runs: redis-cli "
        "FUNCTION DELETE zqueue_000000000000"
    )
    assert f"ok       redis: the scripts' Functions library {ours.name} is not loaded yet " in (
        "\n".join(before)
    )
    assert note in before and note in after  # other_app is not ours to name
    assert f"ok       redis: the scripts' Functions library {ours.name} is loaded" in after


def test_the_protocol_library_is_this_releases_not_another_ones(
    tmp_path: Path, project: dict[str, str]
) -> None:
    """The wire protocol's library (loaded by a worker's start) is never named as one of
    another release's; the doctor says at which build it is loaded, or that it is missing
    with the one-line fix."""
    from django_zqueue.engine.scripts import package_version
    from django_zqueue.engine.scripts.source import PROTOCOL_LIBRARY, protocol_library

    ours = package_version()
    server = PrivateRedis(tmp_path / "proto")
    try:
        client = server.client()
        with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": server.url}):
            try:
                missing, _ = run()
                call_command("zqueue_protocol", stdout=io.StringIO())
                loaded, _ = run()
                client.function_load(protocol_library("0.0.1").code, replace=True)
                older, older_error = run()
                client.function_load(protocol_library("99.0.0").code, replace=True)
                newer, _ = run()
                other = protocol_library(ours).code.replace(
                    "-- django_zqueue: wire", "-- dev: wire"
                )
                client.function_load(other, replace=True)
                rebuilt, _ = run()
                client.function_delete(PROTOCOL_LIBRARY)
                lost, _ = run()
            finally:
                conf.reset()
    finally:
        server.stop()
    for lines in (missing, loaded, older, newer, rebuilt, lost):
        assert not [line for line in lines if "other django_zqueue releases" in line], lines
    fix = "python manage.py zqueue_protocol (a worker's start does it too)"
    assert (
        f"note     redis: the wire protocol's library {PROTOCOL_LIBRARY} is not loaded: "
        f"producers in other languages get 'Function not found' -> {fix}"
    ) in missing
    assert (
        f"ok       redis: the wire protocol's library {PROTOCOL_LIBRARY} is loaded, at this "
        f"release's build ({ours})"
    ) in loaded
    assert (
        f"WARNING  redis: the wire protocol's library {PROTOCOL_LIBRARY} is loaded at build "
        f"0.0.1, older than this release ({ours}): producers in other languages publish as "
        f"that release did -> {fix}"
    ) in older
    assert older_error is None
    assert (
        f"note     redis: the wire protocol's library {PROTOCOL_LIBRARY} is loaded at build "
        f"99.0.0, newer than this release ({ours}): this release keeps it"
    ) in newer
    assert (
        f"note     redis: the wire protocol's library {PROTOCOL_LIBRARY} is loaded at build "
        f"{ours} with other text than this release's (another build of the same version) -> "
        f"{fix} replaces it"
    ) in rebuilt
    # the queues are set up for producers (their proto hashes): a missing library is a warning
    assert (
        f"WARNING  redis: the wire protocol's library {PROTOCOL_LIBRARY} is not loaded: "
        f"producers in other languages get 'Function not found' -> {fix}"
    ) in lost
