"""Batches with callbacks and optional parents (docs/workflows.md): ``on_complete`` runs
exactly once when every member has ended however it ended, with a summary; an optional
parent lets its dependent run with None in its place. On the real Redis, with the
dispatch replayed and members revived as an adversary would."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_zqueue import batch, chain, chord, conf, get_queue, group, optional, task
from django_zqueue.engine.records.links import Resolution
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.testing.drain import drain

LOG: list[Any] = []


@task
def add(x: int, y: int = 0) -> int:
    LOG.append(("add", x, y))
    return x + y


@task(max_retries=0)
def boom(x: int = 0) -> None:
    LOG.append(("boom", x))
    raise RuntimeError("boom")


@task
def report(summary: dict[str, Any], label: str = "") -> str:
    LOG.append(("report", summary, label))
    return label


@task
def nothing() -> None:
    LOG.append(("nothing",))


@task
def seen(*args: Any) -> None:
    LOG.append(("seen", *args))


@pytest.fixture(autouse=True)
def _log(zqueue_settings: dict[str, Any]) -> Iterator[None]:
    LOG.clear()
    with override_settings(ZQUEUE={**zqueue_settings, "QUEUES": {"default": {}, "emails": {}}}):
        conf.reset()
        yield
    conf.reset()


def burst() -> int:
    """Every job run, in this thread, through the worker's loop (django_zqueue.testing);
    failures go where production sends them. Returns the runs."""
    return drain(["default", "emails"], raise_errors=False).ran


def reports() -> list[Any]:
    return [e for e in LOG if e[0] == "report"]


def test_on_complete_gets_every_outcome_and_on_success_dies_once() -> None:
    q = get_queue("default")
    late = add.using(expires=0.05).s(7)
    b = batch(
        [add.s(1), boom.s(2), add.s(3), add.s(4), late],
        on_success=report.s("ok"),
        on_complete=report.s("done"),
    ).enqueue()
    assert b.progress() == (0, 5) and not b.progress().complete
    ok1, dead, ok3, cancelled, expired = b.members
    assert q.delete(cancelled.id)
    q.dispatch([cancelled.id])
    time.sleep(0.08)  # past the expiry of the last member
    burst()
    assert b.on_success is not None and b.on_success.status() == "dead"
    error = q.info(b.on_success.id).last_error  # type: ignore[union-attr]
    assert error is not None and error.startswith("dependency ")
    assert reports() == [
        (
            "report",
            {
                "total": 5,
                "succeeded": [ok1.id, ok3.id],
                "dead": [dead.id],
                "cancelled": [cancelled.id],
                "expired": [expired.id],
                "results": {ok1.id: 1, ok3.id: 3},
            },
            "done",
        )
    ]
    assert b.result() == "done" and b.progress() == (5, 5)
    assert q.outbox_size() == 0


def test_all_succeeded_runs_both_callbacks_once_each() -> None:
    b = batch(
        [add.s(i) for i in range(5)], on_success=report.s("ok"), on_complete=report.s("done")
    ).enqueue()
    assert [j.status() for j in b.final] == ["waiting", "waiting"]
    burst()
    labels = sorted(e[2] for e in reports())
    assert labels == ["done", "ok"]
    for e in reports():
        assert e[1]["succeeded"] == [m.id for m in b.members]
        assert e[1]["results"] == {m.id: i for i, m in enumerate(b.members)}
        assert e[1]["dead"] == e[1]["cancelled"] == e[1]["expired"] == []
    assert b.results() == ["ok", "done"]


def test_progress_counts_ended_members_and_immutable_callbacks_get_nothing() -> None:
    q = get_queue("default")
    b = batch([add.s(1), boom.s(2), add.s(3)], on_complete=seen.si("finished")).enqueue()
    assert b.on_success is None and b.on_complete is not None
    msg = q.get()
    assert msg is not None and q.ack(msg, passed=1)
    q.dispatch([msg.tag])
    assert b.progress() == (1, 3)
    assert q.read.progress(b.on_complete.id) == type(q.read.progress(b.on_complete.id))(3, 1, True)
    burst()
    assert [e for e in LOG if e[0] == "seen"] == [("seen", "finished")]
    assert b.progress().complete


def test_a_replayed_failure_counts_once_and_a_revived_member_is_taken_back() -> None:
    q = get_queue("default")
    b = batch([add.s(1), boom.s(2)], on_complete=report.s()).enqueue()
    assert b.on_complete is not None
    cb = b.on_complete.id
    ok, dead = (m.id for m in b.members)
    failing = Resolution(cb, 2, "0", "", dead)
    for _ in range(3):  # a dispatcher that crashed before clearing, replayed
        q.engine.run(q.engine._shard_for(cb).wf_resolve([failing]))
    assert q.read.progress(cb).got == 1  # type: ignore[union-attr]
    assert q.state(cb) == "waiting"
    # the failed member is revived (requeued from dead letters): its marker is taken back
    q.engine.run(q.engine._shard_for(cb).wf_resolve([Resolution(cb, 2, "r", "", dead)]))
    assert q.read.progress(cb).got == 0  # type: ignore[union-attr]
    burst()
    # the boom member really ran and died: the summary sees it dead, once
    assert [e[1]["dead"] for e in reports()] == [[dead]]
    assert reports()[0][1]["succeeded"] == [ok]


def test_a_member_requeued_and_succeeding_before_the_callback_runs_counts_succeeded() -> None:
    q = get_queue("default")
    b = batch([add.s(1), add.s(2)], on_complete=report.s()).enqueue()
    assert b.on_complete is not None
    cb, first, second = b.on_complete.id, b.members[0].id, b.members[1].id
    q.engine.run(q.engine._shard_for(cb).wf_resolve([Resolution(cb, 1, "0", "dead", first)]))
    # revived and succeeded before the revival was dispatched: the success replaces the marker
    q.engine.run(q.engine._shard_for(cb).wf_resolve([Resolution(cb, 1, "1", "11", first)]))
    assert q.read.progress(cb).got == 1  # type: ignore[union-attr]
    msgs, _ = q.claim(10)
    for m in msgs:
        if m.tag == second:
            assert q.ack(m, passed=2)
            q.dispatch([m.tag])
    assert q.state(cb) == "ready"
    burst()
    assert reports()[0][1]["results"] == {first: 11, second: 2}


def test_the_on_complete_of_a_batch_whose_members_all_fail_runs_once() -> None:
    b = batch([boom.s(i) for i in range(4)], on_complete=report.s()).enqueue()
    burst()
    assert len(reports()) == 1
    assert reports()[0][1]["dead"] == [m.id for m in b.members]
    assert reports()[0][1]["results"] == {}


def test_an_optional_chain_member_passes_none_on_failure() -> None:
    flow = chain(add.s(1, 2), optional(boom.s()), seen.s("after")).enqueue()
    burst()
    assert flow.statuses()[1] == "dead"
    assert [e for e in LOG if e[0] == "seen"] == [("seen", None, "after")]


def test_an_optional_member_that_died_of_its_own_parent_still_lets_the_rest_run() -> None:
    flow = chain(boom.s(1), optional(add.s(1)), seen.s()).enqueue()
    burst()
    q = get_queue("default")
    assert q.info(flow.ids[1]).last_error == f"dependency {flow.ids[0]} failed"  # type: ignore[union-attr]
    assert [e for e in LOG if e[0] == "seen"] == [("seen", None)]


def test_an_optional_chord_member_leaves_none_in_its_place() -> None:
    flow = chord([add.s(1), optional(boom.s(2)), add.s(3)], seen.s()).enqueue()
    burst()
    assert [e for e in LOG if e[0] == "seen"] == [("seen", [1, None, 3])]
    assert flow.jobs[-1].status() == "finished"


def test_a_required_member_still_fails_a_chord_with_optional_ones() -> None:
    flow = chord([boom.s(1), optional(boom.s(2))], seen.s()).enqueue()
    burst()
    assert flow.jobs[-1].status() == "dead"
    assert [e for e in LOG if e[0] == "seen"] == []


def test_depends_on_optional_parents(zqueue_settings: dict[str, Any]) -> None:
    q = get_queue("default")
    a, b = q.publish("a"), q.publish("b")
    child = q.publish("c", depends_on=[a, optional(b)])
    assert q.delete(b)
    q.dispatch([b])
    assert q.state(child) == "waiting"
    msg = q.get()
    assert msg is not None and msg.tag == a and q.ack(msg, passed=5)
    q.dispatch([a])
    assert q.state(child) == "ready"
    assert q.passed_results(child) == [5, None]


def test_depends_on_an_optional_dead_job_through_a_task() -> None:
    dead = boom.enqueue(1)
    burst()
    job = seen.enqueue("x", depends_on=optional(dead))
    assert job.status() == "ready"
    required = seen.enqueue("y", depends_on=[dead])
    assert required.status() == "dead"


def test_a_required_parent_that_fails_still_kills_a_dependent_with_optional_ones(
    zqueue_settings: dict[str, Any],
) -> None:
    q = get_queue("default")
    a, b = q.publish("a"), q.publish("b")
    child = q.publish("c", depends_on=[a, optional(b)])
    assert q.delete(a) and q.delete(b)
    q.dispatch([a, b])
    assert q.state(child) == "dead"
    assert q.info(child).last_error == f"dependency {a} failed"  # type: ignore[union-attr]


def test_bad_batches_write_nothing(redis_client: Any, zqueue_settings: dict[str, Any]) -> None:
    q = get_queue("default")
    with pytest.raises(InvalidArgument, match="on_success, on_complete or both"):
        batch([add.s(1)])
    with pytest.raises(InvalidArgument, match="signatures"):
        batch([add.s(1), 3], on_complete=report.s())  # type: ignore[list-item]
    with pytest.raises(InvalidArgument, match="signatures"):
        batch([add.s(1)], on_complete=report)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        batch([], on_complete=report.s())
    with pytest.raises(TypeError, match="too many positional"):  # no room for the summary
        batch([add.s(1)], on_complete=nothing.s()).enqueue()
    assert q.counts()["ready"] == 0 and q.read.waiting_count() == 0


def test_members_may_be_chains_chords_and_groups() -> None:
    """A chain counts by the job it ends in (dead when a step before it failed), a chord
    by its callback, a group's members one by one."""
    b = batch(
        [
            chain(add.s(1), add.s(10)),
            chain(boom.s(1), add.s(1)),
            chord([add.s(2), add.s(3)], seen.s()),
            group([add.s(4), add.s(5)]),
        ],
        on_complete=report.s(),
    ).enqueue()
    assert len(b.members) == 5 and b.progress() == (0, 5)
    burst()
    (summary,) = [e[1] for e in reports()]
    ids = [m.id for m in b.members]
    assert summary["succeeded"] == [ids[0], ids[2], ids[3], ids[4]]
    assert summary["dead"] == [ids[1]]
    assert summary["results"] == {ids[0]: 11, ids[2]: None, ids[3]: 4, ids[4]: 5}
    assert b.progress() == (5, 5)


def test_a_member_ending_in_a_group_is_refused(redis_client: Any) -> None:
    q = get_queue("default")
    with pytest.raises(InvalidArgument, match="a batch must end in one job"):
        batch([chain(add.s(1), group([add.s(), add.s()]))], on_complete=report.s()).enqueue()
    assert q.counts()["ready"] == 0 and q.read.waiting_count() == 0
