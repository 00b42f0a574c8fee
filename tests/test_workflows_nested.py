"""Nested canvases (docs/workflows.md, "Nesting"): a chain of groups, a group of chains, a
chord whose header holds chains; results flow as in Celery's canvas, each dependent is
released once, and shapes that cannot be kept are refused with nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_zqueue import batch, chain, chord, conf, get_queue, group, optional, task
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.worker import Worker

LOG: list[Any] = []


@task
def add(x: int, y: int = 0) -> int:
    LOG.append(("add", x, y))
    return x + y


@task
def collect(results: list[Any], label: str = "") -> list[Any]:
    LOG.append(("collect", results, label))
    return results


@task(max_retries=0)
def boom(x: Any = 0) -> None:
    LOG.append(("boom", x))
    raise RuntimeError("boom")


@task(queue="emails")
def double(x: int) -> int:
    LOG.append(("double", x))
    return 2 * x


@pytest.fixture(autouse=True)
def _log(zqueue_settings: dict[str, Any]) -> Iterator[None]:
    LOG.clear()
    with override_settings(ZQUEUE={**zqueue_settings, "QUEUES": {"default": {}, "emails": {}}}):
        conf.reset()
        yield
    conf.reset()


def burst() -> int:
    total = 0
    while True:
        ran = Worker(["default", "emails"], burst=True, scan_interval=0.05).run()
        total += ran
        if not ran:
            return total


def calls(name: str) -> list[Any]:
    return [e[1:] for e in LOG if e[0] == name]


def test_a_chain_of_groups_passes_one_result_in_and_the_list_on() -> None:
    flow = chain(add.s(1, 1), group([add.s(10), double.s()]), collect.s("end")).enqueue()
    assert flow.statuses() == ["ready", "waiting", "waiting", "waiting"]
    burst()
    assert sorted(calls("add")) == [(1, 1), (2, 10)] and calls("double") == [(2,)]
    assert calls("collect") == [([12, 4], "end")]
    assert flow.result() == [12, 4]


def test_a_group_after_a_group_gives_each_member_the_whole_list() -> None:
    flow = chain(group([add.s(1), add.s(2)]), group([collect.s("a"), collect.s("b")])).enqueue()
    burst()
    assert sorted(calls("collect")) == [([1, 2], "a"), ([1, 2], "b")]
    assert flow.results() == [[1, 2], [1, 2]]


def test_a_group_of_chains_gives_each_chains_last_result() -> None:
    flow = group([chain(add.s(1), add.s(2)), chain(add.s(3), double.s()), add.s(9)]).enqueue()
    burst()
    assert flow.results() == [3, 6, 9]
    assert len(flow.final) == 3 and len(flow.jobs) == 5


def test_a_chord_whose_header_holds_chains_and_a_nested_chord() -> None:
    inner = chord([add.s(1), add.s(2)], collect.s("inner"))
    flow = chord([chain(add.s(1), add.s(1)), inner, add.s(5)], collect.s("outer")).enqueue()
    burst()
    assert calls("collect")[-1] == ([2, [1, 2], 5], "outer")
    assert len([c for c in calls("collect") if c[1] == "outer"]) == 1
    assert flow.result() == [2, [1, 2], 5]


def test_a_chord_in_a_chain_passes_its_callbacks_result_on() -> None:
    flow = chain(add.s(1), chord([add.s(1), add.s(2)], collect.s()), collect.s("after")).enqueue()
    burst()
    assert calls("collect") == [([2, 3], ""), ([2, 3], "after")]  # the callback's return
    assert flow.result() == [2, 3]


def test_nested_groups_are_flattened() -> None:
    flow = chord([group([add.s(1), add.s(2)]), add.s(3)], collect.s()).enqueue()
    burst()
    assert calls("collect") == [([1, 2, 3], "")]
    assert flow.result() == [1, 2, 3]


def test_a_failure_deep_in_a_header_kills_the_callback_once_and_a_requeue_revives_it() -> None:
    flow = chord([chain(add.s(1), boom.s(), add.s(1)), add.s(2)], collect.s()).enqueue()
    burst()
    q = get_queue("default")
    callback = flow.jobs[-1]
    assert callback.status() == "dead"
    assert flow.statuses().count("dead") == 3  # boom, the step after it, the callback
    assert calls("collect") == []
    q.requeue_dead(flow.ids[1])
    msg = q.get()
    assert msg is not None and msg.tag == flow.ids[1] and q.ack(msg, passed=7)
    q.dispatch([msg.tag])
    burst()
    assert calls("collect") == [([8, 2], "")]


def test_an_optional_step_deep_in_a_header_leaves_none() -> None:
    flow = chord([chain(add.s(1), optional(boom.s())), add.s(2)], collect.s()).enqueue()
    burst()
    assert calls("collect") == [([None, 2], "")]
    assert flow.jobs[-1].status() == "finished"


def test_every_dependent_is_released_once_however_the_ends_are_replayed() -> None:
    flow = chain(group([add.s(i) for i in range(20)]), collect.s()).enqueue()
    q = get_queue("default")
    msgs, _ = q.claim(50)
    assert len(msgs) == 20
    for m in msgs:
        assert q.ack(m, passed=m.body["args"][0])
    tags = [m.tag for m in msgs]
    for _ in range(3):  # the same ends dispatched again, and drained
        q.dispatch(tags)
        q.engine.flow.drain()
    assert q.state(flow.ids[-1]) == "ready"
    burst()
    assert calls("collect") == [(list(range(20)), "")]


def test_refused_shapes_write_nothing(redis_client: Any, zqueue_settings: dict[str, Any]) -> None:
    q = get_queue("default")
    with pytest.raises(InvalidArgument, match="ends in a group, whose results would nest"):
        group([chain(add.s(1), group([add.s(), add.s()])), add.s(2)]).enqueue()
    with pytest.raises(InvalidArgument, match="ends in a group"):
        chord([chain(add.s(1), group([add.s(), add.s()]))], collect.s()).enqueue()
    with pytest.raises(InvalidArgument, match="cannot hold a batch"):
        chain(add.s(1), batch([add.s(1)], on_complete=collect.s()))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="links between its jobs"):
        chain(
            group([add.s(i) for i in range(150)]), group([collect.s() for _ in range(150)])
        ).enqueue()
    with pytest.raises(InvalidArgument, match="takes signatures"):
        chain(add.s(1), "not a step")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        group([chain()])  # an empty chain
    with pytest.raises(InvalidArgument, match="optional\\(\\) marks one job"):
        optional(chain(add.s(1), add.s(2)))
    assert q.counts()["ready"] == 0 and q.read.waiting_count() == 0
    assert get_queue("emails").counts()["ready"] == 0
