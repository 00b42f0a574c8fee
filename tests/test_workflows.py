"""Workflows (docs/workflows.md): chains, groups, chords and depends_on, on the real
Redis: each semantic rule is a test, and the dispatch is replayed and interrupted as an
adversary would."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from django_zqueue import chain, chord, get_queue, group, task
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.worker import Worker

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


@task(queue="other")
def double(x: int) -> int:
    LOG.append(("double", x))
    return 2 * x


@task
def note(*args: Any) -> None:
    LOG.append(("note", *args))


@pytest.fixture(autouse=True)
def _log(zqueue_settings: dict[str, Any]) -> None:
    LOG.clear()


def burst(*queues: str) -> int:
    """Run burst workers until one runs nothing (a burst worker stops when nothing is
    ready, which may be before the dependents its last acks released)."""
    total = 0
    while True:
        ran = Worker(list(queues or ("default", "other")), burst=True, scan_interval=0.05).run()
        total += ran
        if not ran:
            return total


def test_chain_passes_each_result_to_the_next() -> None:
    flow = chain(add.s(1, 2), add.s(10), double.s(), add.si(100, 1)).enqueue()
    statuses = flow.statuses()
    assert statuses == ["ready", "waiting", "waiting", "waiting"]
    assert flow.jobs[1].rank() is None
    burst()
    assert LOG == [("add", 1, 2), ("add", 3, 10), ("double", 13), ("add", 100, 1)]
    assert flow.result() == 101

