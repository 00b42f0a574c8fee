"""Workflows (docs/workflows.md): chains, groups, chords and depends_on, on the real
Redis: each semantic rule is a test, and the dispatch is replayed and interrupted as an
adversary would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from django_zqueue import chain, chord, conf, get_queue, group, task
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.testing.drain import drain

LOG: list[Any] = []


@task(store_result=True)
def add(x: int, y: int = 0) -> int:
    LOG.append(("add", x, y))
    return x + y


@task
def collect(results: list[int], label: str = "") -> dict[str, Any]:
    LOG.append(("collect", results, label))
    return {"sum": sum(results), "label": label}


@task(max_retries=0)
def boom(x: int = 0) -> None:
    LOG.append(("boom", x))
    raise RuntimeError("boom")


@task(queue="emails")
def double(x: int) -> int:
    LOG.append(("double", x))
    return 2 * x


@task
def note(*args: Any) -> None:
    LOG.append(("note", *args))


@pytest.fixture(autouse=True)
def _log(zqueue_settings: dict[str, Any]) -> Iterator[None]:
    """The test settings plus "emails", a queue of the test project too (a task on a
    queue the project lacks would fail its ``manage.py check`` in other tests)."""
    LOG.clear()
    with override_settings(ZQUEUE={**zqueue_settings, "QUEUES": {"default": {}, "emails": {}}}):
        conf.reset()
        yield
    conf.reset()


def burst(*queues: str) -> int:
    """Every job of ``queues`` run, dependents released by their parents included, in
    this thread through the worker's loop (django_zqueue.testing); failures go where
    production sends them. Returns the runs."""
    return drain(list(queues or ("default", "emails")), raise_errors=False).ran


def test_chain_passes_each_result_to_the_next() -> None:
    flow = chain(add.s(1, 2), add.s(10), double.s(), add.si(100, 1)).enqueue()
    statuses = flow.statuses()
    assert statuses == ["ready", "waiting", "waiting", "waiting"]
    assert flow.jobs[1].rank() is None
    burst()
    assert LOG == [("add", 1, 2), ("add", 3, 10), ("double", 13), ("add", 100, 1)]
    assert flow.result() == 101


def test_group_runs_in_parallel_and_gives_results_in_order() -> None:
    flow = group(add.s(i, 1) for i in range(5)).enqueue()
    assert flow.statuses() == ["ready"] * 5
    with pytest.raises(LookupError):
        flow.results()
    burst()
    assert flow.results() == [1, 2, 3, 4, 5]


def test_chord_calls_back_once_with_the_results_in_order() -> None:
    flow = chord((add.s(i, i) for i in range(6)), collect.s(label="done")).enqueue()
    callback = flow.jobs[-1]
    assert callback.status() == "waiting" and callback.rank() is None
    burst()
    assert [e for e in LOG if e[0] == "collect"] == [("collect", [0, 2, 4, 6, 8, 10], "done")]
    assert flow.result() == {"sum": 30, "label": "done"}


def test_chain_across_queues() -> None:
    flow = chain(add.s(2, 3), double.s(), add.s(1)).enqueue()
    assert [j.queue_name for j in flow.jobs] == ["default", "emails", "default"]
    burst()
    assert flow.result() == 11


def test_depends_on_waits_for_every_parent_in_any_order_of_acks(
    zqueue_settings: dict[str, Any],
) -> None:
    q, other = get_queue("default"), get_queue("emails")
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        parents = [q.publish({"p": 0}), other.publish({"p": 1}), q.publish({"p": 2})]
        refs: list[Any] = [parents[0], ("emails", parents[1]), parents[2]]
        child = q.publish({"c": 1}, depends_on=refs, priority=5)
        assert q.state(child) == "waiting" and q.rank(child) is None
        msgs = {m.tag: m for m in [q.get(), q.get(), other.get()] if m is not None}
        for n, i in enumerate(order):
            owner = other if i == 1 else q
            assert owner.ack(msgs[parents[i]])
            owner.dispatch([parents[i]])
            q.engine.flow.drain()  # a replay changes nothing
            expected = "ready" if n == len(order) - 1 else "waiting"
            assert q.state(child) == expected, (order, n)
        assert q.rank(child) == 0  # its own priority, in line once
        assert q.stats().get("retried", 0) == 0
        msg = q.get()
        assert msg is not None and msg.tag == child and q.ack(msg)
        assert q.get() is None
        q.engine.flow.drain()
        assert q.links(child) is None  # its links went with it


def test_a_parent_end_counts_once_however_often_it_is_replayed(
    zqueue_settings: dict[str, Any], redis_client: Any
) -> None:
    q = get_queue("default")
    a, b = q.publish("a"), q.publish("b")
    child = q.publish("c", depends_on=[a, b])
    msg = q.get()
    assert msg is not None and msg.tag == a and q.ack(msg, passed="ra")
    # the dispatcher "crashes" after applying the entry, before clearing it
    entries = q.engine.flow.read_outbox([a])
    resolve = [q.engine._shards[0].wf_resolve([e]) for e in _resolutions(q, entries)]
    for _ in range(3):
        q.engine.run_all(resolve)
    assert q.links(child).got == 1  # type: ignore[union-attr]
    assert q.state(child) == "waiting"
    assert q.engine.flow.drain() == 1 and q.outbox_size() == 0
    assert q.links(child).got == 1  # type: ignore[union-attr]
    assert q.state(child) == "waiting"
    msg = q.get()
    assert msg is not None and msg.tag == b and q.ack(msg, passed=2)
    q.dispatch([b])
    q.dispatch([b])
    assert q.state(child) == "ready"
    assert q.passed_results(child) == ["ra", 2]
    assert redis_client.zcard(q.engine._keys.ready) == 1


def _resolutions(q: Any, entries: list[Any]) -> list[Any]:
    from django_zqueue.engine.records.links import Resolution

    out = []
    for tag, entry, kids in entries:
        end = entry[:1].decode()
        for kid in kids:
            result = entry[1:].decode() if end == "1" else ""
            out.append(Resolution(kid.tag, kid.place, end, result, tag))
    return out


def test_the_scanner_finishes_an_end_no_worker_dispatched(zqueue_settings: dict[str, Any]) -> None:
    from django_zqueue.worker.scanner import Scanner

    q = get_queue("default")
    a = q.publish("a")
    child = q.publish("c", depends_on=[a])
    msg = q.get()
    assert msg is not None and q.ack(msg)  # acked; the "worker" died before dispatching
    assert q.state(child) == "waiting" and q.outbox_size() == 1
    totals = Scanner([q]).step()
    assert totals.dispatched == 1
    assert q.state(child) == "ready" and q.outbox_size() == 0


def test_a_dead_parent_buries_its_dependents_and_a_requeue_revives_them() -> None:
    flow = chain(boom.s(1), add.s(1), add.s(2)).enqueue()
    burst()
    q = get_queue("default")
    assert flow.statuses() == ["dead", "dead", "dead"]
    first, second, third = flow.ids
    assert q.info(second).last_error == f"dependency {first} failed"  # type: ignore[union-attr]
    assert q.info(third).last_error == f"dependency {second} failed"  # type: ignore[union-attr]
    assert [e[0] for e in LOG] == ["boom"]
    # the parent is fixed and requeued: the whole chain runs once
    q.requeue_dead(first)
    msg = q.get()
    assert msg is not None and msg.tag == first
    assert q.ack(msg, passed=41)
    q.dispatch([first])
    assert flow.statuses() == ["unknown", "ready", "waiting"]  # the whole chain waits again
    burst()
    assert [e for e in LOG if e[0] == "add"] == [("add", 41, 1), ("add", 42, 2)]
    assert flow.result() == 44


def test_a_failed_chord_member_buries_the_callback_once() -> None:
    flow = chord([add.s(1), boom.s(2), add.s(3), boom.s(4)], collect.s()).enqueue()
    burst()
    q = get_queue("default")
    callback = flow.jobs[-1]
    assert callback.status() == "dead"
    error = q.info(callback.id).last_error  # type: ignore[union-attr]
    assert error in {f"dependency {flow.ids[1]} failed", f"dependency {flow.ids[3]} failed"}
    assert q.stats()["dead"] == 3  # two members and the callback, once
    # one failed member requeued and succeeding is not enough: the other still failed
    q.requeue_dead(flow.ids[1])
    msg = q.get()
    assert msg is not None and q.ack(msg, passed=2)
    q.dispatch([msg.tag])
    assert callback.status() == "dead"
    q.requeue_dead(flow.ids[3])
    msg = q.get()
    assert msg is not None and q.ack(msg, passed=4)
    q.dispatch([msg.tag])
    assert callback.status() == "ready"
    burst()
    assert [e for e in LOG if e[0] == "collect"] == [("collect", [1, 2, 3, 4], "")]


def test_deleting_or_cancelling_a_parent_fails_its_dependents(
    zqueue_settings: dict[str, Any],
) -> None:
    q = get_queue("default")
    a, b = q.publish("a"), q.publish("b")
    c1 = q.publish("c1", depends_on=[a])
    c2 = q.publish("c2", depends_on=[b])
    assert q.delete(a) and q.cancel(b)
    q.dispatch([a, b])
    assert q.state(c1) == "dead" and q.state(c2) == "dead"
    assert q.info(c1).last_error == f"dependency {a} failed"  # type: ignore[union-attr]


def test_cancelling_a_running_parent_fails_its_dependents(
    zqueue_settings: dict[str, Any],
) -> None:
    q = get_queue("default")
    a = q.publish("a")
    c = q.publish("c", depends_on=[a])
    msg = q.get()
    assert msg is not None and msg.tag == a
    assert q.cancel_job(a) == "running"
    assert not q.ack(msg)  # the cancelled delivery is stale
    q.dispatch([a])
    assert q.state(c) == "dead"
    assert q.info(c).last_error == f"dependency {a} failed"  # type: ignore[union-attr]
    assert q.cancelled(a) is not None


def test_a_waiting_job_can_be_cancelled_and_tells_its_own_dependents(
    zqueue_settings: dict[str, Any],
) -> None:
    q = get_queue("default")
    a = q.publish("a")
    b = q.publish("b", depends_on=[a])
    c = q.publish("c", depends_on=[b])
    assert q.cancel(b)
    assert q.state(b) is None
    q.dispatch([b])
    assert q.state(c) == "dead"
    msg = q.get()
    assert msg is not None and msg.tag == a and q.ack(msg)
    q.dispatch([a])  # b is gone: nothing to release
    assert q.get() is None


def test_depends_on_a_finished_or_dead_job(zqueue_settings: dict[str, Any]) -> None:
    q = get_queue("default")
    gone = q.publish("g")
    msg = q.get()
    assert msg is not None and q.ack(msg)
    assert q.state(q.publish("x", depends_on=[gone])) == "ready"
    dead = q.publish("d", max_retries=0)
    msg = q.get()
    while msg is not None and msg.tag != dead:
        q.ack(msg)
        msg = q.get()
    assert msg is not None and q.nack(msg, "no") == "dead"
    child = q.publish("y", depends_on=[dead])
    assert q.state(child) == "dead"
    assert q.requeue_dead(dead)
    msg = q.get()
    assert msg is not None and q.ack(msg)
    q.dispatch([dead])
    assert q.state(child) == "ready"


def test_task_enqueue_depends_on_and_enqueue_many() -> None:
    a = add.enqueue(1, 1)
    b = double.enqueue(5)
    c = collect.enqueue([0], label="after", depends_on=[a, b])
    many = add.enqueue_many([(1,), (2,)], depends_on=[c])
    assert c.status() == "waiting" and [j.status() for j in many] == ["waiting"] * 2
    burst()
    names = [e[0] for e in LOG]
    assert names.index("collect") > max(names.index("add"), names.index("double"))
    assert names[-2:] == ["add", "add"]


def test_aenqueue_depends_on_waits_like_enqueue() -> None:
    """``aenqueue(..., depends_on=...)`` makes the job wait for its parents, as
    ``enqueue`` does (before, it was taken for an argument of the task and refused)."""
    import asyncio

    a = add.enqueue(1, 1)
    child = asyncio.run(note.aenqueue("after", depends_on=[a]))
    assert asyncio.run(child.astatus()) == "waiting" and child.rank() is None
    with pytest.raises(InvalidArgument, match="depends_on does not go with"):
        asyncio.run(note.using(tag="t", debounce=5).aenqueue("x", depends_on=[a]))
    burst()
    assert LOG == [("add", 1, 1), ("note", "after")]


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_all_or_nothing() -> None:
    with transaction.atomic():
        flow = chain(add.s(1), add.s(2)).enqueue()
        assert flow.statuses() == ["unknown", "unknown"]
    assert flow.statuses() == ["ready", "waiting"]
    handles = []

    def rolled_back() -> None:
        with transaction.atomic():
            handles.append(chord([add.s(1)], collect.s()).enqueue())
            raise RuntimeError("rollback")

    with pytest.raises(RuntimeError):
        rolled_back()
    assert handles[0].statuses() == ["unknown", "unknown"]


def test_a_result_too_big_to_pass_on_ends_the_parent_dead() -> None:
    @task(name="tests.test_workflows.big")
    def big() -> str:
        return "x" * 70_000

    flow = chain(big.s(), add.s()).enqueue()
    burst()
    q = get_queue("default")
    assert flow.statuses() == ["dead", "dead"]
    assert "more than the 65536" in (q.info(flow.ids[0]).last_error or "")  # type: ignore[union-attr]


def test_bad_workflows_write_nothing(zqueue_settings: dict[str, Any], redis_client: Any) -> None:
    from .conftest import snapshot

    before = snapshot(redis_client, zqueue_settings["PREFIX"])
    with pytest.raises(InvalidArgument):
        chain(add.s(1), "not a signature").enqueue()  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        chain(add.s(1), add.s(1, 2)).enqueue()  # add would get three arguments
    with pytest.raises(InvalidArgument):
        chord([], collect.s()).enqueue()
    q = get_queue("default")
    with pytest.raises(InvalidArgument):
        q.publish("x", depends_on=[42])
    with pytest.raises(InvalidArgument):
        q.publish("x", depends_on=["a"], delay=10)
    with pytest.raises(InvalidArgument):
        q.publish("x", depends_on=["a", "a"])
    assert snapshot(redis_client, zqueue_settings["PREFIX"]) == before


def test_a_clash_names_each_tag_and_its_state(
    zqueue_settings: dict[str, Any], redis_client: Any
) -> None:
    """A workflow whose tags are in use says which and in what state (it said "taken"), as
    publish does: a ready job, a job waiting for its parents, a tag listed twice."""
    from django_zqueue.exceptions import DuplicateJob

    from .conftest import snapshot

    q = get_queue("default")
    q.publish("parent", tag="p1")
    q.publish("child", tag="w1", depends_on=["p1"])
    before = snapshot(redis_client, zqueue_settings["PREFIX"])
    with pytest.raises(DuplicateJob) as err:
        chain(add.using(tag="p1").s(1), add.using(tag="w1").s(2)).enqueue()
    assert (err.value.tags, err.value.states) == (["p1", "w1"], ["ready", "waiting"])
    with pytest.raises(DuplicateJob) as err:
        chain(add.using(tag="d1").s(1), add.using(tag="d1").s(2)).enqueue()
    assert (err.value.tags, err.value.states) == (["d1"], ["batch"])
    assert snapshot(redis_client, zqueue_settings["PREFIX"]) == before


def test_a_clash_writes_nothing(zqueue_settings: dict[str, Any], redis_client: Any) -> None:
    from django_zqueue.exceptions import DuplicateJob

    from .conftest import snapshot

    q = get_queue("default")
    q.publish("taken", tag="t1")
    before = snapshot(redis_client, zqueue_settings["PREFIX"])
    with pytest.raises(DuplicateJob):
        chain(add.s(1), add.using(tag="t1").s(2)).enqueue()
    assert snapshot(redis_client, zqueue_settings["PREFIX"]) == before
