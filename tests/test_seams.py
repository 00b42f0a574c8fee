"""Seams between the features merged together (workflows, fairness, job control, async,
admin): each test failed on a bug found by an adversarial pass and passes on its fix.
Real Redis."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from django_zqueue import get_queue
from django_zqueue.queue import Queue

from .conftest import QueueFactory
from .records_util import update_fields

# ------------------------------------------------------------------ debounce x workflows


def test_a_debounced_parent_still_releases_its_dependents(zqueue_settings: dict[str, Any]) -> None:
    """A debounce replaced the record of a waiting job without its mark `k` (it has
    dependents): its ack then left no outbox entry and the dependent waited forever."""
    q = get_queue("default")
    parent = q.publish("a", tag="parent")
    child = q.publish("c", depends_on=[parent])
    assert q.publish("a2", tag="parent", debounce=0.001) == "parent"
    time.sleep(0.01)
    msg = q.get()
    assert msg is not None and msg.tag == parent and msg.body == "a2"
    assert q.ack(msg)
    q.dispatch([parent])
    assert q.state(child) == "ready"


# ------------------------------------------------------------------ corrupt workflow records


def _corrupt(q: Queue, tag: str, **fields: Any) -> None:
    update_fields(q.engine._client, q.engine._keys, tag, **fields)


@pytest.mark.parametrize("field", [{"n": "x"}, {"n": -1}, {"f": "x"}])
@pytest.mark.parametrize("ok", [True, False])
def test_a_corrupt_waiting_dependent_is_no_poison_entry(
    zqueue_settings: dict[str, Any], field: dict[str, Any], ok: bool
) -> None:
    """A waiting dependent whose `n` or `f` is of the wrong type made wf_resolve raise
    midway (the entries before it written, the rest not): the outbox entry was never
    cleared, and every drain raised on it again. It goes to dead letters as corrupt, and
    the other dependents of the same dispatch are served."""
    q = get_queue("default")
    a, b = q.publish("a", tag="pa"), q.publish("b", tag="pb")
    bad = q.publish("bad", tag="c1", depends_on=[a])
    good = q.publish("good", tag="c2", depends_on=[b])
    _corrupt(q, bad, **field)
    for tag in (a, b):
        if ok:
            msg = q.get()
            assert msg is not None and q.ack(msg)
        else:
            assert q.delete(tag)
    q.engine.flow.drain()  # the acks' entries (a delete dispatches its own at once)
    assert q.outbox_size() == 0
    assert q.state(good) == ("ready" if ok else "dead")
    assert q.state(bad) == "dead"
    info = q.info(bad)
    assert info is not None and (info.last_error or "").startswith("corrupt record: ")


# ------------------------------------------------------------------ job control x fairness


def test_set_priority_in_a_fair_queue_is_a_head_start_within_the_group(
    make_queue: QueueFactory,
) -> None:
    """set_priority moved a fair queue's job by the fifo priority band (2^42) instead of
    one of its group's turns per step: a priority of 1 jumped every group, and a
    priority of -1, once claimed, pushed the queue's virtual time to 2^42 (a few hundred
    such claims exhaust it)."""
    q = make_queue("f", fairness="groups", group_weights={"b": 2})
    a = [q.publish(f"a{i}", group="a") for i in range(3)]
    b = [q.publish(f"b{i}", group="b") for i in range(4)]
    assert q.set_priority(a[2], 1) and q.score(a[2]) == 1.0  # one turn ahead: as publish
    assert q.set_priority(b[0], -1) and q.score(b[0]) == 0.5  # weight 2: half a turn
    fresh = q.publish("a-p1", group="a", priority=1)
    assert q.score(fresh) == 2.0  # the same rule at publish: its start 3, one turn ahead
    assert q.set_priority(a[0], -1000)
    claimed = [m.tag for m in q.claim(8)[0]]
    assert len(claimed) == 8 and claimed[-1] == a[0]
    vt = float(q.engine._client.hget(q.engine._keys.ctr, "vt") or 0)
    assert vt <= 1000 + 1


# ------------------------------------------------------------------ unique_for x corrupt records


@pytest.mark.parametrize("u", [1e20, 1e300])
def test_an_ack_with_a_corrupt_unique_ttl_loses_no_job(make_queue: QueueFactory, u: float) -> None:
    """ack.lua removed the lease, then failed on SET PX of a `u` out of range: the job
    was in no set with its record left (lost: no lease to recover, nothing to claim)."""
    q = make_queue()
    tag = q.publish("x", tag="t")
    msg = q.get()
    assert msg is not None
    _corrupt(q, tag, u=u)
    assert q.ack(msg) is True
    assert q.engine._client.hget(q.engine._keys.meta, tag) is None and q.counts()["inflight"] == 0
    assert q.engine._client.pttl(q.engine._keys.unique(tag)) > 0  # reserved, within the horizon


# ------------------------------------------------------------------ Queue x AsyncQueue


def test_async_ack_passes_a_result_to_dependents_as_the_sync_ack_does(
    make_queue: QueueFactory,
) -> None:
    """``Queue.ack(msg, passed=...)`` hands a workflow job's result to its dependents;
    ``AsyncQueue.ack`` took no ``passed`` (a TypeError), though it claims to mean what
    the sync method of the same name means."""
    import asyncio

    import redis.asyncio as aredis

    from django_zqueue.queue.aio import AsyncQueue

    from .redis_server import redis_url

    q = make_queue()
    parent = q.publish("p", tag="parent")
    child = q.publish("c", tag="child", depends_on=[parent])

    async def scenario() -> bool:
        client = aredis.Redis.from_url(redis_url())
        try:
            aq = AsyncQueue(q, client=client)
            msgs, _ = await aq.claim(1)
            return await aq.ack(msgs[0], passed={"rows": 3})
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) is True
    q.dispatch([parent])
    assert q.state(child) == "ready" and q.passed_results(child) == [{"rows": 3}]


# ------------------------------------------------------------------ cancel x workflows


@pytest.mark.parametrize("how", ["cancel", "delete"])
def test_a_reused_tag_gets_no_end_of_the_old_jobs_parent(
    zqueue_settings: dict[str, Any], how: str
) -> None:
    """A waiting dependent cancelled (or deleted) stays in its parent's list of
    dependents; a new job under the same tag, waiting for another parent, was released
    by the old parent's end before its own parent had run."""
    q = get_queue("default")
    old_parent = q.publish("a", tag="A")
    assert q.publish("b", tag="B", depends_on=[old_parent]) == "B"
    msg = q.get()
    assert msg is not None and msg.tag == old_parent
    assert getattr(q, how)("B")
    q.engine.flow.drain()
    new_parent = q.publish("c", tag="C")
    q.publish("b2", tag="B", depends_on=[new_parent])
    assert q.ack(msg)
    q.dispatch([old_parent])
    assert q.state("B") == "waiting"
    links = q.links("B")
    assert links is not None and links.got == 0
    msg = q.get()
    assert msg is not None and msg.tag == new_parent and q.ack(msg)
    q.dispatch([new_parent])
    assert q.state("B") == "ready"


# -------------------------------------------------------- debounce / unique_for x workflows


def test_a_workflow_refuses_a_task_with_debounce_or_unique_for(
    project: dict[str, str], redis_client: Any, prefix: str
) -> None:
    """``task.enqueue(depends_on=...)`` refuses a task with debounce or unique_for, but a
    chain published it without its rule: a unique_for task ran again at once, with no
    reservation, and a debounced one was ready at once."""
    from django_zqueue import chain, group
    from django_zqueue.exceptions import InvalidArgument

    from .conftest import snapshot
    from .test_once import digest, once_an_hour, plain

    before = snapshot(redis_client, prefix)
    for flow in (
        chain(once_an_hour.si("k"), plain.si("z")),
        chain(plain.si("z"), digest.si("d")),
        group([digest.si("d"), plain.si("z")]),
    ):
        with pytest.raises(InvalidArgument, match="debounce or unique_for"):
            flow.enqueue()
    assert snapshot(redis_client, prefix) == before


# ------------------------------------------------------------------ workflows x the read API


def test_a_job_waiting_for_its_parents_exists(zqueue_settings: dict[str, Any]) -> None:
    """``exists()`` is "the job is still to run or running"; a job waiting for its
    parents (status ``waiting``, cancellable) read False, sync and async alike."""
    import asyncio

    from django_zqueue.tasks.job import Job

    q = get_queue("default")
    parent = q.publish("p")
    child = q.publish("c", depends_on=[parent])
    job = Job(child, "default")
    assert job.status() == "waiting"
    assert q.exists(child) and job.exists()
    assert asyncio.run(job.aexists())
    assert job.cancel() and not job.exists()


# ------------------------------------------------------------------ bad input to depends_on


def test_bad_depends_on_raises_and_writes_nothing(
    zqueue_settings: dict[str, Any], redis_client: Any, prefix: str
) -> None:
    """``depends_on="parent"`` waited for the jobs "p", "a", "r", ... (none exist, so
    counted as succeeded: the job ran at once); a job depending on itself waited
    forever. Both raise now, nothing written."""
    from django_zqueue.exceptions import InvalidArgument

    from .conftest import snapshot

    q = get_queue("default")
    q.publish("p", tag="parent")
    before = snapshot(redis_client, prefix)
    with pytest.raises(InvalidArgument, match="single str"):
        q.publish("c", depends_on="parent")
    with pytest.raises(InvalidArgument, match="itself"):
        q.publish("c", tag="self", depends_on=["self"])
    with pytest.raises(InvalidArgument, match="itself"):
        q.publish("c", tag="self", depends_on=[("default", "parent"), ("default", "self")])
    assert snapshot(redis_client, prefix) == before


def test_enqueue_many_takes_one_parent_tag_as_enqueue_does(project: dict[str, str]) -> None:
    """``enqueue(depends_on="tag")`` waits for that job; ``enqueue_many(calls,
    depends_on="tag")`` waited for one job per character of it instead."""
    from .test_once import plain

    q = get_queue("default")
    q.publish("p", tag="parent")
    jobs = plain.enqueue_many([("a",), ("b",)], depends_on="parent")
    assert [j.status() for j in jobs] == ["waiting", "waiting"]
    assert all(q.links(j.id).parents == (("default", "parent"),) for j in jobs)  # type: ignore[union-attr]


# ------------------------------------------------------------------ workflows x the position page


def test_the_position_of_a_job_waiting_for_its_parents_is_not_done(
    zqueue_settings: dict[str, Any],
) -> None:
    """``positions.lua`` did not read the wait set: a job waiting for its parents showed
    the person waiting on it "done" before it had run."""
    from django_zqueue.tasks.watch import read_positions

    q = get_queue("default")
    parent = q.publish("p")
    child = q.publish("c", depends_on=[parent])
    pos = read_positions(q, [child, parent])
    assert pos[child].status == "scheduled" and pos[child].rank is None
    assert pos[parent].status == "waiting" and pos[parent].rank == 0
    assert q.cancel(child)
    assert read_positions(q, [child])[child].status == "cancelled"  # not "done" either


# ------------------------------------------------------------------ corrupt workflow links


@pytest.mark.parametrize(
    "bad", [["gone", "B", 1], ["default", "B", 0], ["default", "", 1], ["default", "B", 10001]]
)
def test_a_bad_dependent_in_the_links_blocks_no_other_entry(
    zqueue_settings: dict[str, Any], bad: list[Any]
) -> None:
    """A parent's links naming a dependent in a queue not configured here (a queue
    removed, a rolling deploy) or with a corrupt place made every dispatch and drain
    raise: no entry of the batch was ever applied or cleared, the unrelated ones
    included. The others are applied now; an unknown queue's entry is kept for a
    process that knows the queue."""
    q = get_queue("default")
    a = q.publish("a", tag="A")
    c = q.publish("c", tag="C", depends_on=[a])
    other = q.publish("o", tag="O")
    d = q.publish("d", tag="D", depends_on=[other])
    kids = json.loads(q.engine._client.hget(q.engine._keys.wf(a), "kids"))  # type: ignore[arg-type]
    q.engine._client.hset(q.engine._keys.wf(a), "kids", json.dumps([bad, *kids]))
    for _ in range(2):
        msg = q.get()
        assert msg is not None and q.ack(msg)
    q.engine.flow.drain()
    assert q.state(c) == "ready" and q.state(d) == "ready"
    assert q.outbox_size() == (1 if bad[0] == "gone" else 0)


# ------------------------------------------------------------------ cancel / purge x workflows


def _acancel(q: Queue, tag: str) -> bool:
    import asyncio

    import redis.asyncio as aredis

    from django_zqueue.queue.aio import AsyncQueue

    from .redis_server import redis_url

    async def go() -> bool:
        client = aredis.Redis.from_url(redis_url())
        try:
            return await AsyncQueue(q, client=client).cancel(tag)
        finally:
            await client.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("how", ["cancel", "acancel", "delete", "purge"])
def test_a_reused_parent_tag_ends_nothing_for_the_old_jobs_dependents(
    zqueue_settings: dict[str, Any], how: str
) -> None:
    """A parent cancelled or deleted (its tag free at once) kept its outbox entry and
    links until the scanner's drain: a new job under its tag with a new dependent took
    the old entry (the new dependent killed) and the old links (the old dependent,
    buried for the cancel, revived and run when the new job succeeded). A dead parent
    purged left its links (they live as long as a dead letter) to a new job likewise."""
    q, other = get_queue("default"), get_queue("other")
    q.publish("b", tag="B")
    old_kid = other.publish("c", depends_on=[("default", "B")])
    if how == "purge":
        msg = q.get()
        assert msg is not None and q.nack(msg, "boom", dead=True) == "dead"
        q.dispatch(["B"])
        assert other.state(old_kid) == "dead"
        assert q.purge_dead() == 1
    elif how == "acancel":
        assert _acancel(q, "B")
    else:
        assert getattr(q, how)("B")
    q.publish("new", tag="B")
    new_kid = q.publish("d", depends_on=["B"])
    q.engine.flow.drain()
    assert q.state(new_kid) == "waiting"
    msg = q.get()
    assert msg is not None and msg.tag == "B" and q.ack(msg)
    q.dispatch(["B"])
    assert q.state(new_kid) == "ready"
    other.engine.flow.drain()
    assert other.state(old_kid) == "dead"  # never revived by the new job


def test_a_clash_with_a_job_waiting_for_its_parents_names_its_state(
    zqueue_settings: dict[str, Any],
) -> None:
    """publish and publish_once did not read the wait set: a clash with a job waiting
    for its parents was reported as state ``unknown``."""
    from django_zqueue.exceptions import DuplicateJob

    q = get_queue("default")
    parent = q.publish("p")
    q.publish("c", tag="child", depends_on=[parent])
    for extra in ({}, {"debounce": 5}, {"unique_for": 5}):
        with pytest.raises(DuplicateJob) as caught:
            q.publish("again", tag="child", **extra)
        assert caught.value.states == ["waiting"], extra
