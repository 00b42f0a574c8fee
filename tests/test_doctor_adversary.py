"""``zqueue_doctor`` as an adversary sees it: every key it reads of the wrong type (the
doctor names it, ``--repair`` and ``--repair --yes`` run, never a traceback), records
moving between sets while it reads (no false orphan), repairs that find nothing left to
write (not reported as made), a sequence counter below the one in use, and a ``meta`` of
the wrong type read by the Python side (``CorruptKey``, not a raw ``WRONGTYPE``)."""

from __future__ import annotations

import io
import threading
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from django_zqueue import get_queue
from django_zqueue.engine.keys import KEY_TYPES
from django_zqueue.queue import Queue
from django_zqueue.read.schedules import schedules as read_schedules
from django_zqueue.tasks.schedules import Scheduler

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
    key = getattr(q.engine._keys, field)
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
    key = getattr(q.engine._keys, field)
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
    redis_client.hset(q.engine._keys.sched_last, name, "garbage")
    lines, error = run("zqueue_schedules", "list")
    assert error is None and any(line.startswith(name) for line in lines), lines
    redis_client.hset(q.engine._keys.sched_defs, "broken", "{not json")
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
    wrong(redis_client, q.engine._keys.meta, "hash")
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


def test_jobs_ending_or_moving_while_the_doctor_reads_are_no_orphans(
    make_queue: Any, redis_client: redis.Redis
) -> None:
    """On a live queue, jobs are claimed, acked (their record deleted) and released back
    (leased -> ready) while the orphan check reads: none is reported, as each is in a set
    or gone at every instant."""
    from django_zqueue.engine.keycheck import orphan_problems

    q = make_queue("live")
    q.publish_many([{"n": i} for i in range(3000)])
    stop = threading.Event()

    def churn() -> None:
        turn = 0
        while not stop.is_set():
            msgs, _ = q.claim(50, "churn")
            if not msgs:
                return
            turn += 1
            for m in msgs:
                if turn % 2:
                    q.ack(m)
                else:
                    q.release(m)

    worker = threading.Thread(target=churn)
    worker.start()
    found: list[Any] = []
    try:
        for _ in range(30):  # bounded: the churn ends once every job is acked
            found += orphan_problems(q.engine)
            if not worker.is_alive():
                break
    finally:
        stop.set()
        worker.join(30)
    assert [p.finding.message for p in found] == []


def test_a_repair_that_finds_the_value_changed_writes_nothing_and_says_so(
    q: Queue, redis_client: redis.Redis
) -> None:
    """Between the look and the repair, someone fixed the value (or a job came back to
    its set): the repair writes nothing and is not reported as made."""
    from django_zqueue.engine.keycheck import key_problems, orphan_problems

    redis_client.hset(q.engine._keys.stats, "acked", "x")
    redis_client.hset(q.engine._keys.ctr, "clock", "x")
    wrong(redis_client, q.engine._keys.notify, "list")
    q.publish({"task": "x", "args": [], "kwargs": {}}, tag="o1")
    score = redis_client.zscore(q.engine._keys.ready, "o1")
    redis_client.zrem(q.engine._keys.ready, "o1")  # an orphan
    problems = [p for p in (*key_problems(q.engine), *orphan_problems(q.engine)) if p.repair]
    assert len(problems) == 4
    redis_client.hset(q.engine._keys.stats, "acked", "7")
    redis_client.hset(q.engine._keys.ctr, "clock", "12")
    redis_client.delete(q.engine._keys.notify)
    redis_client.zadd(q.engine._keys.ready, {"o1": score})
    before = {
        k: redis_client.dump(k)
        for k in (q.engine._keys.stats, q.engine._keys.ctr, q.engine._keys.dead)
    }
    assert [p.repair.run() for p in problems if p.repair] == [False] * 4
    assert {k: redis_client.dump(k) for k in before} == before
    assert redis_client.hget(q.engine._keys.errors, "o1") is None
    # the command, on a value still bad: made and said; once more: nothing to repair
    redis_client.hset(q.engine._keys.stats, "acked", "x")
    lines, _ = run("zqueue_doctor", "--repair", "--yes")
    assert [x for x in lines if "repair" in x.split(":")[0]] == [
        f"repaired: {q.engine._keys.stats} acked: reset to 0"
    ]
    lines, _ = run("zqueue_doctor", "--repair", "--yes")
    assert "repair: nothing to repair" in lines


def test_a_sequence_below_the_one_in_use_is_reported_and_repaired(
    make_queue: Any, redis_client: redis.Redis
) -> None:
    """Strict mode orders a priority's jobs by ctr's seq: set below a sequence in the
    ready line (a restore of an old ctr, a hand edit, ctr deleted), new jobs would go
    ahead of older ones. The doctor names it; the repair sets seq to the largest in use.
    A job with a raw score is no sequence."""
    from django_zqueue.engine.keycheck import key_problems

    q = make_queue("seq")
    q.publish({"n": 1}, tag="a")
    q.publish({"n": 2}, tag="b", priority=5)
    q.publish({"n": 3}, tag="raw", score=123_456_789)  # score % 2^42 beyond any sequence
    assert key_problems(q.engine) == []
    in_use = int(redis_client.hget(q.engine._keys.ctr, "seq") or 0)
    for bad in (b"1", None):  # below; gone (a deleted ctr counts from 0)
        if bad is None:
            redis_client.hdel(q.engine._keys.ctr, "seq")
        else:
            redis_client.hset(q.engine._keys.ctr, "seq", bad)
        (problem,) = key_problems(q.engine)
        said = f"field seq is {int(bad or 0)}, below the sequence {in_use} of the ready job b"
        assert said in problem.finding.message
        assert problem.finding.level == "error" and problem.repair is not None
        assert problem.repair.run() is True
        assert int(redis_client.hget(q.engine._keys.ctr, "seq") or 0) == in_use
        assert key_problems(q.engine) == []
    late = q.publish({"n": 4}, tag="late")
    assert q.rank("a") is not None and q.rank(late) == q.rank("a") + 1  # after, not ahead


def test_jobs_published_while_the_doctor_reads_are_no_sequence_problem(
    make_queue: Any, redis_client: redis.Redis
) -> None:
    """The sequence moves on while the ready line is read: no finding."""
    from django_zqueue.engine.keycheck import key_problems

    q = make_queue("busy")
    q.publish_many([{"n": i} for i in range(2000)])
    stop = threading.Event()

    def publish() -> None:
        for i in range(20_000):  # bounded
            if stop.is_set():
                return
            q.publish({"n": i})

    writer = threading.Thread(target=publish)
    writer.start()
    found: list[Any] = []
    try:
        for _ in range(20):
            found += key_problems(q.engine)
    finally:
        stop.set()
        writer.join(30)
    assert [p.finding.message for p in found] == []


def test_values_that_do_not_decode_are_no_traceback(q: Queue, redis_client: redis.Redis) -> None:
    """Keys of the right type holding garbage: a worker entry that is not JSON, a dead
    letter whose record is gone or does not decode, a last error of the wrong type."""
    redis_client.hset(q.engine._keys.workers, "w:1:x", "garbage")
    redis_client.zadd(q.engine._keys.dead, {"ghost": 1})  # no record
    redis_client.zadd(q.engine._keys.dead, {"junk": 2})
    redis_client.hset(q.engine._keys.meta, "junk", b"\xc1\xff not a record")
    redis_client.hset(q.engine._keys.errors, "junk", b"\xff\xfe")
    for args in [(), ("--repair",), ("--repair", "--yes")]:
        lines, _ = run("zqueue_doctor", *args)
        assert any(line.startswith(("ok", "note", "WARNING", "ERROR")) for line in lines)
        assert any("dead letters" in line or "queue 'default'" in line for line in lines), lines


def test_keys_deleted_while_the_doctor_reads_are_no_traceback(q: Queue) -> None:
    """Another process clears the queue (every key deleted) and publishes again while the
    doctor and its repairs read: findings, never a traceback."""
    stop = threading.Event()

    def churn() -> None:
        for i in range(5_000):  # bounded
            if stop.is_set():
                return
            if i % 50 == 0:
                q.clear()
            q.publish({"task": "x", "args": [], "kwargs": {}})

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        for args in [(), ("--repair", "--yes"), (), ("--repair", "--yes")]:
            lines, _ = run("zqueue_doctor", *args)
            assert lines, args
    finally:
        stop.set()
        writer.join(30)
