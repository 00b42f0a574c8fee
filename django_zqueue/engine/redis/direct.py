"""Script calls sent straight on a pooled connection, without redis-py's command path.

A script call is one command whose reply needs no parsing callback, yet
``Redis.execute_command`` (and a pipeline's ``execute``) spends more client CPU on it
than the round trip costs: a pool checkout that polls the socket for stray data, a retry
object and closures built per call, and redis-py's metrics hooks. :class:`Direct` keeps
the connections it has used in a list of its own (a pop and an append; no lock, no
poll) and sends the packed command, or a batch's commands in one write, on one of them.

It keeps the client's promises:

* a dropped connection is retried once at once, a timeout never (a timed-out script
  call may have run), as :func:`.connection.make_client` configures the client;
* a single call answered ``READONLY`` (the node became a replica; nothing ran) goes to
  the client's own path, which waits and retries; a batch's ``READONLY`` reply is
  returned in its place, as a pipeline returns it, and its connection is dropped;
* a connection is put back in the list only after its reply was read whole; one that
  failed is closed and handed back to the pool; the list keeps at most an eighth of the
  pool's bound (1 to 8: redis-py's default pool allows 100), the others go back to the
  pool, so the connections a bounded pool lends to plain commands are not held idle;
* after a fork the child never uses the parent's sockets;
* the client's health check (a PING after 30 idle seconds) still runs.

Only a plain client takes this path (:func:`direct_for`): a Redis Cluster, a Sentinel
pool, a single-connection client, any other pool class, and every client while
something wraps redis-py's command path (a tracer: :func:`instrumented`) keep
``execute_command``.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis
from redis.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError
from redis.utils import HIREDIS_AVAILABLE

if HIREDIS_AVAILABLE:
    from hiredis import pack_command as hiredis_pack

T = TypeVar("T")

#: the pool classes whose connections :class:`Direct` may hold between calls
PLAIN_POOLS = (redis.ConnectionPool,)


class Direct:
    """Sends a command on a connection of ``client``'s pool kept between calls."""

    __slots__ = ("client", "idle", "keep", "packs_with_hiredis", "pid", "pool")

    def __init__(self, client: redis.Redis) -> None:
        #: weak: the table of Directs must not keep its clients alive
        self.client = weakref.ref(client)
        self.pool: Any = client.connection_pool
        #: connections taken from the pool, each idle with no reply pending
        self.idle: list[Any] = []
        #: how many idle connections it keeps (an eighth of the pool's bound, 1 to 8):
        #: more go back to the pool, so plain commands find the pool as they did
        self.keep = max(1, min(8, int(getattr(self.pool, "max_connections", 8) or 8) // 8))
        self.pid = os.getpid()
        #: redis-py packs with hiredis too here (installed, no packer of the user's)
        self.packs_with_hiredis = HIREDIS_AVAILABLE and not self.pool.connection_kwargs.get(
            "command_packer"
        )

    def _pack(self, conn: Any, args: tuple[Any, ...]) -> Any:
        """``args`` as RESP bytes, as ``conn.pack_command(*args)`` packs them: with
        hiredis, in one C call, without redis-py's pass over every argument (a name of
        two words, a view or bytearray, a bad type: redis-py's packer, its error)."""
        if self.packs_with_hiredis and isinstance(args[0], str) and " " not in args[0]:
            try:
                return [hiredis_pack(args)]  # send_packed_command takes a list
            except TypeError:
                pass
        return conn.pack_command(*args)

    def _take(self) -> Any:
        if self.pid != os.getpid():  # a forked child: the parent's sockets are not ours
            self.idle = []
            self.pid = os.getpid()
        try:
            return self.idle.pop()
        except IndexError:
            return self.pool.get_connection()

    def _keep(self, conn: Any) -> None:
        """Keep ``conn`` (no reply pending) for the next call, or give it back."""
        if len(self.idle) < self.keep:
            self.idle.append(conn)
        else:
            self.pool.release(conn)

    def _drop(self, conn: Any) -> None:
        conn.disconnect()
        self.pool.release(conn)

    def _round_trip(self, pack: Callable[[Any], Any], read: Callable[[Any], T]) -> T:
        """``read(conn)`` after sending ``pack(conn)`` on a kept connection: sent once
        more on a dropped connection, never after a timeout; an error reply raised with
        the connection kept (its reply was read whole), but for ``READONLY`` (a replica:
        the connection is dropped, a new one reaches the primary)."""
        conn = self._take()
        try:
            packed = pack(conn)
        except BaseException:
            self._keep(conn)  # nothing was sent
            raise
        for attempt in (0, 1):
            try:
                conn.send_packed_command(packed)
                result = read(conn)
            except RedisConnectionError:
                # closed by redis-py already; reconnects on the next send
                if attempt:
                    self._drop(conn)
                    raise
                continue
            except ReadOnlyError:
                self._drop(conn)
                raise
            except redis.ResponseError:
                self._keep(conn)
                raise
            except BaseException:
                self._drop(conn)
                raise
            if conn.should_reconnect():  # the server announced a move
                conn.disconnect()
            self._keep(conn)
            return result
        raise AssertionError("unreachable")

    def execute(self, *args: Any) -> Any:
        """The reply of command ``args``; a ``ResponseError`` reply is raised; after
        ``READONLY`` the client's own path sends it (it waits for a new primary)."""
        try:
            return self._round_trip(lambda conn: self._pack(conn, args), _read_one)
        except ReadOnlyError:
            client: Any = self.client()
            if client is None:  # unreachable while a caller holds the client
                raise
            return client.execute_command(*args)

    def execute_many(self, commands: Sequence[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
        """The replies of ``commands`` (``(args, options)``, as a pipeline queues them),
        sent in one round trip: each parsed as the client parses it (its response
        callback), a ``ResponseError`` reply in its place as the exception object (a
        pipeline's ``execute(raise_on_error=False)``). A ``READONLY`` reply among them
        drops the connection once all are read."""
        client: Any = self.client()
        if client is None:  # unreachable while a caller holds the client
            raise RuntimeError("the client of this connection is gone")
        readonly: list[ReadOnlyError] = []

        def read(conn: Any) -> list[Any]:
            replies: list[Any] = []
            for args, options in commands:
                try:
                    replies.append(client.parse_response(conn, args[0], **options))
                except redis.ResponseError as exc:
                    replies.append(exc)
                    if isinstance(exc, ReadOnlyError):
                        readonly.append(exc)
            if readonly:
                raise _Replica(replies)
            return replies

        try:
            return self._round_trip(lambda conn: conn.pack_commands([a for a, _ in commands]), read)
        except _Replica as replica:
            return replica.replies


def _read_one(conn: Any) -> Any:
    return conn.read_response()


class _Replica(ReadOnlyError):
    """A batch's replies, one of them ``READONLY``: its connection is dropped."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__("READONLY")
        self.replies = replies


#: one Direct per client: the connections it holds are the client's, however many
#: engines (queues) share that client, and go when the client goes
_directs: weakref.WeakKeyDictionary[redis.Redis, Direct] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_RLOCK = type(threading.RLock())


def renew_locks(pool: Any) -> None:
    """In a forked child: fresh locks for ``pool``. Only the forking thread lives on in a
    child, so a lock another thread of the parent held at the fork is never released, and
    redis-py's reset of a pool after a fork takes the pool's old lock first: the child's
    first command would hang for good (seen with a worker's isolated job while its
    heartbeat thread used the pool)."""
    for name in ("_lock", "_fork_lock"):
        old = getattr(pool, name, None)
        if old is not None:
            setattr(pool, name, threading.RLock() if isinstance(old, _RLOCK) else threading.Lock())


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    for client in list(_directs.keys()):
        renew_locks(client.connection_pool)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def instrumented() -> bool:
    """Whether something wraps redis-py's command path (OpenTelemetry's redis
    instrumentation, Sentry's, ddtrace: each wraps ``Redis.execute_command`` and the
    pipeline's ``execute``): then the calls keep that path, so they are traced."""
    return any(
        hasattr(f, "__wrapped__")
        for f in (redis.Redis.execute_command, Pipeline.execute, Pipeline.execute_command)
    )


def direct_for(client: Any) -> Direct | None:
    """The :class:`Direct` of ``client``, or None where its own path must be kept."""
    if type(client) is not redis.Redis or getattr(client, "connection", None) is not None:
        return None
    if "execute_command" in vars(client) or instrumented():  # a patched client, a tracer
        return None
    if type(client.connection_pool) not in PLAIN_POOLS:
        return None
    with _lock:
        direct = _directs.get(client)
        if direct is None:
            direct = _directs[client] = Direct(client)
        return direct
