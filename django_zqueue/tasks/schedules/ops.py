"""Schedules managed at run time: add, change, pause, resume, run now, remove, list.

Re-exported by :mod:`django_zqueue.tasks.schedules`, the place to import them from::

    from django_zqueue import schedules

    schedules.add("digest", "app.tasks.send_digest", cron="0 8 * * 1-5",
                  kwargs={"kind": "daily"}, timezone="Europe/Paris")
    schedules.pause("digest")
    schedules.run_now("digest")  # one job now; the next tick does not move

A runtime schedule is stored in Redis with the code ones (docs/periodic.md, "Runtime
schedules") and fired by the same scanners, exactly once per tick. Every check is made
before anything is written: bad input raises ``InvalidArgument`` with a one-line message.
A schedule declared in code can be paused, resumed and run now, not changed or removed
(its code values win at each deploy; a pause is kept).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ... import conf
from ...engine import schedstore
from ...engine.records import from_ms
from ...exceptions import InvalidArgument
from ...queue import Queue, get_queue
from .. import registry
from ..callcheck import bind_problem
from .spec import CatchUp, Schedule, all_schedules, from_definition, job_of

Source = Literal["code", "runtime"]
#: the longest schedule name, in characters
NAME_MAX = 100
#: what ``update`` may change
CHANGEABLE = frozenset(
    {"task", "cron", "every", "args", "kwargs", "priority", "timezone", "catch_up"}
)


class UnknownSchedule(InvalidArgument):
    """No schedule of that name is stored (nor declared in code)."""


@dataclass(frozen=True, slots=True)
class ScheduleEntry:
    """One schedule as :func:`entries` and :func:`get` list it."""

    name: str
    queue: str
    task: str
    cron: str | None
    every: float | None  # seconds, for an interval schedule
    timezone: str | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    priority: int
    source: Source  # "code" (declared in code or settings) or "runtime"
    paused: bool
    next_at: datetime | None  # None while paused, or not stored yet
    last_at: datetime | None  # the tick of its last firing
    last_job: str | None  # the tag of the job it last fired


# ------------------------------------------------------------------ checks


def check_name(name: object) -> str:
    """``name`` if it can name a schedule, else InvalidArgument."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument("schedule name must be a non-empty string")
    if len(name) > NAME_MAX:
        raise InvalidArgument(f"schedule name is {len(name)} characters; at most {NAME_MAX}")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        raise InvalidArgument(f"schedule name {name!r} has control characters")
    return name


def _task(name: object) -> registry.Registered:
    found = registry.get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidArgument(f"unknown task {name!r} (not registered by any @task)")
    return found


def _every(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"every must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgument(f"every must be > 0 seconds, got {value!r}")
    return float(value)


def _build(name: str, values: Mapping[str, Any]) -> Schedule:
    """A valid runtime schedule from ``values`` (task, queue, cron or every, ...)."""
    task = _task(values.get("task"))
    cron, every = values.get("cron"), _every(values.get("every"))
    if (cron is None) == (every is None):
        raise InvalidArgument(f"schedule {name!r}: give exactly one of cron, every")
    if cron is not None and not isinstance(cron, str):
        raise InvalidArgument(f"schedule {name!r}: cron must be a string")
    queue = values.get("queue") or task.queue_name
    if queue not in conf.get_config().queues:
        raise InvalidArgument(f"schedule {name!r}: unknown queue {queue!r}")
    args, kwargs = values.get("args") or (), values.get("kwargs") or {}
    if not isinstance(args, Sequence) or isinstance(args, str | bytes):
        raise InvalidArgument(f"schedule {name!r}: args must be a list")
    if not isinstance(kwargs, Mapping):
        raise InvalidArgument(f"schedule {name!r}: kwargs must be a mapping")
    problem = bind_problem(task.func, tuple(args), kwargs)
    if problem is not None:
        raise InvalidArgument(f"schedule {name!r}: arguments do not fit {task.name}: {problem}")
    priority = values.get("priority")
    return Schedule(
        name=name,
        task=task.name,
        queue=queue,
        cron=cron,
        interval=every,
        timezone=values.get("timezone") or None,
        args=tuple(args),
        kwargs=dict(kwargs),
        priority=task.priority if priority is None else priority,
        catch_up=values.get("catch_up") or "last",
    )


def _definition(s: Schedule, paused: bool) -> dict[str, Any]:
    definition = s.definition()
    definition["source"] = "runtime"
    definition["paused"] = paused
    return definition


# ------------------------------------------------------------------ lookups


def _find(name: str) -> tuple[Queue, schedstore.Stored] | None:
    for qname in conf.get_config().queues:
        q = get_queue(qname)
        found = schedstore.stored(q, [name])
        if found:
            return q, found[0]
    return None


def _stored(name: str) -> tuple[Queue, schedstore.Stored]:
    found = _find(check_name(name))
    if found is None:
        raise UnknownSchedule(f"no schedule {name!r} (see 'manage.py zqueue_schedules list')")
    return found


def _runtime_only(name: str, what: str) -> tuple[Queue, schedstore.Stored]:
    q, st = _stored(name)
    if st.source != "runtime":
        raise InvalidArgument(
            f"schedule {name!r} is declared in code: {what} it there (it may be paused)"
        )
    return q, st


def _conflict(name: str) -> InvalidArgument:
    return InvalidArgument(f"schedule {name!r} was changed meanwhile; nothing written, retry")


# ------------------------------------------------------------------ the API


def add(
    name: str,
    task: str,
    *,
    cron: str | None = None,
    every: float | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    queue: str | None = None,
    priority: int | None = None,
    timezone: str | None = None,
    catch_up: CatchUp = "last",
) -> ScheduleEntry:
    """Add a runtime schedule of registered task ``task``: ``cron`` (with ``timezone``,
    default ``settings.TIME_ZONE``) or ``every`` seconds. ``queue`` and ``priority``
    default to the task's. It first fires at its first tick after now.

    ``InvalidArgument`` (nothing written) for bad input, or a name already used by a
    schedule in code or in Redis."""
    check_name(name)
    values = {
        "task": task,
        "cron": cron,
        "every": every,
        "args": args,
        "kwargs": kwargs,
        "queue": queue,
        "priority": priority,
        "timezone": timezone,
        "catch_up": catch_up,
    }
    s = _build(name, values)
    if name in all_schedules():
        raise InvalidArgument(
            f"schedule {name!r} is declared in code; a runtime schedule needs another name"
        )
    if _find(name) is not None:
        raise InvalidArgument(f"schedule {name!r} already exists")
    q = get_queue(s.queue)
    first = s.first_tick(schedstore.now_ms(q))
    if not schedstore.put(q, name, _definition(s, False), expect=schedstore.ABSENT, next_ms=first):
        raise InvalidArgument(f"schedule {name!r} already exists")
    return get(name)


def update(name: str, **changes: Any) -> ScheduleEntry:
    """Change a runtime schedule: any of ``task, cron, every, args, kwargs, priority,
    timezone, catch_up`` (giving ``cron`` drops ``every`` and the other way round). A
    change of timing takes effect from the next tick after now (a tick already due
    fires once, with the new values); other changes keep the next tick.

    ``InvalidArgument`` (nothing written) for bad input or a schedule in code."""
    unknown = sorted(set(changes) - CHANGEABLE)
    if unknown:
        raise InvalidArgument(f"update cannot change {', '.join(unknown)}")
    q, st = _runtime_only(name, "change")
    d = st.definition
    values: dict[str, Any] = {
        "task": d.get("task"),
        "cron": d.get("cron"),
        "every": d.get("interval"),
        "args": d.get("args", ()),
        "kwargs": d.get("kwargs", {}),
        "queue": q.name,
        "priority": d.get("priority"),
        "timezone": d.get("timezone"),
        "catch_up": d.get("catch_up"),
    }
    if changes.get("cron") is not None:
        values["every"] = None
    if changes.get("every") is not None:
        values["cron"] = None
    values.update(changes)
    s = _build(name, values)
    timing = ("cron", "interval", "timezone")
    moved = any(d.get(k) != getattr(s, k) for k in timing)
    nxt = None if st.paused else s.first_tick(schedstore.now_ms(q))
    mode: schedstore.TickMode = "keep_due" if moved else "keep"
    if not schedstore.put(
        q, name, _definition(s, st.paused), expect=d["digest"], next_ms=nxt, mode=mode
    ):
        raise _conflict(name)
    return get(name)


def remove(name: str) -> None:
    """Remove a runtime schedule (its jobs already enqueued stay)."""
    q, st = _runtime_only(name, "remove")
    if not schedstore.put(q, name, None, expect=st.definition["digest"]):
        raise _conflict(name)


def pause(name: str) -> ScheduleEntry:
    """Pause a schedule, runtime or in code: it fires no more until :func:`resume`
    (a deploy keeps the pause)."""
    return set_paused(name, True)


def resume(name: str) -> ScheduleEntry:
    """Resume a paused schedule from its next tick after now (the ticks it missed while
    paused do not fire). A schedule that is not paused is left as it is."""
    return set_paused(name, False)


def set_paused(name: str, paused: bool, now_ms: int | None = None) -> ScheduleEntry:
    q, st = _stored(name)
    s = _schedule_of(st)
    definition = {**st.definition, "paused": paused}
    now = schedstore.now_ms(q) if now_ms is None else now_ms
    nxt = None if paused else s.first_tick(now)
    expect = str(st.definition.get("digest", schedstore.ANY))
    if not schedstore.put(q, name, definition, expect=expect, next_ms=nxt, mode="keep"):
        raise _conflict(name)
    return get(name)


def run_now(name: str) -> str:
    """Enqueue one job of schedule ``name`` now, paused or not, without moving its next
    tick. Returns the job's tag."""
    q, st = _stored(name)
    return q.publish_prepared([job_of(q, _schedule_of(st), None)])[0]


def _schedule_of(st: schedstore.Stored) -> Schedule:
    if st.source == "code":
        declared = all_schedules().get(st.name)
        if declared is not None:
            return declared
    try:
        return from_definition(st.definition)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"schedule {st.name!r} is stored unreadable: {exc}") from exc


def get(name: str) -> ScheduleEntry:
    """Schedule ``name`` as stored (``UnknownSchedule`` if there is none)."""
    q, st = _stored(name)
    return _entry(q.name, st)


def entries() -> list[ScheduleEntry]:
    """Every schedule of the configured queues, by queue then name: those stored in
    Redis, and those declared in code that no worker or scanner has stored yet."""
    out: list[ScheduleEntry] = []
    for qname in conf.get_config().queues:
        out.extend(_entry(qname, st) for st in schedstore.stored(get_queue(qname)))
    seen = {e.name for e in out}
    for s in sorted(all_schedules().values(), key=lambda s: (s.queue, s.name)):
        if s.name not in seen:
            missing = schedstore.Stored(s.name, s.definition(), None, None, None)
            out.append(_entry(s.queue, missing))
    return out


def _entry(queue: str, st: schedstore.Stored) -> ScheduleEntry:
    d = st.definition
    return ScheduleEntry(
        name=st.name,
        queue=queue,
        task=str(d.get("task", "")),
        cron=d.get("cron"),
        every=d.get("interval"),
        timezone=d.get("timezone"),
        args=tuple(d.get("args", ())),
        kwargs=dict(d.get("kwargs", {})),
        priority=int(d.get("priority", 0)),
        source=st.source,
        paused=st.paused,
        next_at=from_ms(st.next_ms) if st.next_ms is not None else None,
        last_at=from_ms(st.last_tick_ms) if st.last_tick_ms is not None else None,
        last_job=st.last_job,
    )
