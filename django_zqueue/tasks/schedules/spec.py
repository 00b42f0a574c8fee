"""A periodic schedule's values and its ticks (:class:`Schedule`); the schedules declared
in code or settings; the job one firing enqueues. :mod:`.schedules` stores and fires them.
"""

from __future__ import annotations

import hashlib
import json
import zoneinfo
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from croniter import croniter
from django.conf import settings

from ... import conf
from ...exceptions import ConfigurationError, InvalidArgument
from ...queue import Queue
from .. import registry
from ..serializer import encode_call

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
            raise InvalidArgument(
                f"schedule {self.name!r}: unknown time zone {self.timezone!r}"
            ) from exc

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


def is_runtime(definition: Mapping[str, Any]) -> bool:
    return definition.get("source") == "runtime"


def job_of(q: Queue, s: Schedule, tag: str | None) -> Any:
    """The job one firing of ``s`` enqueues (``tag`` None: a fresh tag), as ``prepare``
    makes it."""
    body = {"task": s.task, "schedule": s.name, **encode_call(s.args, dict(s.kwargs))}
    task = registry.get(s.task)
    return q.prepare(
        body,
        tag,
        s.priority,
        max_retries=task.max_retries if task is not None else None,
        visibility_timeout=task.visibility_timeout if task is not None else None,
    )


def from_definition(definition: Mapping[str, Any]) -> Schedule:
    """The schedule a stored definition describes (InvalidArgument if it is not valid)."""
    fields = {k: v for k, v in definition.items() if k not in ("digest", "paused", "source")}
    fields["args"] = tuple(fields.get("args", ()))
    return Schedule(**fields)
