"""One redis-py client (and connection pool) per configured Redis URL.

Clients are created lazily on first use and dropped when ``settings.ZQUEUE`` changes.
redis-py pools notice a ``fork()`` and open fresh connections in the child, so worker
processes never share a socket with their parent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import conf
from .exceptions import QueueUnavailable

_clients: dict[tuple[Any, ...], redis.Redis] = {}
_lock = threading.Lock()


def make_client(config: conf.Config) -> redis.Redis:
    """A new client for ``config`` (no connection is opened until the first command)."""
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


def get_client(config: conf.Config | None = None) -> redis.Redis:
    """The shared client for ``config`` (default: the current settings)."""
    config = config or conf.get_config()
    key = (
        config.redis_url,
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


@contextmanager
def unavailable_as_error(what: str = "Redis") -> Iterator[None]:
    """Turn redis-py's connection and timeout errors into :class:`QueueUnavailable`."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise QueueUnavailable(f"{what} is unavailable: {exc}") from exc
