"""Durable tasks (docs/durable.md) against a real Redis: steps recorded once and fenced by
the delivery token, durable sleep and wait_for parking a job without an attempt, events
delivered once, and the step records deleted when the job ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from django_zqueue import durable, get_queue, task
from django_zqueue.engine import durable as engine_durable
from django_zqueue.engine.scripts import ScriptArgumentError
from django_zqueue.engine.scripts.replies import StepReply
from django_zqueue.exceptions import Parked, SignalRefused, StaleDelivery, StepError, TimedOut
from django_zqueue.queue import Message, Queue
from django_zqueue.queue import durable_calls as dc
from django_zqueue.tasks.context import JobContext, set_current_job
from django_zqueue.worker import Worker

from .conftest import QueueFactory, snapshot


@contextmanager
def running(q: Queue, msg: Message) -> Iterator[JobContext]:
    """The job ``msg`` as the worker runs it: its context set in this thread."""
    ctx = JobContext(msg, q, "t")
    set_current_job(ctx)
    try:
        yield ctx
    finally:
        set_current_job(None)


def claim(q: Queue) -> Message:
    msgs, _ = q.claim(1, "c")
    assert len(msgs) == 1
    return msgs[0]


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, value: Any = 1) -> Any:
        self.calls += 1
        return value


def steps_of(q: Queue, tag: str) -> dict[bytes, bytes]:
    """The job's records (without ``@e``, the mark of whose they are)."""
    got = q.engine._client.hgetall(q.engine._keys.steps(tag))
    got.pop(b"@e", None)
    return got  # type: ignore[no-any-return]


# ------------------------------------------------------------------ steps


def test_a_recorded_step_is_not_run_again_after_a_retry(q: Queue) -> None:
    tag = q.publish("x")
    charge = Counter()
    msg = claim(q)
    with running(q, msg):
        assert durable.step("charge", charge, {"id": 7}) == {"id": 7}
        assert durable.step("send", charge, [1, 2]) == [1, 2]
    assert charge.calls == 2
    assert q.nack(msg, "boom", retry_in=0) == "retry"
    msg = claim(q)
    assert msg.attempt == 2
    with running(q, msg):
        assert durable.step("charge", charge, {"id": 8}) == {"id": 7}  # the recorded one
        assert durable.step("send", charge, 0) == [1, 2]
        assert durable.step("new", charge, (3,)) == [3]  # JSON: a tuple comes back a list
    assert charge.calls == 3
    assert set(steps_of(q, tag)) == {b"s:charge", b"s:send", b"s:new"}


def test_a_recorded_step_is_not_run_again_after_the_worker_died(q: Queue) -> None:
    """A crash: the lease lapses, the scanner recovers the job, another run skips the step."""
    tag = q.publish("x", visibility_timeout=1)
    charge = Counter()
    first = claim(q)
    with running(q, first):
        durable.step("charge", charge, 42)
    time.sleep(1.1)  # the worker "died": no heartbeat, the lease runs out
    assert q.scan().recovered == 1
    second = claim(q)
    assert second.token != first.token
    with running(q, second):
        assert durable.step("charge", charge, 0) == 42
    assert charge.calls == 1
    # the dead worker's late record is refused by its token, and its read says stale
    stale = dc.step_call(q.engine._shards[0], first, "s:late", "1", dc.keep_ms(q))
    assert q.engine.run(stale) is StepReply.STALE
    assert b"s:late" not in steps_of(q, tag)
    with running(q, first), pytest.raises(StaleDelivery):
        durable.step("late", charge, 1)
    assert charge.calls == 1


def test_a_step_that_raises_is_not_recorded(q: Queue) -> None:
    tag = q.publish("x")
    msg = claim(q)

    def boom() -> None:
        raise RuntimeError("card declined")

    with running(q, msg), pytest.raises(RuntimeError):
        durable.step("charge", boom)
    assert steps_of(q, tag) == {}
    q.nack(msg, "declined", retry_in=0)
    charge = Counter()
    with running(q, claim(q)):
        assert durable.step("charge", charge, 5) == 5
    assert charge.calls == 1


def test_bad_inputs_are_refused_with_nothing_written(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    q.publish("x")
    msg = claim(q)
    before = snapshot(redis_client, prefix)
    with running(q, msg):
        with pytest.raises(StepError, match="not JSON"):
            durable.step("a", lambda: object())
        with pytest.raises(StepError, match="more than the"):
            durable.step("b", lambda: "x" * (dc.MAX_STEP_BYTES + 1))
        with pytest.raises(StepError, match="name"):
            durable.step("", lambda: 1)
        with pytest.raises(StepError, match="used twice"):
            durable.step("a", lambda: 1)  # "a" was used above, even though it failed
        with pytest.raises(StepError, match="seconds"):
            durable.sleep("s", -1)
    assert snapshot(redis_client, prefix) == before
    with pytest.raises(StepError, match="outside a job"):
        durable.step("c", lambda: 1)


def test_too_many_records_are_refused(q: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(durable, "MAX_STEPS", 3)
    monkeypatch.setattr(engine_durable, "MAX_STEPS", 3)  # the bound the scripts are given
    tag = q.publish("x")
    msg = claim(q)
    charge = Counter()
    with running(q, msg):
        for i in range(3):
            durable.step(f"send:{i}", charge, i)
        with pytest.raises(StepError, match="3 durable records"):
            durable.step("send:3", charge, 3)
    assert charge.calls == 3
    # the script holds the bound too, whatever the client believes
    call = dc.step_call(q.engine._shards[0], msg, "s:more", "1", dc.keep_ms(q))
    with pytest.raises(ScriptArgumentError, match="3 durable records"):
        q.engine.run(call)
    assert len(steps_of(q, tag)) == 3


def test_the_step_records_go_when_the_job_ends(q: Queue) -> None:
    for end in ("ack", "ack_many", "cancel", "delete"):
        tag = q.publish(end)
        msg = claim(q)
        with running(q, msg):
            durable.step("one", Counter(), 1)
        assert steps_of(q, tag)
        if end == "ack":
            assert q.ack(msg)
        elif end == "ack_many":
            assert q.ack_many([msg]) == [True]
        elif end == "cancel":
            assert q.cancel(tag)
        else:
            q.nack(msg, "x", retry_in=60)
            assert q.delete(tag)
        assert not q.engine._client.exists(q.engine._keys.steps(tag)), end


def test_a_dead_job_keeps_its_steps_and_skips_them_once_requeued(q: Queue) -> None:
    tag = q.publish("x")
    msg = claim(q)
    charge = Counter()
    with running(q, msg):
        durable.step("charge", charge, 1)
    assert q.nack(msg, "fatal", dead=True) == "dead"
    ttl = q.engine._client.pttl(q.engine._keys.steps(tag))
    assert ttl > q.engine.policy.dead_ttl_ms  # kept at least as long as the dead letter
    assert q.requeue_dead(tag)
    with running(q, claim(q)):
        assert durable.step("charge", charge, 2) == 1
    assert charge.calls == 1


def test_a_new_job_of_a_reused_tag_does_not_see_an_earlier_jobs_records(q: Queue) -> None:
    """A dead letter purged leaves its records to expire; a new job of the same tag
    starts with none (its record's ``d`` and the hash's ``@e`` differ)."""
    q.publish("x", tag="order-1")
    msg = claim(q)
    charge = Counter()
    with running(q, msg):
        durable.step("charge", charge, 1)
    q.nack(msg, "fatal", dead=True)
    assert q.purge_dead() == 1
    assert steps_of(q, "order-1")  # left to expire
    q.publish("x", tag="order-1")
    with running(q, claim(q)):
        assert durable.step("charge", charge, 2) == 2  # run again: a new job
    assert charge.calls == 2
    assert steps_of(q, "order-1") == {b"s:charge": b"2"}
    assert q.signal("order-1", "ev", 1) is False  # kept for this job


# ------------------------------------------------------------------ durable sleep


def test_sleep_parks_without_an_attempt_and_returns_no_earlier_than_asked(q: Queue) -> None:
    tag = q.publish("x")
    charge = Counter()
    msg = claim(q)
    with running(q, msg):
        durable.step("charge", charge, 1)
        with pytest.raises(Parked) as parked:
            durable.sleep("cool-off", 0.3)
    wake = parked.value.wake_ms
    info = q.info(tag)
    assert info is not None and info.state == "delayed" and info.attempts == 0
    status = dc.parked(q, tag)
    assert status is not None and status.status == "sleeping" and status.name == "cool-off"
    assert q.claim(1, "c")[0] == []  # not before its time
    time.sleep(0.35)
    again = claim(q)
    assert again.attempt == 1  # the parked run used no attempt
    with running(q, again) as ctx:
        assert durable.step("charge", charge, 2) == 1
        durable.sleep("cool-off", 0.3)  # passed: returns at once
        assert ctx.records.now_ms >= wake
    assert charge.calls == 1
    assert dc.parked(q, tag) is None


def test_a_stale_run_cannot_park(q: Queue) -> None:
    q.publish("x", visibility_timeout=1)
    first = claim(q)
    time.sleep(1.1)
    q.scan()
    claim(q)
    with running(q, first), pytest.raises(StaleDelivery):
        durable.sleep("s", 10)


# ------------------------------------------------------------------ wait for an event


def test_a_signal_after_the_wait_wakes_the_job_once(q: Queue) -> None:
    tag = q.publish("x")
    with running(q, claim(q)), pytest.raises(Parked):
        durable.wait_for("approved", timeout=60)
    status = dc.parked(q, tag)
    assert status is not None and status.status == "waiting_for_event"
    assert q.rank(tag) is None  # a parked job has no rank
    assert q.signal(tag, "approved", {"by": "ann"}) is True
    with pytest.raises(SignalRefused, match="already delivered"):
        q.signal(tag, "approved", {"by": "bob"})
    msg = claim(q)
    assert msg.attempt == 1
    with running(q, msg):
        assert durable.wait_for("approved", timeout=60) == {"by": "ann"}
    q.nack(msg, "later", retry_in=0)
    with running(q, claim(q)):  # a rerun gets the same payload: consumed once
        assert durable.wait_for("approved", timeout=60) == {"by": "ann"}


def test_a_signal_before_the_wait_is_kept_for_it(q: Queue) -> None:
    tag = q.publish("x")
    assert q.signal(tag, "approved", [1, 2]) is False
    with running(q, claim(q)):
        assert durable.wait_for("approved") == [1, 2]  # not parked


def test_a_signal_between_the_read_and_the_park_is_not_lost(q: Queue) -> None:
    tag = q.publish("x")
    with running(q, claim(q)):
        durable.step("first", Counter(), 1)  # the run's records are read here
        q.signal(tag, "approved", "yes")
        assert durable.wait_for("approved") == "yes"


def test_a_wait_times_out(q: Queue) -> None:
    tag = q.publish("x")
    with running(q, claim(q)), pytest.raises(Parked):
        durable.wait_for("approved", timeout=0.2)
    time.sleep(0.25)
    with pytest.raises(SignalRefused, match="timed out"):
        q.signal(tag, "approved", 1)
    with running(q, claim(q)), pytest.raises(TimedOut):
        durable.wait_for("approved", timeout=0.2)


def test_a_signal_to_no_job_is_refused(q: Queue, redis_client: redis.Redis, prefix: str) -> None:
    with pytest.raises(SignalRefused, match="no job"):
        q.signal("nope", "approved", 1)
    tag = q.publish("x")
    q.ack(claim(q))
    with pytest.raises(SignalRefused, match="no job"):
        q.signal(tag, "approved", 1)
    with pytest.raises(StepError, match="not JSON"):
        q.signal(tag, "approved", object())
    assert not [k for k in snapshot(redis_client, prefix) if b":steps:" in k]


# ------------------------------------------------------------------ async, and a worker


@pytest.mark.usefixtures("zqueue_settings")
def test_the_async_api() -> None:
    q = get_queue("default")
    tag = q.publish("x")
    charge = Counter()

    async def run(msg: Message) -> Any:
        async def fetch(n: int) -> int:
            charge.calls += 1
            return n * 2

        with running(q, msg):
            got = await durable.astep("fetch", fetch, 21)
            await durable.asleep("nap", 0)
            return got, await durable.await_for("go", timeout=30)

    with pytest.raises(Parked):
        asyncio.run(run(claim(q)))
    from django_zqueue.tasks.job import Job

    job = Job(tag, "default")
    assert job.status() == "waiting_for_event"
    assert asyncio.run(job.asignal("go", "now")) is True
    assert asyncio.run(run(claim(q))) == (42, "now")
    assert charge.calls == 1


def test_a_record_of_another_delivery_token_is_refused_in_the_script(
    make_queue: QueueFactory,
) -> None:
    queue = make_queue("tok")
    queue.publish("x")
    msg = claim(queue)
    forged = msg._replace(token=msg.token + 1)
    call = dc.step_call(queue.engine._shards[0], forged, "s:x", "1", dc.keep_ms(queue))
    assert queue.engine.run(call) is StepReply.STALE
    assert not queue.engine._client.exists(queue.engine._keys.steps(msg.tag))


@task(store_result=True)
def durable_flow(n: int) -> int:
    a = durable.step("a", lambda: n * 10)
    durable.sleep("nap", 0.2)
    return int(durable.step("b", lambda: a + 1))


@task(store_result=True)
async def durable_flow_async(n: int) -> int:
    async def times_ten() -> int:
        return n * 10

    a = await durable.astep("a", times_ten)
    await durable.asleep("nap", 0.2)
    return int(await durable.astep("b", lambda: a + 1))


@task(store_result=True, isolation="process")
def durable_flow_isolated(n: int) -> int:
    return int(durable_flow.func(n))


@pytest.mark.usefixtures("zqueue_settings")
@pytest.mark.parametrize("flow", [durable_flow, durable_flow_isolated, durable_flow_async])
def test_a_worker_parks_and_resumes_a_durable_task(flow: Any) -> None:
    """In a worker thread, in a child process, and on the event-loop lane."""
    job = flow.enqueue(4)
    lane = {"async_concurrency": 4} if flow is durable_flow_async else {}
    Worker(["default"], burst=True, scan_interval=0.05, **lane).run()
    assert job.status() == "sleeping"
    parked = job.parked()
    assert parked is not None and parked.name == "nap"
    info = job.info()
    assert info is not None and info.attempts == 0
    time.sleep(0.25)
    Worker(["default"], burst=True, scan_interval=0.05, **lane).run()
    assert job.result() == 41
    q = get_queue("default")
    assert not q.engine._client.exists(q.engine._keys.steps(job.id))


def test_the_position_page_says_a_parked_job_sleeps_and_until_when(q: Queue) -> None:
    from django_zqueue.tasks.watch import read_positions

    tag = q.publish("x")
    plain = q.publish("y", delay=60)
    with running(q, claim(q)), pytest.raises(Parked) as parked:
        durable.sleep("nap", 60)
    got = read_positions(q, [tag, plain])
    assert got[tag].status == "sleeping" and got[tag].rank is None
    assert got[tag].until == parked.value.wake_ms / 1000
    assert got[plain].status == "scheduled" and got[plain].until is None
    assert got[tag].as_json()["until"] == got[tag].until


def test_parks_and_signals_are_counted(q: Queue) -> None:
    tag = q.publish("x")
    with running(q, claim(q)), pytest.raises(Parked):
        durable.wait_for("go", timeout=60)
    q.signal(tag, "go", 1)
    stats = q.stats()
    assert stats["parked"] == 1 and stats["signalled"] == 1


def test_a_django_tasks_task_cannot_be_durable(q: Queue) -> None:
    from django_zqueue.tasks.django_tasks.backend import MARKER

    q.publish({MARKER: 1, "task": "x"})
    with running(q, claim(q)), pytest.raises(StepError, match="Django's Tasks"):
        durable.step("a", lambda: 1)
