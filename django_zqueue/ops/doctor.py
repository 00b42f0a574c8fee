"""``manage.py zqueue_doctor``: the first things that go wrong, diagnosed on the live Redis.

Each diagnosis is a :class:`Finding` with a level, a topic, what was found and what to
do. Nothing here writes to Redis; the database is read only for the admin permissions.
The page docs/troubleshooting.md lists the same diagnoses with their symptoms.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from django.utils.translation import ngettext
from redis.exceptions import ResponseError

from .. import conf
from ..conf.redis_url import redacted_url
from ..engine.keycheck import Finding as Finding
from ..engine.keycheck import Level as Level
from ..web.humanize import count, duration

if TYPE_CHECKING:
    from django.contrib.auth.models import Permission

    from ..engine.redis.connection import RedisServer
    from ..queue import Queue


#: a delayed job due, or a lease expired, this long ago is one no scanner has handled
#: (an embedded scanner passes every 2 s, ``zqueue_scanner`` every 1 s)
SCANNER_SLACK_MS = 30_000
#: a periodic schedule whose next tick is this late is one no scanner fires
SCHEDULE_SLACK_MS = 60_000
#: worker threads seen within this many seconds count as live (Queue.live_threads)
LIVE_WITHIN = 30.0
#: clock skew between this host and Redis: a warning from here, an error from CLOCK_ERROR
CLOCK_WARNING_MS = 1_000
CLOCK_ERROR_MS = 30_000
MIN_REDIS = (7, 0)


def _ago(ms: float) -> str:
    """Milliseconds as words (:func:`django_zqueue.web.humanize.duration`)."""
    return duration(ms / 1000)


def _count(n: int, singular: str, plural: str) -> str:
    """``ngettext(singular, plural, n)``, each with ``%(n)s``: the count, with the
    locale's thousands separator."""
    return ngettext(singular, plural, n) % {"n": count(n)}


def redis_error_parts(exc: BaseException) -> tuple[str, str]:
    """(what went wrong with Redis, what to check) for an error of redis-py, or a
    :class:`~django_zqueue.exceptions.QueueUnavailable` wrapping one."""
    import redis

    from ..exceptions import QueueUnavailable

    if isinstance(exc, QueueUnavailable) and exc.__cause__ is not None:
        exc = exc.__cause__
    try:
        url = redacted_url(conf.get_config().redis_url)
    except Exception:  # settings unreadable: the checks say why
        url = "ZQUEUE['REDIS_URL']"
    detail = (str(exc).strip() or type(exc).__name__).rstrip(".")
    if isinstance(exc, redis.AuthenticationError):
        return (
            f"Redis at {url} refused the login: {detail}",
            "check the user name and password in ZQUEUE['REDIS_URL']",
        )
    if isinstance(exc, redis.ReadOnlyError):
        return (
            f"Redis at {url} is a read-only replica: {detail}",
            "point ZQUEUE['REDIS_URL'] at the master",
        )
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return (
            f"Redis at {url} refused a command: {detail}",
            "give the ACL user of ZQUEUE['REDIS_URL'] the rules in docs/operations.md "
            "(A Redis user for django_zqueue)",
        )
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return (
            f"Redis at {url} is out of memory: {detail}",
            "raise maxmemory, or drain or purge queues (python manage.py zqueue_stats shows "
            "what they hold)",
        )
    return (
        f"cannot reach Redis at {url}: {detail}",
        "check that Redis is running there and that ZQUEUE['REDIS_URL'] points to it",
    )


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
    from ..engine.redis.connection import RedisServer

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


# ------------------------------------------------------------------ settings and tasks


def _settings() -> Iterator[Finding]:
    """The app's system checks (settings, schedules in settings, tasks' queues)."""
    from django.core import checks

    messages = [
        m
        for m in checks.run_checks(tags=["django_zqueue"])
        if (m.id or "").startswith("django_zqueue.")
    ]
    for m in messages:
        level: Level = "error" if m.level >= checks.ERROR else "warning"
        yield Finding(level, "settings", f"({m.id}) {m.msg}", m.hint or "")
    if not messages:
        yield Finding("ok", "settings", "ZQUEUE passes the system checks")


def _tasks() -> Iterator[Finding]:
    from ..tasks import registry

    registry.autodiscover()
    names = sorted(registry.all_tasks())
    if not names:
        yield Finding(
            "warning",
            "tasks",
            "no @task is registered, so a worker has nothing it may run",
            "define tasks in a module named tasks.py in an installed app (the worker imports "
            "<app>.tasks of every app in INSTALLED_APPS)",
        )
        return
    yield Finding(
        "ok", "tasks", _count(len(names), "%(n)s task registered", "%(n)s tasks registered")
    )


# ------------------------------------------------------------------ Redis


def _redis(config: conf.Config) -> Iterator[Finding]:
    import redis

    from ..engine.redis.connection import UNAVAILABLE_ERRORS, RedisServer
    from ..exceptions import QueueUnavailable

    url = redacted_url(config.redis_url)
    try:
        server = RedisServer(config)
        ms = server.ping_ms()
        servers = server.infos("server")
    except (QueueUnavailable, redis.exceptions.NoPermissionError, *UNAVAILABLE_ERRORS) as exc:
        yield Finding("error", "redis", *redis_error_parts(exc))
        return
    versions = sorted({str(info.get("redis_version", "?")) for info in servers.values()})
    yield Finding("ok", "redis", f"{url} answers in {ms:.1f} ms (Redis {', '.join(versions)})")
    for version in versions:
        parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
        if len(parts) == 2 and parts < MIN_REDIS:
            yield Finding(
                "error",
                "redis",
                f"Redis {version} is older than 7.0, which django_zqueue needs",
                "upgrade Redis (or use Valkey 7.2+)",
            )


def _libraries(server: RedisServer, config: conf.Config) -> Iterator[Finding]:
    """The scripts' Functions library of this release, and those other releases left."""
    from ..engine.scripts import SCRIPT_NAMES
    from ..engine.scripts.source import LIBRARY_PREFIX, PROTOCOL_LIBRARY, library

    found = server.libraries(LIBRARY_PREFIX) if config.lua_functions else None
    if found is None:
        return
    ours = library(SCRIPT_NAMES).name
    state = "loaded" if ours in found else "not loaded yet (the first script call loads it)"
    yield Finding("ok", "redis", f"the scripts' Functions library {ours} is {state}")
    # the wire protocol's library is every release's, under one name (_protocol)
    others = [name for name in found if name not in (ours, PROTOCOL_LIBRARY)]
    if others:
        yield Finding(
            "note",
            "redis",
            _count(len(others), "%(n)s library", "%(n)s libraries")
            + f" of other django_zqueue releases loaded: {', '.join(others)}",
            f"once no process of those releases runs: redis-cli FUNCTION DELETE {others[0]}",
        )


#: what sets the wire protocol up (docs/protocol.md)
PROTOCOL_FIX = "python manage.py zqueue_protocol (a worker's start does it too)"


def _protocol(config: conf.Config) -> Iterator[Finding]:
    """The wire protocol's library (docs/protocol.md): loaded, and at which release's
    build; missing is a warning once a queue is set up for producers (its proto hash)."""
    from ..engine.scripts import package_version
    from ..engine.scripts.source import PROTOCOL_LIBRARY, protocol_library, version_tuple
    from ..exceptions import ZQueueError
    from ..queue import get_queue

    engines = [get_queue(name).engine for name in config.queues]
    try:
        held = engines[0].protocol_loaded()
    except (ResponseError, ZQueueError):  # no Redis Functions, FUNCTION LIST refused
        return
    what = f"the wire protocol's library {PROTOCOL_LIBRARY}"
    ours = package_version()
    if held is None:
        level: Level = "warning" if _set_up(engines) else "note"
        yield Finding(
            level,
            "redis",
            f"{what} is not loaded: producers in other languages get 'Function not found'",
            PROTOCOL_FIX,
        )
    elif held.code == protocol_library(ours).code:
        yield Finding("ok", "redis", f"{what} is loaded, at this release's build ({ours})")
    elif held.build == ours:
        yield Finding(
            "note",
            "redis",
            f"{what} is loaded at build {ours} with other text than this release's (another "
            "build of the same version)",
            PROTOCOL_FIX + " replaces it",
        )
    elif version_tuple(held.build) > version_tuple(ours):
        yield Finding(
            "note",
            "redis",
            f"{what} is loaded at build {held.build}, newer than this release ({ours}): "
            "this release keeps it",
        )
    else:
        yield Finding(
            "warning",
            "redis",
            f"{what} is loaded at build {held.build or '(none named)'}, older than this "
            f"release ({ours}): producers in other languages publish as that release did",
            PROTOCOL_FIX,
        )


def _set_up(engines: list[Any]) -> bool:
    """Whether any of ``engines``' queues has a proto hash (set up for producers)."""
    from ..exceptions import ZQueueError

    for engine in engines:
        try:
            if engine.protocol_stored():
                return True
        except (ResponseError, ZQueueError):  # a proto key of the wrong type: set up once
            return True
    return False


def _memory(server: RedisServer) -> Iterator[Finding]:
    warning = server.eviction_warning()
    if warning:
        yield Finding(
            "warning",
            "eviction",
            warning.rsplit(". Set ", 1)[0],
            "CONFIG SET maxmemory-policy noeviction, and the same in redis.conf "
            "(docs/operations.md, Redis configuration)",
        )
    else:
        yield Finding("ok", "eviction", "maxmemory-policy is noeviction")
    for node, info in server.infos("memory").items():
        used, limit = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
        where = f" on {node}" if node else ""
        if limit and used > 0.8 * limit:
            yield Finding(
                "warning",
                "memory",
                f"Redis{where} uses {used * 100 // limit}% of its maxmemory ({used} of {limit} "
                "bytes): at 100% every enqueue fails",
                "raise maxmemory, or drain or purge queues (zqueue_stats shows what they hold)",
            )
    snapshots = server.snapshots()
    for node, info in server.infos("persistence").items():
        if str(info.get("aof_enabled", "1")) == "0":
            where = f" on {node}" if node else ""
            lost = (
                "every job it holds is lost (snapshots are off too: save '')"
                if snapshots is False
                else "the jobs written since its last snapshot are lost"
            )
            yield Finding(
                "note",
                "persistence",
                f"AOF is off{where}: if Redis restarts, {lost}",
                "for production: appendonly yes (docs/operations.md, Redis configuration)",
            )


def _clock(config: conf.Config) -> Iterator[Finding]:
    """This host's clock against Redis' (the scripts use Redis TIME; enqueue_at() and the
    workers' liveness use the hosts' clocks)."""
    from ..queue import get_queue

    engine = get_queue(next(iter(config.queues))).engine  # Redis' clock on its node
    before = time.time() * 1000
    redis_ms = engine.server_ms()
    after = time.time() * 1000
    skew = redis_ms - (before + after) / 2
    if abs(skew) < CLOCK_WARNING_MS:
        yield Finding("ok", "clock", f"this host and Redis agree within {abs(skew):.0f} ms")
        return
    way = "behind" if skew > 0 else "ahead of"
    yield Finding(
        "error" if abs(skew) >= CLOCK_ERROR_MS else "warning",
        "clock",
        f"this host's clock is {abs(skew) / 1000:.1f} s {way} Redis': enqueue_at() times "
        "shift by as much, and from 30 s the workers of other hosts look dead",
        "synchronise the clocks with NTP (timedatectl set-ntp true, or chrony) on this host "
        "and on Redis' host",
    )


# ------------------------------------------------------------------ queues


def _queue(name: str) -> Iterator[Finding]:
    from ..engine.keycheck import key_problems, orphan_problems
    from ..exceptions import CorruptKey
    from ..queue import get_queue

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
    return q.engine.overdue(SCANNER_SLACK_MS)


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


def repairs() -> list[Any]:
    """The repairs of every configured queue's keys and orphan records
    (:mod:`django_zqueue.engine.keycheck`)."""
    from ..engine.keycheck import key_problems, orphan_problems
    from ..queue import get_queue

    return [
        p.repair
        for name in conf.get_config().queues
        for q in (get_queue(name),)
        for p in (*key_problems(q.engine), *orphan_problems(q.engine))
        if p.repair is not None
    ]


# ------------------------------------------------------------------ schedules


def _schedules() -> Iterator[Finding]:
    from ..exceptions import CorruptKey, ZQueueError
    from ..tasks.schedules import Scheduler

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
    now = scheduler.now_ms()
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


def _admin() -> Iterator[Finding]:
    from django.apps import apps

    if not apps.is_installed("django.contrib.admin") or not apps.is_installed(
        "django.contrib.auth"
    ):
        yield Finding("note", "admin", "django.contrib.admin is not installed: no dashboard")
        return
    from django.db import DatabaseError

    try:
        missing, lacking = _admin_permissions()
    except DatabaseError as exc:
        yield Finding(
            "warning",
            "admin",
            f"cannot read the permissions from the database: {str(exc).strip()}",
            "python manage.py migrate",
        )
        return
    if missing:
        yield Finding(
            "warning",
            "admin",
            f"the permissions {', '.join(missing)} are not in the database: only superusers "
            "see the dashboard",
            "python manage.py migrate (it creates them; the app has no table)",
        )
    elif lacking:
        yield Finding(
            "note",
            "admin",
            f"{_count(lacking, '%(n)s staff user', '%(n)s staff users')} without "
            "django_zqueue.view_queue: "
            "ZQueue > Queues is not in their admin",
            "grant 'Can view queue' (and 'Can see job arguments and errors', 'Can requeue, "
            "delete and purge dead letters' as needed) in Authentication and Authorization > "
            "Groups",
        )
    else:
        yield Finding("ok", "admin", "the dashboard's permissions exist (ZQueue > Queues)")


def _admin_permissions() -> tuple[list[str], int]:
    """(the dashboard's permissions missing from the database, and when none is: how many
    staff users who are not superusers lack view_queue). Raises DatabaseError."""
    from django.contrib.auth.models import Permission

    wanted = {"view_queue", "view_payload", "manage_dead_letters"}
    perms = {
        p.codename: p
        for p in Permission.objects.filter(
            content_type__app_label="django_zqueue", codename__in=wanted
        )
    }
    missing = sorted(wanted - set(perms))
    if missing:
        return missing, 0
    return missing, _staff_without(perms["view_queue"])


def _staff_without(view: Permission) -> int:
    """Staff users, not superusers, granted ``view`` neither directly nor by a group."""
    from django.contrib.auth import get_user_model
    from django.core.exceptions import FieldError
    from django.db.models import Q

    try:
        User = get_user_model()
        return (
            User._default_manager.filter(is_staff=True, is_superuser=False)
            .exclude(Q(user_permissions=view) | Q(groups__permissions=view))
            .distinct()
            .count()
        )
    except FieldError:  # a custom user model without is_staff or is_superuser
        return 0
