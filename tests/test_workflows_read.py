"""The read model of workflows (for the admin, once wired): a job's parents and
dependents with their states, waiting jobs counted in the overview and found by id."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_zqueue import chain, chord, conf, get_queue, task
from django_zqueue.read import LinkedJob, locate, overview


@pytest.fixture(autouse=True)
def _queues(zqueue_settings: dict[str, Any]) -> Iterator[None]:
    """The test settings plus "emails", a queue of the test project too."""
    with override_settings(ZQUEUE={**zqueue_settings, "QUEUES": {"default": {}, "emails": {}}}):
        conf.reset()
        yield
    conf.reset()


@task
def step(x: int = 0) -> int:
    return x


@task(queue="emails")
def far(x: int = 0) -> int:
    return x


def test_a_job_shows_its_parents_and_children_with_their_states(
    zqueue_settings: dict[str, Any],
) -> None:
    flow = chain(step.s(1), far.s(), step.s()).enqueue()
    q, other = get_queue("default"), get_queue("emails")
    first, middle, last = flow.ids
    links = other.read.links(middle)
    assert links is not None
    assert links.parents == [LinkedJob("default", first, "ready")]
    assert links.children == [LinkedJob("default", last, "waiting")]
    assert (links.need, links.got, links.parent_count, links.child_count) == (1, 0, 1, 1)
    msg = q.get()
    assert msg is not None and q.ack(msg, passed=1)
    q.dispatch([first])
    links = other.read.links(middle)
    assert links is not None and links.parents == [LinkedJob("default", first, None)]
    assert links.got == 1
    assert q.read.links("no-such-job") is None


def test_a_chord_callback_lists_its_parents_a_page_at_a_time(
    zqueue_settings: dict[str, Any],
) -> None:
    flow = chord((step.s(i) for i in range(120)), step.s()).enqueue()
    q = get_queue("default")
    page = q.read.links(flow.ids[-1], offset=100, limit=50)
    assert page is not None and page.parent_count == 120
    assert [p.tag for p in page.parents] == flow.ids[100:120]
    assert {p.state for p in page.parents} == {"ready"}


def test_waiting_jobs_are_counted_and_found_by_id(zqueue_settings: dict[str, Any]) -> None:
    flow = chain(step.s(), step.s(), far.s()).enqueue()
    q, other = get_queue("default"), get_queue("emails")
    figures = {f.name: f for f in overview([q.engine, other.engine])}
    assert (figures["default"].waiting, figures["emails"].waiting) == (1, 1)
    assert figures["default"].ready == 1
    assert q.read.waiting_count() == 1
    (where,) = locate([q.engine, other.engine], flow.ids[1])
    assert (where.queue, where.state, where.rank) == ("default", "waiting", None)
