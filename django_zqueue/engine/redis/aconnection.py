"""redis-py's asyncio client, one per configured Redis URL and per event loop.

An asyncio client's connections belong to the loop that opened them: Django runs each
async view of a WSGI project on a loop of its own (``async_to_sync``), an ASGI server on
one long-lived loop, and the worker's event-loop lane on its own. So clients are kept per
loop, in a :class:`weakref.WeakKeyDictionary` (a closed loop's client goes with it), and
dropped when ``settings.ZQUEUE`` changes.

The same topologies as :mod:`.connection`: a standalone server, a Redis Cluster
(``redis.asyncio.RedisCluster``) and a Sentinel-managed server.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any

import redis.asyncio as aredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.sentinel import Sentinel

from ... import conf
from ...exceptions import QueueUnavailable

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Any]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def make_async_client(config: conf.Config) -> aredis.Redis:
    """A new asyncio client for ``config`` (no connection opened yet). Typed as
    ``redis.asyncio.Redis``; on a Redis Cluster it is ``redis.asyncio.RedisCluster``."""
    target = config.target()
    options: dict[str, Any] = {
        "socket_timeout": config.socket_timeout,
        "socket_connect_timeout": config.socket_connect_timeout,
    }
    extra = {k: v for k, v in config.connection_options.items() if k != "retry"}
    if target.topology == "cluster":
        nodes = [ClusterNode(host, port) for host, port in target.nodes]
        cluster: Any = RedisCluster(
            startup_nodes=nodes,
            username=target.username,
            password=target.password,
            ssl=target.ssl,
            **options,
            **extra,
        )
        return cluster  # type: ignore[no-any-return]
    if target.topology == "sentinel":
        sentinel = Sentinel(  # type: ignore[no-untyped-call]
            list(target.nodes), sentinel_kwargs=dict(options)
        )
        client: aredis.Redis = sentinel.master_for(
            target.service,
            username=target.username,
            password=target.password,
            db=target.db,
            **options,
            **extra,
        )
        return client
    return aredis.Redis.from_url(config.redis_url, **options, **extra)


def get_async_client(config: conf.Config | None = None) -> aredis.Redis:
    """The asyncio client for ``config`` (default: the current settings) on the running
    event loop. Call it from a coroutine."""
    config = config or conf.get_config()
    loop = asyncio.get_running_loop()
    key = (
        config.redis_url,
        config.cluster,
        config.socket_timeout,
        config.socket_connect_timeout,
        tuple(sorted((k, repr(v)) for k, v in config.connection_options.items())),
    )
    with _lock:
        per_loop = _clients.setdefault(loop, {})
        client = per_loop.get(key)
        if client is None:
            try:
                client = per_loop[key] = make_async_client(config)
            except Exception as exc:  # a cluster with no startup node answering
                raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
    return client


def _reset() -> None:
    # connections are closed with their loop; only forget them here (closing needs the loop)
    with _lock:
        _clients.clear()


conf.on_reset(_reset)
