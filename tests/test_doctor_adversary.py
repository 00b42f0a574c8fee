"""``zqueue_doctor`` as an adversary sees it: every key it reads of the wrong type (the
doctor names it, ``--repair`` and ``--repair --yes`` run, never a traceback), records
moving between sets while it reads (no false orphan), repairs that find nothing left to
write (not reported as made), a sequence counter below the one in use, and a ``meta`` of
the wrong type read by the Python side (``CorruptKey``, not a raw ``WRONGTYPE``)."""

from __future__ import annotations

import io
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from django_zqueue import get_queue
from django_zqueue.keys import KEY_TYPES
from django_zqueue.queue import Queue
from django_zqueue.read.schedules import schedules as read_schedules
from django_zqueue.schedules import Scheduler

pytestmark = pytest.mark.django_db


def run(command: str, *args: str) -> tuple[list[str], str | None]:
    """(lines printed, the CommandError's message or None); any other exception (a
    traceback) fails the test."""
    out = io.StringIO()
    try:
        call_command(command, *args, stdout=out, no_color=True)
        error = None
    except CommandError as exc:
        error = str(exc)
    return out.getvalue().splitlines(), error


def wrong(client: redis.Redis, key: str, kind: str) -> None:
    """Replace ``key`` by a value of a type other than ``kind``."""
    client.delete(key)
    if kind == "string":
        client.hset(key, "x", "1")
    else:
        client.set(key, "garbage")


@pytest.fixture
def q(project: dict[str, str]) -> Queue:
    """The default queue with a job in each of ready and dead, and the schedules synced."""
    Scheduler().sync()
    q = get_queue("default")
    q.publish({"task": "x", "args": [], "kwargs": {}}, tag="r1")
    q.publish({"task": "x", "args": [], "kwargs": {}}, tag="d1", max_retries=0)
    (msg,), _ = q.claim(1)
    q.nack(msg, "boom")
    return q


@pytest.mark.parametrize("field", sorted(KEY_TYPES))
def test_every_key_of_the_wrong_type_is_named_never_a_traceback(
    q: Queue, redis_client: redis.Redis, field: str
) -> None:
    key = getattr(q.keys, field)
    wrong(redis_client, key, KEY_TYPES[field])
    for args in [(), ("--repair",), ("--problems-only",)]:
        lines, error = run("zqueue_doctor", *args)
        assert any(key in line for line in lines if line.startswith("ERROR")), (args, lines)
        assert error is not None and "error" in error
    lines, error = run("zqueue_doctor", "--repair", "--yes")
    made = [line for line in lines if line.startswith("repaired: ")]
    named = [line for line in lines if line.startswith("ERROR") and key in line]
    assert bool(made) != bool(named), lines  # repaired, or named as not repairable
    if made:
        assert key in made[0] and not [x for x in lines if x.startswith("ERROR") and key in x]


@pytest.mark.parametrize("field", ["sched", "sched_defs", "sched_last"])
def test_schedules_list_with_a_schedule_key_of_the_wrong_type_is_one_line(
    q: Queue, redis_client: redis.Redis, field: str
) -> None:
    key = getattr(q.keys, field)
    wrong(redis_client, key, KEY_TYPES[field])
    for args in [("list",), ("pause", "testproject.demo.tasks.heartbeat")]:
        lines, error = run("zqueue_schedules", *args)
        assert error is not None and "\n" not in error, (args, lines, error)
        assert "zqueue_doctor" in error and "ZQ_CORRUPT_KEY" in error, (args, error)
        if args == ("list",):
            assert key in error
    run("zqueue_schedules", "sync")  # writes only what changed: no traceback either way


def test_schedule_entries_of_bad_values_are_listed_not_a_crash(
    q: Queue, redis_client: redis.Redis
) -> None:
    """A last firing without its job, a definition that is not JSON: the listing (and
    the doctor) go on."""
    name = "testproject.demo.tasks.heartbeat"
    redis_client.hset(q.keys.sched_last, name, "garbage")
    lines, error = run("zqueue_schedules", "list")
    assert error is None and any(line.startswith(name) for line in lines), lines
    redis_client.hset(q.keys.sched_defs, "broken", "{not json")
    lines, error = run("zqueue_schedules", "list")
    assert error is None and any(line.startswith(name) for line in lines), lines
    lines, _ = run("zqueue_doctor")
    assert any("schedules:" in line for line in lines), lines
    rows = {row.name: row for row in read_schedules([q.engine])}  # the admin's listing
    assert rows[name].last_job is None and rows[name].task == "testproject.demo.tasks.heartbeat"
    assert rows["broken"].task == ""


def test_a_meta_of_the_wrong_type_is_a_corrupt_key_on_every_read(
    make_queue: Any, redis_client: redis.Redis, project: dict[str, str]
) -> None:
    """The job records' hash of another type: each read of the Python side that meets it
    raises CorruptKey naming the fix (not redis-py's raw WRONGTYPE), and a command says
    it in one line."""
    from django_zqueue.exceptions import CorruptKey

    q = get_queue("default")
    tag = q.publish({"task": "x", "args": [], "kwargs": {}})
    wrong(redis_client, q.keys.meta, "hash")
    reads = {
        "info": lambda: q.info(tag),
        "read.info": lambda: q.read.info(tag),
        "dead_letters": lambda: q.read.infos([(tag, 0)]),
        "claim": lambda: q.claim(1),
    }
    for name, read in reads.items():
        with pytest.raises(CorruptKey, match="zqueue_doctor") as caught:
            read()
        assert "ZQ_CORRUPT_KEY" in str(caught.value), name
    _, error = run("zqueue_job", "default", tag)
    assert error is not None and "ZQ_CORRUPT_KEY" in error and "\n" not in error
