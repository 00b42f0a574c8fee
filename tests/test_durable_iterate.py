"""``durable.iterate``: a loop whose cursor is a durable record, resumed where it stopped
after a stop between items (SIGTERM, ``max_runtime``), a crash or a retry."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from django_zqueue import durable
from django_zqueue.exceptions import IterationPaused, JobCancelled, StepError
from django_zqueue.queue import Message, Queue
from django_zqueue.queue.durable_calls import durable_records
from django_zqueue.tasks.context import JobContext, set_current_job

from .conftest import snapshot
from .test_durable import claim


@contextmanager
def running(
    q: Queue, msg: Message, stopping: threading.Event | None = None
) -> Iterator[JobContext]:
    """The job ``msg`` as the worker runs it (its context set in this thread)."""
    ctx = JobContext(msg, q, "t", stopping=stopping)
    set_current_job(ctx)
    try:
        yield ctx
    finally:
        set_current_job(None)


def cursor(q: Queue, tag: str, name: str = "rows") -> dict[str, Any] | None:
    raw = q.engine._client.hget(q.engine._keys.steps(tag), f"i:{name}")
    return None if raw is None else json.loads(raw)  # type: ignore[no-any-return]


def test_a_stop_between_items_records_the_cursor_and_the_next_run_resumes(q: Queue) -> None:
    tag = q.publish("x")
    stop = threading.Event()
    seen: list[int] = []
    msg = claim(q)

    def walk() -> None:
        for i in durable.iterate("rows", range(40), checkpoint_every=10):
            seen.append(i)
            if i == 13:
                stop.set()  # SIGTERM while item 13 runs: it finishes, then the run ends

    with running(q, msg, stop), pytest.raises(IterationPaused) as paused:
        walk()
    assert paused.value.done == 14 and paused.value.why == "stopping"
    assert cursor(q, tag) == {"n": 14, "c": 14}
    assert q.release(msg)  # what the worker does with the paused run: no attempt used
    info = q.info(tag)
    assert info is not None and info.attempts == 0 and info.state == "ready"
    with running(q, claim(q)):
        seen += list(durable.iterate("rows", range(40), checkpoint_every=10))
    assert seen == list(range(40))  # each item once, in order
    assert cursor(q, tag) == {"n": 40, "c": 40, "end": True}


def test_a_walk_that_ended_gives_nothing_to_a_later_run(q: Queue) -> None:
    tag = q.publish("x")
    msg = claim(q)
    with running(q, msg):
        assert list(durable.iterate("rows", ["a", "b"])) == ["a", "b"]
    q.nack(msg, "boom", retry_in=0)  # the task failed after its loop: a retry
    q.scan()
    with running(q, claim(q)):
        assert list(durable.iterate("rows", ["a", "b"])) == []
    assert cursor(q, tag) == {"n": 2, "c": 2, "end": True}


def test_a_crash_reruns_only_the_items_after_the_last_checkpoint(q: Queue) -> None:
    """A SIGKILL records nothing at the stop: the items since the last checkpoint run
    again, none before it."""
    tag = q.publish("x", visibility_timeout=1)
    first: list[int] = []
    with running(q, claim(q)):
        for i in durable.iterate("rows", range(30), checkpoint_every=10):
            first.append(i)
            if i == 24:
                break  # the process dies here: nothing more is recorded
    assert cursor(q, tag) == {"n": 20, "c": 20}
    q.engine._client.zadd(q.engine._keys.leased, {tag: 0})  # its lease runs out
    assert q.scan().recovered == 1
    with running(q, claim(q)):
        assert list(durable.iterate("rows", range(30), checkpoint_every=10)) == list(range(20, 30))


def test_max_runtime_ends_the_run_between_items(q: Queue) -> None:
    tag = q.publish("x")
    with running(q, claim(q)), pytest.raises(IterationPaused) as paused:
        list(durable.iterate("rows", range(10**6), max_runtime=0.05))
    assert paused.value.why == "max_runtime" and 0 < paused.value.done < 10**6
    assert cursor(q, tag) == {"n": paused.value.done, "c": paused.value.done}


def test_a_cancel_stops_the_walk_between_items(q: Queue) -> None:
    tag = q.publish("x")
    done: list[int] = []

    def walk(ctx: JobContext) -> None:
        for i in durable.iterate("rows", range(10)):
            done.append(i)
            if i == 3:
                ctx.request_cancel()

    with running(q, claim(q)) as ctx, pytest.raises(JobCancelled):
        walk(ctx)
    assert done == [0, 1, 2, 3]
    assert cursor(q, tag) == {"n": 4, "c": 4}


def test_progress_comes_from_the_cursor(q: Queue) -> None:
    tag = q.publish("x")
    with running(q, claim(q)):
        for i in durable.iterate("rows", range(10), checkpoint_every=5):
            if i == 7:
                info = q.info(tag)
                assert info is not None and info.progress is not None
                assert info.progress["v"] == 0.5
                assert info.progress["n"] == "rows: 5 done"


def test_bad_arguments_raise_and_write_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    q.publish("x")
    msg = claim(q)
    before = snapshot(redis_client, prefix)
    with running(q, msg):
        for bad in (
            {"checkpoint_every": 0},
            {"checkpoint_every": True},
            {"checkpoint_seconds": 0},
            {"max_runtime": -1},
            {"total": -1},
        ):
            with pytest.raises((StepError, ValueError)):
                durable.iterate("rows", range(3), **bad)
        with pytest.raises(StepError):
            durable.iterate("", range(3))
    assert snapshot(redis_client, prefix) == before
    with running(q, msg):
        list(durable.iterate("rows", range(3)))
        with pytest.raises(StepError, match="used twice"):
            durable.iterate("rows", range(3))


def test_outside_a_job_iterate_raises() -> None:
    with pytest.raises(StepError, match="outside a job"):
        durable.iterate("rows", range(3))


def test_a_cursor_is_listed_with_the_job_s_records(q: Queue) -> None:
    tag = q.publish("x")
    with running(q, claim(q)):
        list(durable.iterate("rows", range(3)))
    records = durable_records(q, tag)
    assert [(r.kind, r.name) for r in records] == [("cursor", "rows")]


@pytest.mark.django_db
def test_a_queryset_is_walked_by_primary_key_and_resumed_after_the_last_row(q: Queue) -> None:
    from testproject.demo.models import Article

    ids = [Article.objects.create(title=f"a{i}").pk for i in range(12)]
    tag = q.publish("x")
    stop = threading.Event()
    seen: list[int] = []
    msg = claim(q)

    def walk() -> None:
        for row in durable.iterate("rows", Article.objects.order_by("-pk"), checkpoint_every=100):
            seen.append(row.pk)
            if len(seen) == 5:
                stop.set()

    with running(q, msg, stop), pytest.raises(IterationPaused):
        walk()
    assert cursor(q, tag) == {"n": 5, "c": ids[4]}
    Article.objects.filter(pk=ids[6]).delete()  # a row deleted ahead of the cursor: skipped
    q.release(msg)
    with running(q, claim(q)):
        seen += [row.pk for row in durable.iterate("rows", Article.objects.all())]
    assert seen == ids[:6] + ids[7:]


def test_step_lua_replaces_only_when_asked_and_refuses_a_bad_flag(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    from django_zqueue.engine.scripts import ScriptArgumentError
    from django_zqueue.engine.scripts.replies import StepReply

    tag = q.publish("x")
    msg = claim(q)
    d = q.engine.durable
    assert d.step(msg, "i:c", "1") is StepReply.RECORDED
    assert d.step(msg, "i:c", "2") is StepReply.ALREADY  # the first record stands
    assert d.step(msg, "i:c", "3", replace=True) is StepReply.RECORDED
    assert redis_client.hget(q.engine._keys.steps(tag), "i:c") == b"3"
    call = d.step_call(msg, "i:c", "4", replace=True)
    before = snapshot(redis_client, prefix)
    with pytest.raises(ScriptArgumentError, match="replace flag"):
        q.engine.run(call._replace(args=(*call.args[:-1], "yes")))
    assert snapshot(redis_client, prefix) == before


def test_a_cursor_replaced_in_a_full_hash_is_not_refused(q: Queue) -> None:
    """A hash at its most records refuses a new field, not a cursor moving."""
    from django_zqueue.engine import durable as engine_durable
    from django_zqueue.engine.scripts import ScriptArgumentError
    from django_zqueue.engine.scripts.replies import StepReply

    q.publish("x")
    msg = claim(q)
    shard = q.engine._shards[0]
    keep = q.engine.durable.keep_ms()
    call = engine_durable.step_call(shard, msg, "i:c", "1", keep, replace=True)
    args = list(call.args)
    args[4] = 1  # max_fields 1: the hash holds "@e" and "i:c" after this
    assert q.engine.run(call._replace(args=tuple(args))) is StepReply.RECORDED
    args[3] = "2"
    assert q.engine.run(call._replace(args=tuple(args))) is StepReply.RECORDED
    args[2] = "s:new"
    with pytest.raises(ScriptArgumentError, match="durable records"):
        q.engine.run(call._replace(args=tuple(args)))
