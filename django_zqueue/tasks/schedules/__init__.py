"""Periodic tasks: cron or interval schedules fired exactly once per tick.

Declared in code (``@task(cron=...)`` or ``@periodic(...)``, :mod:`.periodic`) or in
``ZQUEUE["SCHEDULES"]``, or added at run time by an operator (:func:`add` and the rest of
the runtime API, :mod:`.schedule_ops`, re-exported here); kept in Redis per queue
(:mod:`.queue.schedstore`). Every scanner (embedded in each worker, and
``zqueue_scanner``) runs :meth:`Scheduler.step`: for each due schedule it computes the
next tick in Python (croniter, time-zone aware) and calls ``fire.lua``, which
compare-and-sets the tick (and, for a runtime schedule, the definition's digest, so an
edit is never fired with stale values), enqueues the job with the tag
``cron:<name>:<tick ms>`` and moves the schedule on, atomically. With N scanners each
tick fires once.

Catch-up after an outage, per schedule (``catch_up``):

- ``"last"`` (default): one job for the most recent missed tick, then on schedule;
- ``"none"``: missed ticks older than ``grace`` seconds are skipped;
- ``"all"``: every missed tick fires, oldest first, at most ``max_catch_up`` of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ... import conf
from ...engine import schedstore
from ...exceptions import ConfigurationError, InvalidArgument
from ...queue import Queue, get_queue
from .ops import (
    ScheduleEntry,
    UnknownSchedule,
    add,
    entries,
    get,
    pause,
    remove,
    resume,
    run_now,
    set_paused,
    update,
)
from .spec import (
    MAX_TICK_SCAN,
    CatchUp,
    Schedule,
    all_schedules,
    declare,
    from_definition,
    from_settings,
    is_runtime,
    job_of,
)

log = logging.getLogger("django_zqueue.schedules")


class Scheduler:
    """Keeps the schedules of ``queues`` in Redis and fires their due ticks.

    ``now_ms`` (default: Redis TIME) can be replaced to drive time in tests; ticks and
    the compare-and-set in fire.lua do not depend on any clock.
    """

    def __init__(
        self,
        queues: Sequence[str] | None = None,
        schedules: Mapping[str, Schedule] | None = None,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.schedules = dict(all_schedules() if schedules is None else schedules)
        names = list(conf.get_config().queues) if queues is None else list(queues)
        self.queues = {n: get_queue(n) for n in names}
        for s in self.schedules.values():
            if s.queue not in conf.get_config().queues:
                raise ConfigurationError(
                    f"schedule {s.name!r} uses queue {s.queue!r}, not in ZQUEUE['QUEUES']"
                )
        self._now = now_ms

    def now_ms(self) -> int:
        if self._now is not None:
            return self._now()
        return schedstore.now_ms(next(iter(self.queues.values())))

    def sync(self) -> dict[str, int]:
        """Write the code schedules of these queues to Redis: new or changed definitions
        are stored (a changed one restarts from its next tick; pause state is kept), and
        code schedules no longer declared are removed. Runtime schedules are left alone,
        but a code schedule takes over a runtime one of its name. Returns counts."""
        added = removed = changed = 0
        now = self.now_ms()
        for qname, q in self.queues.items():
            wanted = {s.name: s for s in self.schedules.values() if s.queue == qname}
            stored = schedstore.definitions(q)
            gone = [n for n, d in stored.items() if n not in wanted and not is_runtime(d)]
            for name in gone:
                log.info("event=schedule_removed queue=%s schedule=%s", qname, name)
            writes: list[tuple[str, dict[str, Any], int | None]] = []
            for name, s in wanted.items():
                definition = s.definition()
                old = stored.get(name)
                if old is not None and is_runtime(old):
                    log.warning("event=schedule_code_wins queue=%s schedule=%s", qname, name)
                elif old is not None and old.get("digest") == definition["digest"]:
                    continue
                paused = bool(old and old.get("paused"))
                definition["paused"] = paused
                writes.append((name, definition, None if paused else s.first_tick(now)))
            schedstore.sync(q, gone, writes)
            removed += len(gone)
            added += sum(1 for name, _, _ in writes if name not in stored)
            changed += sum(1 for name, _, _ in writes if name in stored)
        return {"added": added, "changed": changed, "removed": removed}

    def step(self, limit: int = 100) -> int:
        """Fire what is due now (at most ``limit`` ticks per queue). Returns jobs fired.
        Runtime schedules are read from Redis at each step, so an edit is seen at once."""
        fired = 0
        now = self.now_ms()
        for q in self.queues.values():
            due = schedstore.due(q, now, limit)
            if not due:
                continue
            defs = schedstore.definitions_of(q, [name for name, _ in due])
            for name, tick in due:
                found = self._schedule(name, defs.get(name))
                if found is None:
                    continue  # declared by another deployment; its scanners fire it
                fired += self._fire(q, found[0], tick, now, found[1])
        return fired

    def _schedule(
        self, name: str, definition: Mapping[str, Any] | None
    ) -> tuple[Schedule, str | None] | None:
        """The schedule to fire under ``name`` and, for a runtime one, the digest its
        firing is checked against; None: not this process's to fire."""
        if definition is None or not is_runtime(definition):
            s = self.schedules.get(name)
            return None if s is None else (s, None)
        try:
            return from_definition(definition), str(definition.get("digest", ""))
        except (InvalidArgument, TypeError, ValueError) as exc:
            log.warning("event=schedule_invalid schedule=%s error=%s", name, str(exc)[:200])
            return None

    def _fire(self, q: Queue, s: Schedule, tick: int, now: int, digest: str | None) -> int:
        fire_tick: int | None = tick
        nxt = s.next_after(tick)
        if s.catch_up == "last" and nxt <= now:
            fire_tick = s.last_at_or_before(tick, now)
            nxt = s.next_after(fire_tick)
        elif s.catch_up == "none" and now - tick > s.grace * 1000:
            fire_tick = None
            nxt = s.next_after(s.last_at_or_before(tick, now))
        elif s.catch_up == "all" and nxt <= now:
            missed = list(s.ticks(tick, now))
            if len(missed) > s.max_catch_up:
                # too many: skip the oldest, keep the most recent max_catch_up
                fire_tick = None
                nxt = missed[-s.max_catch_up]
        job = None
        if fire_tick is not None:
            job = job_of(q, s, f"cron:{s.name}:{fire_tick}")
        ok = schedstore.fire(q, s.name, tick, nxt, job, digest)
        if ok and fire_tick is not None:
            log.info(
                "event=schedule_fired queue=%s schedule=%s tick=%s next=%s",
                q.name,
                s.name,
                fire_tick,
                nxt,
            )
            return 1
        return 0

    # ------------------------------------------------------------------ operators

    def pause(self, name: str) -> bool:
        """Pause schedule ``name`` (see :func:`pause`); False: no such schedule."""
        try:
            set_paused(name, True, self.now_ms())
        except UnknownSchedule:
            return False
        return True

    def resume(self, name: str) -> bool:
        """Resume schedule ``name`` (see :func:`resume`); False: no such schedule."""
        try:
            set_paused(name, False, self.now_ms())
        except UnknownSchedule:
            return False
        return True

    def listing(self) -> list[dict[str, Any]]:
        """Every stored schedule with next tick, last firing and the last job's state."""
        rows = []
        for q in self.queues.values():
            for st in schedstore.stored(q):
                rows.append(
                    {
                        "name": st.name,
                        "queue": q.name,
                        "task": st.definition.get("task", ""),
                        "cron": st.definition.get("cron"),
                        "interval": st.definition.get("interval"),
                        "source": st.source,
                        "paused": st.paused,
                        "next_ms": st.next_ms,
                        "last_ms": st.last_tick_ms,
                        "last_job": st.last_job,
                        "last_job_state": (
                            (q.state(st.last_job) or "finished") if st.last_job else None
                        ),
                    }
                )
        return rows


__all__ = [
    "MAX_TICK_SCAN",
    "CatchUp",
    "Schedule",
    "ScheduleEntry",
    "Scheduler",
    "UnknownSchedule",
    "add",
    "all_schedules",
    "declare",
    "entries",
    "from_definition",
    "from_settings",
    "get",
    "pause",
    "remove",
    "resume",
    "run_now",
    "update",
]
