"""Workflows at scale (issue 17): a chord of 10,000 members fires its callback exactly
once, a chain of 1,000 runs in order, and no script call does more than a bounded amount
of work (publish and resolve calls carry at most 100 jobs or entries). The jobs are run by
hand through the queue core, as a worker does (ack with the result passed on, then
dispatch), so that thousands of jobs stay quick."""

from __future__ import annotations

import json
from typing import Any

import pytest

from django_zqueue import chain, chord, get_queue, task
from django_zqueue.engine.scripts import Batch, flow_ended
from django_zqueue.queue import Queue


@task
def member(i: int) -> int:
    return i


@task
def gather(results: list[int]) -> int:
    return len(results)


def run_all_ready(q: Queue, batch: int = 100, result: Any = None) -> list[str]:
    """Claim, ack (each passing on ``result(msg)`` or the message's first argument) and
    dispatch, as a worker does, until nothing is ready; the tags in the order run."""
    ran: list[str] = []
    while True:
        msgs, _ = q.claim(batch)
        if not msgs:
            return ran
        b = q.engine.batch()
        pending = [
            b.add(
                q.engine.consume.ack_call(
                    m, passed=json.dumps(m.body["args"][0] if m.body["args"] else None)
                )
            )
            for m in msgs
        ]
        q.engine.send(b)
        ended = [m.tag for m, p in zip(msgs, pending, strict=True) if flow_ended(p.call, p.reply)]
        assert all(p.result() for p in pending)
        q.dispatch(ended)
        ran.extend(m.tag for m in msgs)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(script, jobs or entries) of every workflow script call sent in a pipeline."""
    seen: list[tuple[str, int]] = []
    original = Batch.add

    def spy(self: Batch, call: Any) -> Any:
        if call.script in ("wf_publish", "wf_resolve"):  # its jobs or entries, after the policy
            seen.append((call.script, len(call.args) - 1))
        return original(self, call)

    monkeypatch.setattr(Batch, "add", spy)
    return seen


def test_a_chord_of_10000_fires_its_callback_exactly_once(
    zqueue_settings: dict[str, Any], calls: list[tuple[str, int]]
) -> None:
    q = get_queue("default")
    flow = chord((member.s(i) for i in range(10_000)), gather.s()).enqueue()
    callback = flow.jobs[-1]
    assert q.counts()["ready"] == 10_000 and callback.status() == "waiting"
    ran = run_all_ready(q, batch=500)
    assert len(ran) == 10_001 and ran[-1] == callback.id
    assert ran.count(callback.id) == 1
    assert q.stats()["acked"] == 10_001
    assert max(n for _, n in calls) <= 100  # bounded chunks
    assert q.outbox_size() == 0 and q.links(callback.id) is None


def test_the_callback_gets_10000_results_in_order(zqueue_settings: dict[str, Any]) -> None:
    q = get_queue("default")
    flow = chord((member.s(i) for i in range(10_000)), gather.s()).enqueue()
    callback = flow.jobs[-1].id
    # acks in reverse order of the members, in uneven batches
    msgs = []
    while len(msgs) < 10_000:
        got, _ = q.claim(1000)
        msgs.extend(got)
    msgs.sort(key=lambda m: -int(m.body["args"][0]))
    for start in range(0, len(msgs), 777):
        part = msgs[start : start + 777]
        b = q.engine.batch()
        for m in part:
            b.add(q.engine.consume.ack_call(m, passed=json.dumps(m.body["args"][0])))
        q.engine.send(b)
        q.dispatch([m.tag for m in part])
        expected = "ready" if start + 777 >= len(msgs) else "waiting"
        assert q.state(callback) == expected
    assert q.passed_results(callback) == list(range(10_000))


def test_a_chain_of_1000_runs_in_order(zqueue_settings: dict[str, Any]) -> None:
    q = get_queue("default")
    flow = chain(member.s(0), *(member.si(i) for i in range(1, 1000))).enqueue()
    assert q.counts()["ready"] == 1
    ran = run_all_ready(q, batch=10)
    assert ran == flow.ids
    assert q.outbox_size() == 0


def test_a_batch_of_10000_fires_each_callback_once_whatever_the_outcomes(
    zqueue_settings: dict[str, Any], calls: list[tuple[str, int]]
) -> None:
    """Every third member dies, one is cancelled: on_complete runs once with the exact
    summary, on_success ends dead once; the acks come in uneven batches, each dispatched
    twice (a replay changes nothing)."""
    from django_zqueue import batch
    from django_zqueue.engine.records.links import passed_ends, summary

    q = get_queue("default")
    b = batch(
        (member.s(i) for i in range(10_000)), on_success=gather.s(), on_complete=gather.s()
    ).enqueue()
    assert b.on_complete is not None and b.on_success is not None
    cancelled = b.members[5_000].id
    assert q.delete(cancelled)
    dead: list[str] = []
    ended = 1
    while ended < 10_000:
        msgs, _ = q.claim(777)
        assert msgs and b.on_complete.id not in [m.tag for m in msgs]
        bt = q.engine.batch()
        for m in msgs:
            i = m.body["args"][0]
            if i % 3 == 0:
                bt.add(q.engine.consume.nack_call(m, "boom", dead=True))
                dead.append(m.tag)
            else:
                bt.add(q.engine.consume.ack_call(m, passed=json.dumps(i)))
        q.engine.send(bt)
        q.dispatch([m.tag for m in msgs])
        q.dispatch([m.tag for m in msgs])
        ended += len(msgs)
        assert b.progress() == (ended, 10_000)
    assert q.state(b.on_complete.id) == "ready" and q.state(b.on_success.id) == "dead"
    got = summary(passed_ends(q.engine._client.hgetall(q.engine._keys.wf(b.on_complete.id))))
    assert got["total"] == 10_000 and got["cancelled"] == [cancelled]
    assert sorted(got["dead"]) == sorted(dead) and len(got["succeeded"]) == 10_000 - len(dead) - 1
    assert len(got["results"]) == len(got["succeeded"])
    assert q.stats()["dead"] == len(dead) + 1  # the members and on_success, once
    assert max(n for _, n in calls) <= 100
    msgs, _ = q.claim(10)
    assert [m.tag for m in msgs] == [b.on_complete.id]
