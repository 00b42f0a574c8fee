"""The doctor's checks of each configured queue: its keys, its workers and scanner, its dead
letters."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from redis.exceptions import ResponseError

from ...engine.keycheck import Finding as Finding
from ...engine.keycheck import Level as Level
from .common import (
    LIVE_WITHIN,
    SCANNER_SLACK_MS,
    _ago,
    _count,
)

if TYPE_CHECKING:
    from ...queue import Queue


def _queue(name: str) -> Iterator[Finding]:
    from ...engine.keycheck import key_problems, orphan_problems
    from ...exceptions import CorruptKey
    from ...queue import get_queue

    q = get_queue(name)
    try:
        problems = [*key_problems(q.engine), *orphan_problems(q.engine)]
    except (ResponseError, CorruptKey) as exc:  # a key changed type between two reads
        yield Finding(
            "error",
            "keys",
            f"queue {name!r}: a key changed type while the doctor read it: {exc}",
            "run python manage.py zqueue_doctor again",
        )
        return
    yield from (p.finding for p in problems)
    if not problems:
        yield Finding("ok", "keys", f"queue {name!r}: every key has its type and values")
    try:
        yield from _queue_state(name, q)
    except (ResponseError, CorruptKey) as exc:  # (a key of the wrong type: named above)
        yield Finding(
            "error",
            "queue",
            f"queue {name!r}: its other checks cannot read it: {exc}",
            "repair its keys first (the lines above)",
        )


def _queue_state(name: str, q: Queue) -> Iterator[Finding]:
    counts = q.counts()
    threads = q.live_threads(LIVE_WITHIN)
    late = _overdue(q)
    yield _workers(name, counts, threads)
    yield from _scanner(name, late)
    if counts["dead"]:
        yield _dead_letters(name, q, counts["dead"])


def _overdue(q: Queue) -> dict[str, tuple[int, float]]:
    """For "delayed" and "leased": how many of the queue's jobs are due (a delay ended, a
    lease expired) for longer than SCANNER_SLACK_MS, and for how long (ms) the oldest."""
    return q.engine.positions.overdue(SCANNER_SLACK_MS)


def _workers(name: str, counts: Mapping[str, int], threads: int) -> Finding:
    state = (
        f"{counts['ready']} ready, {counts['delayed']} delayed, {counts['inflight']} running, "
        f"{counts['dead']} dead"
    )
    if threads:
        return Finding(
            "ok",
            "workers",
            f"queue {name!r}: "
            f"{_count(threads, '%(n)s worker thread', '%(n)s worker threads')} live; {state}",
        )
    if counts["ready"]:
        return Finding(
            "error",
            "workers",
            f"queue {name!r}: {_count(counts['ready'], '%(n)s job', '%(n)s jobs')} ready and "
            f"no live worker (none "
            f"seen in the last {LIVE_WITHIN:.0f} s)",
            f"start one: python manage.py zqueue_worker --queues {name} (or read the logs of "
            "the one that should run)",
        )
    return Finding("note", "workers", f"queue {name!r}: no live worker; {state}")


def _scanner(name: str, late: Mapping[str, tuple[int, float]]) -> Iterator[Finding]:
    delayed, delayed_by = late["delayed"]
    if delayed:
        yield Finding(
            "error",
            "scanner",
            f"queue {name!r}: {_count(delayed, '%(n)s delayed job', '%(n)s delayed jobs')} "
            "due for up to "
            f"{_ago(delayed_by)} and still waiting: no worker claims from this queue and no "
            "scanner runs",
            f"run a worker (its embedded scanner promotes them: no --no-scanner), or python "
            f"manage.py zqueue_scanner --queues {name}",
        )
    leased, leased_by = late["leased"]
    if leased:
        yield Finding(
            "error",
            "scanner",
            f"queue {name!r}: {_count(leased, '%(n)s lease', '%(n)s leases')} expired up to "
            f"{_ago(leased_by)} ago "
            "and not recovered: no scanner runs, so those jobs are neither retried nor dead",
            "run a worker without --no-scanner, or python manage.py zqueue_scanner "
            f"--queues {name}",
        )


def _dead_letters(name: str, q: Queue, dead: int) -> Finding:
    newest = q.dead_letters(limit=1)
    error = (newest[0].last_error or "").splitlines()[:1] if newest else []
    return Finding(
        "warning",
        "dead letters",
        f"queue {name!r}: {_count(dead, '%(n)s dead letter', '%(n)s dead letters')}"
        + (f"; the newest failed with: {error[0][:200]}" if error else ""),
        f"python manage.py zqueue_dead {name} list, then requeue or purge",
    )
