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

import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.exceptions import (
    ClusterDownError,
    ClusterError,
    OutOfMemoryError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.retry import Retry
from redis.sentinel import Sentinel

from ... import conf
from ...conf.redis_url import RedisTarget
from ...exceptions import CorruptKey, QueueUnavailable, RedisFull
from .direct import renew_locks

_clients: dict[tuple[Any, ...], redis.Redis] = {}
_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """Fresh locks in a forked child (:func:`.direct.renew_locks`): this module's, and
    the pools' of the clients it made."""
    global _lock
    _lock = threading.Lock()
    for client in list(_clients.values()):
        pool = getattr(client, "connection_pool", None)
        if pool is not None:
            renew_locks(pool)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

#: Waits before each retry of a command refused with READONLY (about 3 s in all).
READONLY_WAITS = (0.1, 0.2, 0.4, 0.8, 1.6)

#: the type of a queue's client, for the layers above that take one from a caller
RedisClient = redis.Redis


class _Retry(Retry):
    """redis-py's retry, plus a bounded retry of commands refused with ``READONLY``.

    ``READONLY`` means the node is (now) a replica and the command was not run (a script
    is refused at its first write, before any write), so sending it again is safe. After
    a failover behind one address (a managed Redis, a proxy, a DNS name) the connection
    is closed and the next attempt reaches the new primary. Connection errors keep their
    own budget (one immediate retry)."""

    def call_with_retry(
        self,
        do: Callable[[], Any],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> Any:
        for wait in (*READONLY_WAITS, None):
            try:
                return super().call_with_retry(do, fail, is_retryable, with_failure_count)
            except redis.ReadOnlyError as exc:
                if wait is None:
                    raise
                if with_failure_count:
                    fail(exc, 0)  # closes the connection (a count of 0 records no retry)
                else:
                    fail(exc)
                time.sleep(wait)
        raise AssertionError("unreachable")


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
        "retry": _Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
    }
    options.update(config.connection_options)
    return redis.Redis.from_url(config.redis_url, **options)


def _cluster_client(config: conf.Config, target: RedisTarget) -> redis.Redis:
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


def _sentinel_client(config: conf.Config, target: RedisTarget) -> redis.Redis:
    options: dict[str, Any] = {
        "username": target.username,
        "password": target.password,
        "db": target.db,
        "socket_timeout": config.socket_timeout,
        "socket_connect_timeout": config.socket_connect_timeout,
        "health_check_interval": 30,
        # as for a standalone server (READONLY included: an old master back as a replica
        # closes the connection); after a failover the pool asks the sentinels for the
        # new master on the next connection
        "retry": _Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
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


def slot_groups(client: Any, keys: list[str]) -> list[list[str]]:
    """``keys`` grouped by cluster slot, in order; ``[keys]`` off a cluster."""
    if not is_cluster(client):
        return [keys]
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(client.keyslot(key), []).append(key)
    return list(groups.values())


def wait_any(client: Any, groups: list[list[str]], seconds: float, turn: list[int]) -> bool:
    """Block up to ``seconds`` for a wake-up token on any of the lists of ``groups`` (from
    :func:`slot_groups`) and take it; True if one came.

    One ``BLPOP`` over every list, except on a Redis Cluster with the lists on several
    slots, where one ``BLPOP`` may only name keys of one slot: then a token already
    waiting in any list is taken first (one pipelined ``LPOP`` per list, a round trip per
    node), else the wait blocks on one slot's lists for ``seconds / len(groups)``, the
    slots in turn (``turn`` holds the caller's position); a token on another slot is
    seen by the next wait, so within that share of the time."""
    if len(groups) == 1:
        return client.blpop(groups[0], timeout=seconds) is not None
    pipe = client.pipeline(transaction=False)
    for group in groups:
        for key in group:
            pipe.lpop(key)
    if any(token is not None for token in pipe.execute()):
        return True
    group = groups[turn[0] % len(groups)]
    turn[0] += 1
    return client.blpop(group, timeout=max(0.01, seconds / len(groups))) is not None


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
    ClusterError,  # redis-py gave up following TRYAGAIN/ASK/MOVED: a slot on the move
    redis.ConnectionError,
    redis.TimeoutError,
    redis.ReadOnlyError,
    ClusterDownError,
    TryAgainError,
    SlotNotCoveredError,
)


#: how to get out of an ``OOM`` reply (the message of :class:`RedisFull`)
FULL_FIX = (
    "Redis is at maxmemory and refused the command: raise maxmemory (CONFIG SET maxmemory), "
    "or free memory (drain the queues, purge dead letters, shorten result TTLs); keep "
    "maxmemory-policy noeviction, as an evicting policy would drop jobs"
)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is Redis refusing a write at ``maxmemory`` (redis-py's
    OutOfMemoryError, or the same words in a script's error)."""
    return isinstance(exc, OutOfMemoryError) or (
        isinstance(exc, ResponseError) and "used memory > 'maxmemory'" in str(exc)
    )


def redis_full(exc: BaseException) -> RedisFull:
    """The :class:`RedisFull` for an ``OOM`` reply ``exc``, with the fix."""
    return RedisFull(f"{FULL_FIX} (Redis said: {exc})")


#: what to run when a key holds another type than its name says
CORRUPT_FIX = "python manage.py zqueue_doctor names the key; --repair --yes repairs what is safe"
#: the command and key a pipeline's error reply names (``Command # 2 (HGET <key> ...)``)
_PIPELINE_KEY = re.compile(r"^Command # \d+ \(\S+ (\S+)")


def is_wrong_type(exc: BaseException) -> bool:
    """Whether ``exc`` is Redis' ``WRONGTYPE`` reply: a key of another type than the
    command (or a script's command) reads."""
    return isinstance(exc, ResponseError) and "WRONGTYPE" in str(exc)


def corrupt_key(exc: BaseException, where: str = "", keys: Sequence[str] = ()) -> CorruptKey:
    """The :class:`CorruptKey` for a ``WRONGTYPE`` reply ``exc``, naming the key (the one a
    pipeline's error names, else ``keys``: those the command read), and ``where`` the
    error came from (a script's name)."""
    found = _PIPELINE_KEY.match(str(exc))
    if found:
        key = found.group(1)
    elif keys:
        key = keys[0] if len(keys) == 1 else f"one of {', '.join(keys)}"
    else:
        key = "a key it reads"
    head = f"{where}: " if where else ""
    return CorruptKey(
        f"{head}ZQ_CORRUPT_KEY: {key} holds another type than its name says (Redis said: "
        f"{str(exc).strip()}); {CORRUPT_FIX}"
    )


@contextmanager
def unavailable_as_error(what: str = "Redis", keys: Sequence[str] = ()) -> Iterator[None]:
    """Turn redis-py's connection and timeout errors, a cluster's failover states, and
    ``READONLY`` refusals that outlasted their retries, into :class:`QueueUnavailable`;
    an ``OOM`` reply (Redis at ``maxmemory``) into :class:`RedisFull`; a ``WRONGTYPE``
    reply (a key of another type than its name says) into :class:`CorruptKey` (naming
    the key a pipeline's error names, else ``keys``: those read in the block)."""
    try:
        yield
    except UNAVAILABLE_ERRORS as exc:
        raise QueueUnavailable(f"{what} is unavailable: {exc}") from exc
    except ResponseError as exc:
        if is_out_of_memory(exc):
            raise redis_full(exc) from exc
        if is_wrong_type(exc):
            raise corrupt_key(exc, keys=keys) from exc
        raise


def eviction_warning(client: Any) -> str | None:
    """A warning when the Redis behind ``client`` may evict keys, else None.

    Reads ``INFO memory`` (allowed to an ACL user without ``CONFIG``). Eviction deletes
    whole keys, such as the hash of every job's body, without an error to anyone. On a
    Redis Cluster every master is read."""
    if is_cluster(client):
        replies = client.info("memory", target_nodes=client.PRIMARIES)
        policies = {node: info.get("maxmemory_policy") for node, info in replies.items()}
    else:
        policies = {"": client.info("memory").get("maxmemory_policy")}
    bad = {node: p for node, p in sorted(policies.items()) if p not in (None, "noeviction")}
    if not bad:
        return None
    node, policy = next(iter(bad.items()))
    where = f" on {node}" + (f" (and {len(bad) - 1} more masters)" if len(bad) > 1 else "")
    return (
        f"Redis maxmemory-policy is {policy!r}{where if node else ''}: Redis may delete "
        "django_zqueue's keys (whole queues of jobs) when it runs out of memory. Set "
        "maxmemory-policy noeviction."
    )


def redis_eviction_warning(config: conf.Config | None = None) -> str | None:
    """:func:`eviction_warning` for the Redis of the settings (``config``)."""
    return eviction_warning(get_client(config))


def server_infos(client: Any, section: str) -> dict[str, dict[str, Any]]:
    """``INFO section`` of the server, or of every master of a cluster (keyed by node)."""
    if is_cluster(client):
        return dict(client.info(section, target_nodes=client.PRIMARIES))
    return {"": client.info(section)}


class RedisServer:
    """What ``zqueue_doctor`` reads of the Redis of the settings (``config``; or of the
    client ``on``), each with a plain result: its answer time, its ``INFO`` sections, its
    snapshots, its eviction policy."""

    def __init__(self, config: conf.Config | None = None, *, on: Any = None) -> None:
        self._redis = on if on is not None else get_client(config)

    def ping_ms(self) -> float:
        """The time one ``PING`` takes, in ms."""
        t0 = time.perf_counter()
        self._redis.ping()
        return (time.perf_counter() - t0) * 1000

    def infos(self, section: str) -> dict[str, dict[str, Any]]:
        """``INFO section`` of the server, or of every master (:func:`server_infos`)."""
        return server_infos(self._redis, section)

    def snapshots(self) -> bool | None:
        """Whether Redis saves RDB snapshots (``CONFIG GET save`` not empty); None when it
        cannot be read (a managed Redis may refuse CONFIG)."""
        try:
            raw: Any = self._redis.config_get("save")
        except Exception:  # refused or not reachable: unknown
            return None
        if not isinstance(raw, dict) or "save" not in raw:
            return None
        return bool(str(raw["save"]).strip())

    def eviction_warning(self) -> str | None:
        """:func:`eviction_warning` of this server."""
        return eviction_warning(self._redis)

    def libraries(self, prefix: str) -> list[str] | None:
        """The Functions libraries whose name starts with ``prefix``, sorted; None when
        they cannot be read (a cluster client: its scripts are sent with EVALSHA; or a
        server that refuses ``FUNCTION LIST``)."""
        if is_cluster(self._redis):
            return None
        try:
            raw: Any = self._redis.execute_command("FUNCTION", "LIST", "LIBRARYNAME", f"{prefix}*")
        except Exception:  # refused (an ACL, an old server): unknown
            return None
        names = []
        for lib in raw:
            entry = lib if isinstance(lib, dict) else dict(zip(lib[0::2], lib[1::2], strict=True))
            name = entry.get(b"library_name", entry.get("library_name", b""))
            name = name.decode() if isinstance(name, bytes) else str(name)
            names.append(name)
        return sorted(names)
