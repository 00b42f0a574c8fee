"""The lean publish (``lua/publish_lean.lua``): which jobs take it, that its jobs are the
same jobs as ``publish.lua``'s, that a clash or bad input writes nothing, and that its
count reaches the lifetime counter and the per-minute series."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import redis

from django_zqueue.engine.keys import SCRIPT_ROLES
from django_zqueue.engine.scripts import Batch, Call, lean_args, read_clashes
from django_zqueue.exceptions import DuplicateJob, ScriptArgumentError, SequenceExhausted
from django_zqueue.queue import Queue

from .conftest import QueueFactory, snapshot

BODY = {"task": "app.tasks.send", "args": [1, "a"], "kwargs": {"to": "x@y.z"}}
NO_KWARGS = {"task": "app.tasks.send", "args": [2], "kwargs": {}}


def _scripts_of(q: Queue, publish: Any) -> list[str]:
    """The scripts the calls of ``publish()`` ran."""
    seen: list[str] = []
    scripts = q.engine._scripts
    run, add = scripts.run, Batch.add

    def spy(call: Call[Any]) -> Any:
        seen.append(call.script)
        return run(call)

    def batch_spy(self: Batch, call: Call[Any]) -> Any:
        seen.append(call.script)
        return add(self, call)

    scripts.run = spy  # type: ignore[method-assign]
    Batch.add = batch_spy  # type: ignore[method-assign]
    try:
        publish()
    finally:
        del scripts.run
        Batch.add = add  # type: ignore[method-assign]
    return seen


def _lean(q: Queue, *args: Any) -> Any:
    """publish_lean called directly: the queue's policy, then ``args``."""
    shard = q.engine._shards[0]
    keys = shard.keys.pick(SCRIPT_ROLES["publish_lean"])
    head = shard.policy.packed_for("publish_lean")
    return q.engine.run(Call("publish_lean", keys, (head, *args), read_clashes))


@pytest.mark.parametrize(
    ("body", "options"),
    [(BODY, {}), (NO_KWARGS, {}), (BODY, {"priority": 7}), (BODY, {"max_retries": 4})],
)
def test_a_job_of_a_task_with_default_options_takes_the_lean_publish(
    q: Queue, body: Any, options: dict[str, Any]
) -> None:
    assert _scripts_of(q, lambda: q.publish(body, **options)) == ["publish_lean"]


@pytest.mark.parametrize(
    "options",
    [
        {"delay": 5},
        {"expires": 60},
        {"visibility_timeout": 30},
        {"score": 3.0},
        {"group": "g"},
    ],
)
def test_a_job_with_another_option_takes_the_full_publish(
    q: Queue, options: dict[str, Any]
) -> None:
    assert _scripts_of(q, lambda: q.publish(BODY, **options)) == ["publish"]


@pytest.mark.parametrize("queue_options", [{"max_length": 10}, {"priority_mode": "aging"}])
def test_a_queue_the_lean_publish_does_not_take(
    make_queue: QueueFactory, queue_options: dict[str, Any]
) -> None:
    q = make_queue("other", **queue_options)
    assert _scripts_of(q, lambda: q.publish(BODY)) == ["publish"]


def test_the_json_layout_takes_the_full_publish(q: Queue) -> None:
    """A queue that writes the records of releases before the compact one (a rolling
    upgrade) writes them all with publish.lua."""
    shard = q.engine._shards[0]
    job = q.prepare(BODY)
    assert lean_args(job, shard.policy) is not None
    assert lean_args(job, replace(shard.policy, compact=False)) is None


def test_a_body_not_of_a_task_shape_takes_the_full_publish(q: Queue) -> None:
    assert _scripts_of(q, lambda: q.publish({"hello": 1})) == ["publish"]
    assert _scripts_of(q, lambda: q.publish("text")) == ["publish"]
    assert _scripts_of(q, lambda: q.publish_many([BODY, BODY])) == ["publish"]


def test_its_job_reads_as_the_full_publish_would_write_it(
    q: Queue, make_queue: QueueFactory
) -> None:
    """The same job through both scripts: the same info and the same delivery."""
    full = make_queue("full", max_length=1000)  # (a length limit: the full publish)
    for queue in (q, full):
        queue.publish(BODY, "j1", priority=5, max_retries=2)
        queue.publish(NO_KWARGS, "j2")
    for tag in ("j1", "j2"):
        a, b = q.info(tag), full.info(tag)
        assert a is not None and b is not None
        assert (a.body, a.priority, a.max_retries, a.attempts, a.state) == (
            b.body,
            b.priority,
            b.max_retries,
            b.attempts,
            b.state,
        )
    for queue in (q, full):
        got = [queue.get(), queue.get()]
        assert [m.tag for m in got if m] == ["j1", "j2"]  # priority 5 first
        first = got[0]
        assert first is not None and first.body == BODY and first.max_retries == 2


def test_rank_is_publish_order_across_both_scripts(q: Queue) -> None:
    """Lean and full publishes share the sequence: rank = the order they were sent in."""
    tags = []
    for i in range(6):
        options = {} if i % 2 else {"visibility_timeout": 30}  # odd: lean, even: full
        tags.append(q.publish({"task": "t", "args": [i], "kwargs": {}}, **options))
    assert [q.rank(t) for t in tags] == list(range(6))
    claimed = [q.get() for _ in tags]
    assert [m.tag for m in claimed if m] == tags


@pytest.mark.parametrize("holder", ["ready", "leased", "dead", "delayed"])
def test_a_tag_in_use_is_a_clash_that_writes_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str, holder: str
) -> None:
    if holder == "delayed":
        q.publish(BODY, "t1", delay=60)
    else:
        q.publish(BODY, "t1")
    if holder in ("leased", "dead"):
        msg = q.get()
        assert msg is not None
        if holder == "dead":
            q.nack(msg, "boom", dead=True)
    before = snapshot(redis_client, prefix)
    with pytest.raises(DuplicateJob) as exc:
        q.publish(NO_KWARGS, "t1")
    assert exc.value.states == [holder]
    assert snapshot(redis_client, prefix) == before


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("x" * 257, 0, 0, '"t"', "[]", ""), "id of 1 to 256 bytes"),
        (("", 0, 0, '"t"', "[]", ""), "id of 1 to 256 bytes"),
        (("a", 1001, 0, '"t"', "[]", ""), r"max_retries must be an integer in \[0, 1000\]"),
        (("a", 1.5, 0, '"t"', "[]", ""), "max_retries must be"),
        (("a", 0, 1001, '"t"', "[]", ""), r"priority must be an integer in \[-1000, 1000\]"),
        (("a", 0, "high", '"t"', "[]", ""), "priority must be"),
        (("a", 0, 0, "", "[]", ""), "needs its task"),
        (("a", 0, 0, '"t"', "[]"), "takes 7 arguments"),
    ],
)
def test_bad_arguments_are_refused_before_any_write(
    q: Queue, redis_client: redis.Redis, prefix: str, args: tuple[Any, ...], why: str
) -> None:
    q.publish(BODY)  # keys to compare
    before = snapshot(redis_client, prefix)
    with pytest.raises(ScriptArgumentError, match=why):
        _lean(q, *args)
    assert snapshot(redis_client, prefix) == before


@pytest.mark.parametrize("queue_options", [{"max_length": 10}, {"priority_mode": "aging"}])
def test_a_queue_it_does_not_take_is_refused_before_any_write(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str, queue_options: Any
) -> None:
    """A caller that sends a limited or non-strict queue here would skip its checks."""
    q = make_queue("limited", **queue_options)
    q.publish("x")
    before = snapshot(redis_client, prefix)
    with pytest.raises(ScriptArgumentError, match="publish takes the others"):
        _lean(q, "a", 0, 0, '"t"', "[]", "")
    assert snapshot(redis_client, prefix) == before


def test_a_spent_sequence_writes_nothing(q: Queue, redis_client: redis.Redis, prefix: str) -> None:
    q.publish(BODY)
    redis_client.hset(q.engine._keys.ctr, "seq", 2**42 - 1)
    before = snapshot(redis_client, prefix)
    with pytest.raises(SequenceExhausted):
        q.publish(BODY, "late")
    assert snapshot(redis_client, prefix) == before


def test_its_count_reaches_the_counters_before_and_after_a_scan(
    q: Queue, redis_client: redis.Redis
) -> None:
    for _ in range(3):
        q.publish(BODY)
    q.publish(BODY, delay=60)  # the full publish counts as before
    stats_key = q.engine._keys.stats
    assert int(redis_client.hget(stats_key, "en") or 0) == 3  # waiting for the scan
    assert q.stats()["enqueued"] == 4 and "en" not in q.stats()
    assert q.minutes(1)[-1]["enqueued"] == 4
    q.scan()
    assert int(redis_client.hget(stats_key, "en") or 0) == 0
    assert int(redis_client.hget(stats_key, "enqueued") or 0) == 4
    assert q.stats()["enqueued"] == 4 and q.minutes(1)[-1]["enqueued"] == 4
    q.scan()  # nothing pending: nothing counted twice
    assert q.stats()["enqueued"] == 4 and q.minutes(1)[-1]["enqueued"] == 4


def test_a_pending_count_that_is_not_a_number_is_left_for_the_doctor(
    q: Queue, redis_client: redis.Redis
) -> None:
    """The scan never stops on it, and moves nothing (zqueue_doctor names the field)."""
    q.publish(BODY)
    redis_client.hset(q.engine._keys.stats, "en", "lots")
    q.scan()
    assert redis_client.hget(q.engine._keys.stats, "en") == b"lots"
    q.publish(BODY)  # starts again from 1
    assert redis_client.hget(q.engine._keys.stats, "en") == b"1"
