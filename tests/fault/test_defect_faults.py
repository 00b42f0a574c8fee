"""Fault runs of defects outside checks found, each checked against the ledger outside
Redis (testproject/demo/ledger.py): real worker processes, no crash, so no job may run
twice. Each prints one ``FAULT Dn ...`` line with its figures (``-s`` to see them).

D1  adaptive prefetch gives back a job waiting behind a slow one while the other thread
    of the same worker claims it: it runs once, not twice in one pid.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testproject.demo import tasks

from .conftest import QUEUE, Fault, wait_for
from .test_faults import all_finished, by_key

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def _logs(f: Fault) -> str:
    return "".join(p.read_text() for p in sorted(Path(f.ledger).parent.glob("*.log")))


def test_d1_prefetch_give_back_runs_nothing_twice(
    fault: Callable[..., Fault], long_run: bool
) -> None:
    """--concurrency 2, --prefetch auto: 100 jobs of 1 ms, S of 3 s, J of 4 s, 300 of
    1 ms, one worker; the heartbeat hands back what waits behind S and J (after 1 s)
    while the other thread claims. Repeated ``rounds`` times."""
    rounds = 6 if long_run else 2
    f = fault()
    run = tasks.fault_run.using(queue=QUEUE)
    keys: list[str] = []
    hand_backs = 0
    for r in range(rounds):
        batch = [(f.ledger, f"{r}-a{i}", 0.001) for i in range(100)]
        batch += [(f.ledger, f"{r}-S", 3.0), (f.ledger, f"{r}-J", 4.0)]
        batch += [(f.ledger, f"{r}-b{i}", 0.001) for i in range(300)]
        run.enqueue_many(batch)
        keys += [k for _, k, _ in batch]
        proc = f.start_worker("--concurrency", "2", "--burst")
        assert wait_for(lambda p=proc: p.poll() is not None, timeout=90, step=0.2)
        assert proc.returncode == 0
        assert all_finished(f, keys)
    logs = _logs(f)
    hand_backs = logs.count("event=released")
    runs = by_key(f.runs())
    twice = {k: len(rs) for k, rs in runs.items() if len(rs) > 1}
    stale = logs.count("stale_delivery")
    print(
        f"\nFAULT D1 rounds={rounds} jobs={len(keys)} runs={sum(map(len, runs.values()))} "
        f"ran_twice={len(twice)} stale_delivery={stale} hand_back_lines={hand_backs}"
    )
    assert sorted(runs) == sorted(keys)
    assert twice == {}
    assert stale == 0
