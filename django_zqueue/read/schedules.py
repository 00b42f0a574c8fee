"""The periodic schedules of queues as the overview lists them: definition, next and last
firing, and the state of the last job fired."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..engine.records import from_ms, text
from ..engine.redis.connection import unavailable_as_error
from .pipeline import Replies, by_client

if TYPE_CHECKING:
    from .source import Readable


#: a ``sched_defs`` hash as read: schedule name -> JSON definition
Definitions = dict[bytes, bytes]
#: (name, next tick in ms or None, the tag of the last job fired or None)
Firing = tuple[str, float | None, str | None]


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
    rows: dict[str, list[ScheduleRow]] = {}
    for group in by_client(queues):
        with unavailable_as_error():
            pipe = group[0].client.pipeline(transaction=False)
            for q in group:
                pipe.hgetall(q.sched_keys.sched_defs)
            defined = [(q, defs) for q, defs in zip(group, pipe.execute(), strict=True) if defs]
            if not defined:
                continue
            pipe = group[0].client.pipeline(transaction=False)
            for q, defs in defined:
                for name in sorted(text(k) for k in defs):
                    pipe.zscore(q.sched_keys.sched, name)
                    pipe.hget(q.sched_keys.sched_last, name)
            replies = iter(pipe.execute())
            fired = [(q, defs, _firings(defs, replies)) for q, defs in defined]
            batch = group[0].batch()
            pending = [
                batch.add(q.shards[0].state(job))
                for q, _, firings in fired
                for _, _, job in firings
                if job
            ]
            batch.send()
        states = iter([p.result() for p in pending])
        for q, defs, firings in fired:
            rows[q.name] = [_row(q.name, defs, f, next(states) if f[2] else None) for f in firings]
    return [row for q in queues for row in rows.get(q.name, [])]


def _firings(defs: Definitions, replies: Replies) -> list[Firing]:
    """(name, next tick, last job) of each schedule of ``defs``, sorted by name."""
    out = []
    for name in sorted(text(k) for k in defs):
        nxt, last = next(replies), next(replies)
        when = None if nxt is None else float(nxt)
        parts = text(last).split(" ", 1) if last else []
        out.append((name, when, parts[1] if len(parts) == 2 else None))  # "<tick> <job>"
    return out


def _definition(raw: bytes) -> dict[str, Any]:
    """A stored definition; {} when it is not a JSON object (a hand edit, a bug)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _row(queue: str, defs: Definitions, firing: Firing, state: str | None) -> ScheduleRow:
    name, nxt, job = firing
    definition = _definition(defs[name.encode()])
    tick = job.rsplit(":", 1)[-1] if job else ""
    return ScheduleRow(
        name=name,
        queue=queue,
        task=definition.get("task", ""),
        every=definition.get("cron") or f"every {definition.get('interval')} s",
        paused=bool(definition.get("paused")),
        source="runtime" if definition.get("source") == "runtime" else "code",
        next_at=from_ms(nxt) if nxt is not None else None,
        last_at=from_ms(int(tick)) if tick.isdigit() else None,
        last_job=job,
        last_job_state=state,
    )
