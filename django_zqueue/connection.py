"""One redis-py client (and connection pool) per configured Redis URL.

Clients are created lazily on first use and dropped when ``settings.ZQUEUE`` changes.
redis-py pools notice a ``fork()`` and open fresh connections in the child, so worker
processes never share a socket with their parent.

A standalone server gets a ``redis.Redis``; a Redis Cluster gets redis-py's own
``RedisCluster`` (slot routing, MOVED/ASK handling, failover); a Sentinel-managed
server gets the ``redis.Redis`` of ``Sentinel.master_for``, whose pool asks the
sentinels for the current master. All keys of a queue share one hash tag (one slot), so
each script call, and each transaction, touches one node.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.exceptions import (
    ClusterDownError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.retry import Retry
from redis.sentinel import Sentinel

from . import conf
from .exceptions import QueueUnavailable

_clients: dict[tuple[Any, ...], redis.Redis] = {}
_lock = threading.Lock()


def make_client(config: conf.Config) -> redis.Redis:
    """A new client for ``config``. No connection is opened until the first command,
    except on a Redis Cluster: ``RedisCluster`` reads the slot map at once, and
    :class:`QueueUnavailable` is raised if no startup node answers.

    For a Redis Cluster this is a ``redis.cluster.RedisCluster``: it has the commands
    django_zqueue uses, routed by key, and is typed as ``redis.Redis`` here so callers
    need not care (:func:`is_cluster` tells them apart where the difference matters)."""
    target = config.target()
    if target.topology == "cluster":
        return _cluster_client(config, target)
    if target.topology == "sentinel":
        return _sentinel_client(config, target)
    options: dict[str, Any] = {
        "socket_timeout": config.socket_timeout,
        "socket_connect_timeout": config.socket_connect_timeout,
        "health_check_interval": 30,
        # One immediate retry on a dropped connection, none on a timeout: a timed-out
        # script call may have run, and re-running a publish would add a second job.
        # redis-py's default (10 retries with backoff, timeouts included) would also make
        # an unreachable Redis take many socket timeouts to report.
        "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
    }
    options.update(config.connection_options)
    return redis.Redis.from_url(config.redis_url, **options)


def _cluster_client(config: conf.Config, target: conf.RedisTarget) -> redis.Redis:
    options: dict[str, Any] = {
        "startup_nodes": [
            ClusterNode(host, port)  # type: ignore[no-untyped-call]
            for host, port in target.nodes
        ],
        "username": target.username,
        "password": target.password,
        "ssl": target.ssl,
        "socket_timeout": config.socket_timeout,
        "socket_connect_timeout": config.socket_connect_timeout,
        # redis-py retries a command after a connection error, a timeout or CLUSTERDOWN
        # once it has re-read the slot map (its own failover handling); a short backoff
        # lets an election finish. Note that a timed-out call is re-sent too.
        "retry": Retry(ExponentialWithJitterBackoff(base=0.1, cap=1.0), 5),
    }
    options.update(config.connection_options)
    try:  # RedisCluster reads the slot map from a startup node at once
        client: Any = RedisCluster(**options)
    except RedisClusterException as exc:
        raise QueueUnavailable(f"Redis Cluster is unavailable: {exc}") from exc
    return client  # type: ignore[no-any-return]


def _sentinel_client(config: conf.Config, target: conf.RedisTarget) -> redis.Redis:
    options: dict[str, Any] = {
        "username": target.username,
        "password": target.password,
        "db": target.db,
        "socket_timeout": config.socket_timeout,
        "socket_connect_timeout": config.socket_connect_timeout,
        "health_check_interval": 30,
        # as for a standalone server; after a failover the pool asks the sentinels for
        # the new master on the next connection
        "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
    }
    if target.ssl:
        options["ssl"] = True
    options.update(config.connection_options)
    sentinel_kwargs = options.pop("sentinel_kwargs", None)
    if sentinel_kwargs is None:
        sentinel_kwargs = {
            "socket_timeout": config.socket_timeout,
            "socket_connect_timeout": config.socket_connect_timeout,
            # no retry with backoff on one sentinel (redis-py's default for a client):
            # the pool asks the next sentinel at once instead
            "retry": Retry(NoBackoff(), 0),
        }
    sentinel: Any = Sentinel(  # type: ignore[no-untyped-call]
        list(target.nodes), sentinel_kwargs=sentinel_kwargs
    )
    client: redis.Redis = sentinel.master_for(target.service, **options)
    return client


def is_cluster(client: Any) -> bool:
    """True for redis-py's ``RedisCluster`` and its pipelines."""
    return isinstance(client, RedisCluster | ClusterPipeline)


def socket_timeout(client: Any) -> float | None:
    """The socket timeout a client's connections use (None: no limit)."""
    if is_cluster(client):
        kwargs = client.get_connection_kwargs()
    else:
        kwargs = client.connection_pool.connection_kwargs
    value = kwargs.get("socket_timeout")
    return None if value is None else float(value)


def server_time_ms(client: Any, key: str) -> int:
    """Redis ``TIME`` in ms, read on the node that holds ``key`` (its queue's node, whose
    clock the scripts use)."""
    if is_cluster(client):
        secs, micros = client.time(target_nodes=client.get_node_from_key(key))
    else:
        secs, micros = client.time()
    return int(secs) * 1000 + int(micros) // 1000


def get_client(config: conf.Config | None = None) -> redis.Redis:
    """The shared client for ``config`` (default: the current settings)."""
    config = config or conf.get_config()
    key = (
        config.redis_url,
        config.cluster,
        config.socket_timeout,
        config.socket_connect_timeout,
        tuple(sorted((k, repr(v)) for k, v in config.connection_options.items())),
    )
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = make_client(config)
    return client


def _reset() -> None:
    with _lock:
        for client in _clients.values():
            client.close()
        _clients.clear()


conf.on_reset(_reset)


#: errors that mean "Redis cannot serve this now": connection and timeout errors (the
#: Sentinel's "no master found" among them), and a cluster's failover states
UNAVAILABLE_ERRORS = (
    redis.ConnectionError,
    redis.TimeoutError,
    ClusterDownError,
    TryAgainError,
    SlotNotCoveredError,
)


@contextmanager
def unavailable_as_error(what: str = "Redis") -> Iterator[None]:
    """Turn redis-py's connection and timeout errors (and a cluster's failover states)
    into :class:`QueueUnavailable`."""
    try:
        yield
    except UNAVAILABLE_ERRORS as exc:
        raise QueueUnavailable(f"{what} is unavailable: {exc}") from exc
