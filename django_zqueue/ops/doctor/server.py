"""The doctor's checks of the Redis server: the connection, the script libraries and the
wire protocol, memory, the clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from ... import conf
from ...conf.redis_url import redacted_url
from ...engine.keycheck import Finding as Finding
from ...engine.keycheck import Level as Level
from .common import (
    CLOCK_ERROR_MS,
    CLOCK_WARNING_MS,
    MIN_REDIS,
    _count,
    redis_error_parts,
)

if TYPE_CHECKING:
    from ...engine.redis.connection import RedisServer


def _redis(config: conf.Config) -> Iterator[Finding]:
    import redis

    from ...engine.redis.connection import UNAVAILABLE_ERRORS, RedisServer
    from ...exceptions import QueueUnavailable

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
    from ...engine.scripts import SCRIPT_NAMES
    from ...engine.scripts.source import LIBRARY_PREFIX, PROTOCOL_LIBRARY, library

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
    from ...engine.scripts import package_version
    from ...engine.scripts.source import PROTOCOL_LIBRARY, protocol_library, version_tuple
    from ...exceptions import ZQueueError
    from ...queue import get_queue

    engines = [get_queue(name).engine for name in config.queues]
    try:
        held = engines[0].protocol.loaded()
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
    from ...exceptions import ZQueueError

    for engine in engines:
        try:
            if engine.protocol.stored():
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
    from ...queue import get_queue

    engine = get_queue(next(iter(config.queues))).engine  # Redis' clock on its node
    before = time.time() * 1000
    redis_ms = engine.positions.server_ms()
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
