"""One redis-py client (and connection pool) per configured Redis URL.

Clients are created lazily on first use and dropped when ``settings.ZQUEUE`` changes.
redis-py pools notice a ``fork()`` and open fresh connections in the child, so worker
processes never share a socket with their parent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import conf
from .exceptions import QueueUnavailable

_clients: dict[tuple[Any, ...], redis.Redis] = {}
_lock = threading.Lock()

#: Waits before each retry of a command refused with READONLY (about 3 s in all).
READONLY_WAITS = (0.1, 0.2, 0.4, 0.8, 1.6)


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
    """A new client for ``config`` (no connection is opened until the first command)."""
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
    """Turn redis-py's connection and timeout errors, and ``READONLY`` refusals that
    outlasted their retries, into :class:`QueueUnavailable`."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError) as exc:
        raise QueueUnavailable(f"{what} is unavailable: {exc}") from exc
