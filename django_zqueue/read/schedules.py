"""The periodic schedules of queues as the overview lists them: definition, next and last
firing, and the state of the last job fired."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..engine.reads import Reads
from ..engine.reads.across import Firing
from ..engine.records import from_ms

if TYPE_CHECKING:
    from .source import Readable


#: a ``sched_defs`` hash as read: schedule name -> JSON definition
Definitions = dict[bytes, bytes]


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    name: str
    queue: str
    task: str
    every: str  # the cron expression, or "every <n> s"
    paused: bool
    source: str  # "code" (declared in code or settings) or "runtime" (added by an operator)
    next_at: datetime | None
    last_at: datetime | None
    last_job: str | None
    last_job_state: str | None  # ready | delayed | leased | dead | None (gone: finished)


def schedules(queues: Sequence[Readable]) -> list[ScheduleRow]:
    """The periodic schedules of ``queues``, by queue then name.

    At most three round trips per Redis client, O(schedules), never O(jobs):
    ``HGETALL`` of each queue's definitions; ``ZSCORE`` and ``HGET`` of the next and last
    firing of each schedule; the state of each last job (a read-only script)."""
    return [
        _row(got.queue, got.definitions, firing, state)
        for got in Reads.schedules([q.reads for q in queues])
        for firing, state in zip(got.firings, got.states, strict=True)
    ]


def _definition(raw: bytes) -> dict[str, Any]:
    """A stored definition; {} when it is not a JSON object (a hand edit, a bug)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def every_text(interval: Any) -> str:
    """An interval schedule as people say it: ``every 300 s`` (not ``300.0``)."""
    try:
        seconds = f"{float(interval):g}"
    except (TypeError, ValueError):
        seconds = str(interval)
    return f"every {seconds} s"


def _row(queue: str, defs: Definitions, firing: Firing, state: str | None) -> ScheduleRow:
    name, nxt, job = firing
    definition = _definition(defs[name.encode()])
    tick = job.rsplit(":", 1)[-1] if job else ""
    return ScheduleRow(
        name=name,
        queue=queue,
        task=definition.get("task", ""),
        every=definition.get("cron") or every_text(definition.get("interval")),
        paused=bool(definition.get("paused")),
        source="runtime" if definition.get("source") == "runtime" else "code",
        next_at=from_ms(nxt) if nxt is not None else None,
        last_at=from_ms(int(tick)) if tick.isdigit() else None,
        last_job=job,
        last_job_state=state,
    )
