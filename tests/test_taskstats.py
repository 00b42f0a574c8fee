"""Per-task statistics: what a real worker records in the round trip of its acks, their
bounds, and what the queue page shows (against the real Redis)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from django_zqueue import get_queue
from django_zqueue.engine.scripts import Batch
from django_zqueue.worker import Worker, taskstats
from testproject.demo import tasks

from .test_admin import BASE, project, viewer  # noqa: F401

pytestmark = pytest.mark.django_db


def test_a_worker_records_runs_failures_and_retries_per_task(
    project: dict[str, Any],  # noqa: F811
    viewer: Client,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q = get_queue("default")
    for i in range(5):
        tasks.add.enqueue(i, i)
    tasks.always_fails.enqueue()  # max_retries=2: 3 failures, 2 of them retried
    sends: list[list[str]] = []
    original = Batch.send

    def spy(self: Batch) -> list[Any]:
        strategy = getattr(self.pipe, "_execution_strategy", None)
        if strategy is not None:  # a cluster pipeline
            stack = [(c.args, c.options) for c in strategy.command_queue]
        else:
            stack = self.pipe.command_stack
        sends.append([str(args[0]).upper() for args, _ in stack])
        return original(self)

    monkeypatch.setattr(Batch, "send", spy)
    Worker(["default"], burst=True, scan_interval=0.05).run()
    monkeypatch.setattr(Batch, "send", original)
    # the statistics ride in the round trips that carry the acks and nacks, never alone
    with_stats = [cmds for cmds in sends if "HINCRBY" in cmds]
    assert with_stats and all({"EVALSHA", "FCALL"} & set(cmds) for cmds in with_stats)
    got = {t.task: t for t in taskstats.read(q)}
    add, fails = got["testproject.demo.tasks.add"], got["testproject.demo.tasks.always_fails"]
    assert (add.runs, add.failures, add.retries) == (5, 0, 0)
    assert sum(add.histogram) == 5 and add.percentile_ms(50) is not None
    assert (fails.runs, fails.failures, fails.retries) == (0, 3, 2)
    assert fails.percentile_ms(50) is None
    keys = list(q.engine._client.scan_iter(match=q.engine._keys.task_stats(0).replace(":0", ":*")))
    assert len(keys) in (1, 2)  # one slot (two if a 5-minute boundary passed)
    assert all(0 < q.engine._client.ttl(k) <= taskstats.KEEP_SECONDS for k in keys)
    page = viewer.get(f"{BASE}q/default/").content.decode()
    assert "Tasks, last hour" in page and "testproject.demo.tasks.always_fails" in page


def test_merge_ignores_junk_and_percentiles_use_bucket_bounds() -> None:
    slot = {
        b"t|n": b"4",
        b"t|s": b"400",
        b"t|b5": b"3",  # <= 50 ms
        b"t|b16": b"1",  # beyond the last bound
        b"t|f": b"x",  # not a number
        b"|n": b"1",  # no task name
    }
    (t,) = taskstats.merge([slot, {b"t|n": b"1", b"t|b5": b"1"}])
    assert (t.task, t.runs, t.mean_ms) == ("t", 5, 80.0)
    assert t.percentile_ms(50) == 50 and t.percentile_ms(99) == -1
    assert taskstats.bucket(0) == 0 and taskstats.bucket(1) == 0 and taskstats.bucket(3) == 2
    assert taskstats.task_of("raw") == taskstats.RAW
