"""Periodic tasks: cron or interval schedules fired exactly once per tick.

Declared in code (``@task(cron=...)`` or ``@periodic(...)``, :mod:`.periodic`) or in
``ZQUEUE["SCHEDULES"]``; kept in Redis per queue (the schedule's keys share the queue's
hash tag): a ZSET of next ticks and a HASH of definitions. Every scanner (embedded in each
worker, and ``zqueue_scanner``) runs :meth:`Scheduler.step`: for each due schedule it
computes the next tick in Python (croniter, time-zone aware) and calls ``fire.lua``,
which compare-and-sets the tick, enqueues the job with the tag ``cron:<name>:<tick ms>``
and moves the schedule on, atomically. With N scanners each tick fires once.

Catch-up after an outage, per schedule (``catch_up``):

- ``"last"`` (default): one job for the most recent missed tick, then on schedule;
- ``"none"``: missed ticks older than ``grace`` seconds are skipped;
- ``"all"``: every missed tick fires, oldest first, at most ``max_catch_up`` of them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import zoneinfo
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from croniter import croniter
from django.conf import settings

from . import conf, registry
from .connection import server_time_ms
from .exceptions import ConfigurationError, InvalidArgument
from .queue import Queue, get_queue
from .serializer import encode_call

log = logging.getLogger("django_zqueue.schedules")

CatchUp = Literal["none", "last", "all"]
#: ticks looked at, at most, when working out what an outage missed
MAX_TICK_SCAN = 10_000


@dataclass(frozen=True)
class Schedule:
    """One periodic schedule. Exactly one of ``cron`` and ``interval`` is set."""

    name: str
    task: str  # registered task name
    queue: str = "default"
    cron: str | None = None
    interval: float | None = None  # seconds
    timezone: str | None = None  # default: settings.TIME_ZONE
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    priority: int = 0
    catch_up: CatchUp = "last"
    max_catch_up: int = 100
    grace: float = 60.0

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.interval is None):
            raise InvalidArgument(f"schedule {self.name!r}: give exactly one of cron, interval")
        if self.cron is not None and not croniter.is_valid(self.cron):
            raise InvalidArgument(f"schedule {self.name!r}: invalid cron {self.cron!r}")
        if self.interval is not None and not self.interval > 0:
            raise InvalidArgument(f"schedule {self.name!r}: interval must be > 0 seconds")
        if self.catch_up not in ("none", "last", "all"):
            raise InvalidArgument(f"schedule {self.name!r}: catch_up must be none, last or all")
        if (
            isinstance(self.priority, bool)
            or not isinstance(self.priority, int)
            or not conf.PRIORITY_MIN <= self.priority <= conf.PRIORITY_MAX
        ):
            raise InvalidArgument(
                f"schedule {self.name!r}: priority must be an int in "
                f"[{conf.PRIORITY_MIN}, {conf.PRIORITY_MAX}]"
            )
        try:
            encode_call(tuple(self.args), dict(self.kwargs))
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"schedule {self.name!r}: arguments: {exc}") from exc
        if not 1 <= self.max_catch_up <= 1000:
            raise InvalidArgument(f"schedule {self.name!r}: max_catch_up must be in [1, 1000]")
        try:
            self.zone()
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise InvalidArgument(f"schedule {self.name!r}: unknown time zone") from exc

    def zone(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.timezone or settings.TIME_ZONE or "UTC")

    def definition(self) -> dict[str, Any]:
        """What is stored in Redis (JSON), with a digest to notice changes."""
        data = asdict(self)
        data["args"] = list(self.args)
        data["kwargs"] = dict(self.kwargs)
        data["digest"] = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
        return data

    def next_after(self, tick_ms: int) -> int:
        """The first tick strictly after ``tick_ms`` (ms since the epoch)."""
        if self.interval is not None:
            step = int(self.interval * 1000)
            return tick_ms + step
        assert self.cron is not None
        zone = self.zone()
        start = datetime.fromtimestamp(tick_ms / 1000, tz=UTC).astimezone(zone)
        nxt = croniter(self.cron, start).get_next(datetime)
        if self._fixed_hours():
            # the clock went back (DST overlap): the repeated hour's wall times (fold=1)
            # already ran in the first pass, so a job at fixed hours runs once, as cron
            # does; wildcard-hour jobs keep real hours and run in both passes
            for _ in range(200):
                if nxt.astimezone(zone).fold == 0 and _wall(nxt, zone) != _wall(start, zone):
                    break
                nxt = croniter(self.cron, nxt).get_next(datetime)
        return int(nxt.timestamp() * 1000)

    def last_at_or_before(self, tick_ms: int, now_ms: int) -> int:
        """The latest tick <= ``now_ms``, given that ``tick_ms`` is a tick <= now_ms;
        found directly, however long ago ``tick_ms`` was."""
        if self.interval is not None:
            step = int(self.interval * 1000)
            return tick_ms + (now_ms - tick_ms) // step * step
        assert self.cron is not None
        zone = self.zone()
        end = datetime.fromtimestamp((now_ms + 1) / 1000, tz=UTC).astimezone(zone)
        prev = int(croniter(self.cron, end).get_prev(datetime).timestamp() * 1000)
        return max(tick_ms, prev)

    def _fixed_hours(self) -> bool:
        hours = (self.cron or "").split()[1:2]
        return bool(hours) and not hours[0].startswith("*")

    def first_tick(self, now_ms: int) -> int:
        """The first tick after ``now_ms`` (an interval schedule starts one interval on)."""
        return self.next_after(now_ms)

    def ticks(self, start_ms: int, until_ms: int) -> Iterator[int]:
        """Ticks from ``start_ms`` (itself a tick) up to ``until_ms``, at most MAX_TICK_SCAN."""
        t = start_ms
        for _ in range(MAX_TICK_SCAN):
            if t > until_ms:
                return
            yield t
            t = self.next_after(t)


def _wall(moment: datetime, zone: zoneinfo.ZoneInfo) -> tuple[int, ...]:
    local = moment.astimezone(zone)
    return (local.year, local.month, local.day, local.hour, local.minute)


_declared: dict[str, Schedule] = {}


def declare(schedule: Schedule) -> Schedule:
    """Register a schedule declared in code (by ``@task(cron=...)`` or ``@periodic``)."""
    existing = _declared.get(schedule.name)
    if existing is not None and existing != schedule:
        raise ConfigurationError(f"schedule name {schedule.name!r} is declared twice")
    _declared[schedule.name] = schedule
    return schedule


def from_settings(raw: Mapping[str, Any]) -> list[Schedule]:
    """Schedules from ``ZQUEUE["SCHEDULES"]`` (name -> options)."""
    out = []
    for sched_name, options in raw.items():
        if not isinstance(options, Mapping) or "task" not in options:
            raise ConfigurationError(f"ZQUEUE['SCHEDULES'][{sched_name!r}] needs a 'task'")
        opts = dict(options)
        opts["args"] = tuple(opts.get("args", ()))
        task = registry.get(opts["task"]) if registry.discovered() else None
        if task is not None:
            opts.setdefault("queue", task.queue_name)
            opts.setdefault("priority", task.priority)
        try:
            out.append(Schedule(name=sched_name, **opts))
        except TypeError as exc:
            raise ConfigurationError(f"ZQUEUE['SCHEDULES'][{sched_name!r}]: {exc}") from exc
    return out


def all_schedules() -> dict[str, Schedule]:
    """Every schedule: declared in code (after autodiscovery) and in settings."""
    registry.autodiscover()
    found = dict(_declared)
    setting = getattr(settings, "ZQUEUE", None)
    raw = setting.get("SCHEDULES", {}) if isinstance(setting, Mapping) else {}
    for schedule in from_settings(raw):
        found[schedule.name] = schedule
    return found


def _redis_now_ms(q: Queue) -> int:
    """Redis time, ms, on the queue's node (on a cluster: the master of its slot)."""
    return server_time_ms(q.client, q.keys.sched)


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
        return _redis_now_ms(next(iter(self.queues.values())))

    def sync(self) -> dict[str, int]:
        """Write the schedules of these queues to Redis: new or changed definitions are
        stored (a changed one restarts from its next tick; pause state is kept), and
        schedules no longer declared are removed. Returns counts."""
        added = removed = changed = 0
        now = self.now_ms()
        for qname, q in self.queues.items():
            wanted = {s.name: s for s in self.schedules.values() if s.queue == qname}
            raw_defs: Any = q.client.hgetall(q.sched_keys.sched_defs)
            stored = {k.decode(): json.loads(v) for k, v in raw_defs.items()}
            pipe = q.client.pipeline(transaction=True)
            for name in stored.keys() - wanted.keys():
                pipe.hdel(q.sched_keys.sched_defs, name)
                pipe.zrem(q.sched_keys.sched, name)
                pipe.hdel(q.sched_keys.sched_last, name)
                removed += 1
                log.info("event=schedule_removed queue=%s schedule=%s", qname, name)
            for name, s in wanted.items():
                definition = s.definition()
                old = stored.get(name)
                if old is not None and old.get("digest") == definition["digest"]:
                    continue
                paused = bool(old and old.get("paused"))
                definition["paused"] = paused
                pipe.hset(q.sched_keys.sched_defs, name, json.dumps(definition))
                if not paused:
                    pipe.zadd(q.sched_keys.sched, {name: s.first_tick(now)})
                if old is None:
                    added += 1
                else:
                    changed += 1
            pipe.execute()
        return {"added": added, "changed": changed, "removed": removed}

    def step(self, limit: int = 100) -> int:
        """Fire what is due now (at most ``limit`` ticks per queue). Returns jobs fired."""
        fired = 0
        now = self.now_ms()
        for q in self.queues.values():
            due: Any = q.client.zrangebyscore(
                q.sched_keys.sched, "-inf", now, start=0, num=limit, withscores=True
            )
            for raw_name, score in due:
                name = raw_name.decode()
                s = self.schedules.get(name)
                if s is None:
                    continue  # declared by another deployment; its scanners fire it
                fired += self._fire(q, s, int(score), now)
        return fired

    def _fire(self, q: Queue, s: Schedule, tick: int, now: int) -> int:
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
            body = {"task": s.task, "schedule": s.name, **encode_call(s.args, dict(s.kwargs))}
            task = registry.get(s.task)
            job = q.prepare(
                body,
                f"cron:{s.name}:{fire_tick}",
                s.priority,
                max_retries=task.max_retries if task is not None else None,
                visibility_timeout=task.visibility_timeout if task is not None else None,
            )
        ok = q.fire(s.name, tick, nxt, job)
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
        return self._set_paused(name, True)

    def resume(self, name: str) -> bool:
        return self._set_paused(name, False)

    def _set_paused(self, name: str, paused: bool) -> bool:
        for q in self.queues.values():
            raw = q.client.hget(q.sched_keys.sched_defs, name)
            if raw is None:
                continue
            definition = json.loads(raw)
            definition["paused"] = paused
            pipe = q.client.pipeline(transaction=True)
            pipe.hset(q.sched_keys.sched_defs, name, json.dumps(definition))
            if paused:
                pipe.zrem(q.sched_keys.sched, name)
            else:
                s = self.schedules.get(name) or _from_definition(definition)
                pipe.zadd(q.sched_keys.sched, {name: s.first_tick(self.now_ms())})
            pipe.execute()
            return True
        return False

    def listing(self) -> list[dict[str, Any]]:
        """Every stored schedule with next tick, last firing and the last job's state."""
        rows = []
        for q in self.queues.values():
            defs: Any = q.client.hgetall(q.sched_keys.sched_defs)
            if not defs:
                continue
            pipe = q.client.pipeline(transaction=False)
            names = sorted(k.decode() for k in defs)
            for name in names:
                pipe.zscore(q.sched_keys.sched, name)
                pipe.hget(q.sched_keys.sched_last, name)
            replies = pipe.execute()
            for i, name in enumerate(names):
                definition = json.loads(defs[name.encode()])
                nxt, last = replies[2 * i], replies[2 * i + 1]
                last_job = last.decode().split(" ", 1)[1] if last else None
                # the tick that fired is in the job's tag (catch-up may fire a later one)
                last_tick = last_job.rsplit(":", 1)[1] if last_job else None
                rows.append(
                    {
                        "name": name,
                        "queue": q.name,
                        "task": definition["task"],
                        "cron": definition.get("cron"),
                        "interval": definition.get("interval"),
                        "paused": bool(definition.get("paused")),
                        "next_ms": int(nxt) if nxt is not None else None,
                        "last_ms": int(last_tick) if last_tick else None,
                        "last_job": last_job,
                        "last_job_state": ((q.state(last_job) or "finished") if last_job else None),
                    }
                )
        return rows


def _from_definition(definition: Mapping[str, Any]) -> Schedule:
    fields = {k: v for k, v in definition.items() if k not in ("digest", "paused")}
    fields["args"] = tuple(fields.get("args", ()))
    return Schedule(**fields)
