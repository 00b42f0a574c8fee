"""``manage.py zqueue_doctor``: the first things that go wrong, diagnosed on the live Redis.

Each diagnosis is a :class:`Finding` with a level, a topic, what was found and what to
do. Nothing here writes to Redis; the database is read only for the admin permissions.
The page docs/troubleshooting.md lists the same diagnoses with their symptoms. The parts:
:mod:`.project` (settings, tasks, admin), :mod:`.server` (Redis, libraries, protocol,
memory, clock), :mod:`.queues`, :mod:`.schedules`; :mod:`.common` their thresholds.
"""

from __future__ import annotations

from typing import Any

from ... import conf
from ...engine.keycheck import Finding as Finding
from ...engine.keycheck import Level as Level
from .common import (
    CLOCK_ERROR_MS,
    CLOCK_WARNING_MS,
    LIVE_WITHIN,
    MIN_REDIS,
    SCANNER_SLACK_MS,
    SCHEDULE_SLACK_MS,
    redis_error_parts,
)
from .project import _admin, _settings, _tasks
from .queues import _queue
from .schedules import _schedules
from .server import _clock, _libraries, _memory, _protocol, _redis

__all__ = [
    "CLOCK_ERROR_MS",
    "CLOCK_WARNING_MS",
    "LIVE_WITHIN",
    "MIN_REDIS",
    "SCANNER_SLACK_MS",
    "SCHEDULE_SLACK_MS",
    "Finding",
    "Level",
    "diagnose",
    "redis_error_parts",
    "repairs",
]


def diagnose() -> list[Finding]:
    """Every diagnosis, in the order of docs/troubleshooting.md. Stops after the
    settings when they are invalid, and after the connection when Redis cannot be
    reached: the rest needs both."""
    findings = list(_settings())
    if any(f.level == "error" for f in findings):
        return findings
    config = conf.get_config()
    reached = list(_redis(config))
    findings += reached
    if any(f.level == "error" for f in reached):
        return findings
    from ...engine.redis.connection import RedisServer

    findings += _memory(RedisServer(config))
    findings += _libraries(RedisServer(config), config)
    findings += _protocol(config)
    findings += _clock(config)
    findings += _tasks()
    for name in config.queues:
        findings += _queue(name)
    findings += _schedules()
    findings += _admin()
    return findings


def repairs() -> list[Any]:
    """The repairs of every configured queue's keys and orphan records
    (:mod:`django_zqueue.engine.keycheck`)."""
    from ...engine.keycheck import key_problems, orphan_problems
    from ...queue import get_queue

    return [
        p.repair
        for name in conf.get_config().queues
        for q in (get_queue(name),)
        for p in (*key_problems(q.engine), *orphan_problems(q.engine))
        if p.repair is not None
    ]
