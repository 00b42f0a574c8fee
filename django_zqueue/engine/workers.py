"""The engine's worker verbs (``engine.workers``): a worker's wake-ups, its registration
in the workers hashes, the orders left for it (quiet, stop: the ``wctl`` hash of each
queue, read by the worker every second) and the key-type check behind its error
lines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..events import kv, log
from ..exceptions import QueueUnavailable
from .base import Core
from .keys import wrong_types
from .protocol import WireProtocol
from .redis.connection import is_cluster, slot_groups, wait_any


class Wakeups:
    """The notify lists of several queues of one Redis, grouped by cluster slot: what a
    worker's idle threads block on (``BLPOP``)."""

    __slots__ = ("client", "groups", "turn")

    def __init__(self, client: Any, keys: list[str]) -> None:
        self.client = client
        #: the lists, grouped by cluster slot (one group off a cluster)
        self.groups: list[list[str]] = slot_groups(client, keys)
        self.turn = [0]  # which group a wait blocks on next (connection.wait_any)

    @property
    def pipelined(self) -> bool:
        """Whether one ``BLPOP`` of every list can lead a pipeline (one group, no
        cluster): a woken thread's claim then goes right behind it."""
        return len(self.groups) == 1 and not is_cluster(self.client)

    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds`` for a wake-up token on any list; True if one came
        (:func:`~django_zqueue.engine.redis.connection.wait_any`)."""
        return wait_any(self.client, self.groups, seconds, self.turn)


#: the orders an operator may leave for a worker, weakest first: ``quiet`` (claim no more,
#: finish the running jobs, stay idle), ``stop`` (claim no more, finish them, exit)
ORDERS = ("quiet", "stop")


class Workers:
    """The worker verbs of one queue's engine (``engine.workers``); across queues, they
    take the engines of the others (queues of this engine's Redis)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def wakeups(self, engines: Sequence[Core]) -> Wakeups:
        """The notify lists of ``engines`` (queues of this engine's Redis)."""
        return Wakeups(self._engine._client, [key for e in engines for key in e._notify_keys])

    def wrong_types(self, engines: Sequence[Core]) -> list[str]:
        """The fixed keys of ``engines`` whose type is wrong, as ``key (found, not
        expected)`` (one round trip; [] when they cannot be read)."""
        return wrong_types(self._engine._client, [k for e in engines for k in e._part_keys])

    def register(self, engines: Sequence[Core], worker: str, entry: str) -> list[dict[Any, Any]]:
        """Write ``worker``'s entry in the workers hash of each of ``engines`` and read
        each hash back (one round trip); ``QueueUnavailable`` when it fails."""
        pipe = self._engine._client.pipeline(transaction=False)
        for e in engines:
            pipe.hset(e._keys.workers, worker, entry)
            pipe.hgetall(e._keys.workers)
        # the proto hashes this process wrote (engine.protocol.publish): one gone means a
        # server that lost its data, maybe with its scripts' library loaded again by
        # another process before this one's calls found it missing (on_library_lost)
        set_up = [e for e in engines if e.proto_written]
        for e in set_up:
            pipe.exists(e._keys.proto)
        try:
            replies = pipe.execute()
        except Exception as exc:
            raise QueueUnavailable(str(exc)) from exc
        hashes = replies[: 2 * len(engines)]
        for e, present in zip(set_up, replies[2 * len(engines) :], strict=True):
            if not present:
                try:
                    WireProtocol(e).restore()
                except Exception as exc:  # the next registration tries again
                    log.warning(kv(event="restore_failed", what=e._keys.proto, error=str(exc)))
        return list(hashes[1::2])

    def forget(self, entries: Sequence[tuple[Core, Any]]) -> None:
        """Delete the workers-hash entries ``(engine, worker id)`` and the orders left
        for them (one round trip, none when there are none); ``QueueUnavailable`` when it
        fails."""
        pipe = self._engine._client.pipeline(transaction=False)
        for e, worker in entries:
            pipe.hdel(e._keys.workers, worker)
            pipe.hdel(e._keys.wctl, worker)
        try:
            pipe.execute()
        except Exception as exc:
            raise QueueUnavailable(str(exc)) from exc

    def order(self, worker: str, what: str) -> bool:
        """Leave order ``what`` (one of :data:`ORDERS`) for ``worker`` in this queue; a
        ``stop`` replaces a ``quiet``, a ``quiet`` never replaces a ``stop``. True when
        the order was written (False: a stop was already left)."""
        if what not in ORDERS:
            raise ValueError(f"no worker order {what!r}: one of {', '.join(ORDERS)}")
        client, key = self._engine._client, self._engine._keys.wctl
        try:
            if what == "stop":
                client.hset(key, worker, what)
                return True
            return bool(client.hsetnx(key, worker, what))
        except Exception as exc:
            raise QueueUnavailable(str(exc)) from exc

    def orders(self, engines: Sequence[Core], worker: str) -> list[str]:
        """The orders left for ``worker`` in ``engines`` (queues of this engine's
        Redis; one round trip), known ones only, strongest last."""
        pipe = self._engine._client.pipeline(transaction=False)
        for e in engines:
            pipe.hget(e._keys.wctl, worker)
        try:
            replies = pipe.execute()
        except Exception as exc:
            raise QueueUnavailable(str(exc)) from exc
        found = {r.decode() if isinstance(r, bytes) else r for r in replies}
        return [o for o in ORDERS if o in found]

    def key(self) -> str:
        """The name of the queue's workers hash (for a log line)."""
        return self._engine._keys.workers
