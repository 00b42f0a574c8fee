"""The doctor's check of the periodic schedules: declared against stored, paused, late."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from redis.exceptions import ResponseError

from ...engine.keycheck import Finding
from .common import SCHEDULE_SLACK_MS, _ago, _count


def _schedules() -> Iterator[Finding]:
    from ...exceptions import CorruptKey, ZQueueError
    from ...tasks.schedules import Scheduler

    try:
        scheduler = Scheduler()
    except (ZQueueError, ValueError, TypeError) as exc:
        yield Finding(
            "error",
            "schedules",
            f"a periodic schedule is invalid: {exc}",
            "fix it where it is declared (@task(cron=...), @periodic or ZQUEUE['SCHEDULES'])",
        )
        return
    declared = scheduler.schedules
    try:
        stored = {row["name"]: row for row in scheduler.listing()}
    except (ResponseError, CorruptKey) as exc:  # (a key of the wrong type: named above)
        yield Finding(
            "error",
            "schedules",
            f"the periodic schedules cannot be read: {exc}",
            "repair the queue's keys first (the lines above)",
        )
        return
    if not declared and not stored:
        yield Finding("note", "schedules", "no periodic schedule is declared")
        return
    yield from _compared(declared, stored, scheduler.now_ms())


def _compared(
    declared: Mapping[str, Any], stored: Mapping[str, Mapping[str, Any]], now: int
) -> Iterator[Finding]:
    """The findings of the schedules declared against those stored in Redis at ``now``
    (ms): missing, left over, paused, late; else one "ok"."""
    problems = 0
    for name in sorted(set(declared) - set(stored)):
        problems += 1
        yield Finding(
            "warning",
            "schedules",
            f"schedule {name!r} is declared but not in Redis, so it never fires: no worker "
            "or scanner has started since it was added",
            "start a worker or zqueue_scanner (they sync at start), or python manage.py "
            "zqueue_schedules sync",
        )
    runtime = {name for name, row in stored.items() if row["source"] == "runtime"}
    for name in sorted(set(stored) - set(declared) - runtime):
        problems += 1
        yield Finding(
            "note",
            "schedules",
            f"schedule {name!r} is in Redis but no longer declared; the next sync removes it",
        )
    for name, row in sorted(stored.items()):
        if row["paused"]:
            problems += 1
            yield Finding(
                "note",
                "schedules",
                f"schedule {name!r} is paused",
                f"python manage.py zqueue_schedules resume {name}",
            )
        elif row["next_ms"] is not None and row["next_ms"] < now - SCHEDULE_SLACK_MS:
            problems += 1
            yield Finding(
                "error",
                "schedules",
                f"schedule {name!r} is {_ago(now - row['next_ms'])} late: no scanner fires it",
                f"run a worker without --no-scanner, or python manage.py zqueue_scanner "
                f"--queues {row['queue']}",
            )
    if not problems:
        yield Finding(
            "ok",
            "schedules",
            _count(
                len(stored),
                "%(n)s schedule in Redis, none late",
                "%(n)s schedules in Redis, none late",
            ),
        )


# ------------------------------------------------------------------ admin
