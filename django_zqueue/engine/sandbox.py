"""The engine's verbs for a project's tests (``engine.sandbox``, docs/testing.md): the
removal of every key of a prefix (a test's own, when it ends), and the fast-forward of a
queue's delayed jobs (a delay, a retry's backoff, a durable sleep made due now) for
:func:`django_zqueue.testing` 's ``drain``.

Neither is for production: :meth:`Sandbox.wipe_prefix` deletes what its prefix holds, and
:meth:`Sandbox.fast_forward` changes when jobs run. A job parked waiting for a durable
event is left alone (it runs when signalled, or at its timeout).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exceptions import InvalidArgument
from .durable import Durable
from .redis.connection import unavailable_as_error

if TYPE_CHECKING:
    from .base import EngineBase

#: most keys one :meth:`Sandbox.wipe_prefix` deletes (a test's prefix holds far fewer)
WIPE_LIMIT = 100_000
#: most delayed jobs of one shard one :meth:`Sandbox.fast_forward` makes due
FORWARD_LIMIT = 1000


class Sandbox:
    """Test-only verbs of a queue's engine (``engine.sandbox``)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: EngineBase) -> None:
        self._engine = engine

    def wipe_prefix(self, limit: int = WIPE_LIMIT) -> int:
        """Delete every key of this engine's prefix (every queue under it, its schedules,
        workflows and durable records), at most ``limit``; returns how many were
        deleted. Never FLUSHDB: only keys named ``{<prefix>:...``."""
        _check(limit)
        e = self._engine
        match = "{%s:*" % e.prefix  # noqa: UP031 - braces are literal here
        deleted = 0
        with unavailable_as_error():
            found = []
            for key in e._client.scan_iter(match=match, count=1000):
                found.append(key)
                if len(found) >= limit:
                    break
            for start in range(0, len(found), 500):
                pipe = e._client.pipeline(transaction=False)
                for key in found[start : start + 500]:
                    pipe.delete(key)
                deleted += sum(int(n) for n in pipe.execute())
        return deleted

    def fast_forward(self, limit: int = FORWARD_LIMIT) -> int:
        """Make the queue's delayed jobs due now (at most ``limit`` per shard): a delay,
        a retry's backoff, a durable sleep (its wake time recorded as passed, so the
        run goes on past it). A job waiting for a durable event stays parked. Returns
        how many jobs were made due; the next claim promotes them."""
        _check(limit)
        e = self._engine
        moved = 0
        with unavailable_as_error():
            for shard in e._shards:
                k = shard.keys
                # (not those made due already, at 0: a paused queue leaves them there)
                found = e._client.zrangebyscore(k.delayed, "(0", "+inf", start=0, num=limit)
                tags = [t.decode() if isinstance(t, bytes) else str(t) for t in found]
                if not tags:
                    continue
                parked = Durable(e).parked_many(tags)
                due = [t for t in tags if t not in parked or parked[t].kind == "sleep"]
                pipe = e._client.pipeline(transaction=False)
                for tag in due:
                    park = parked.get(tag)
                    if park is not None:  # the sleep has passed: its run goes on past it
                        pipe.hset(k.steps(tag), "z:" + park.name, "0")
                    pipe.zadd(k.delayed, {tag: 0}, xx=True)
                pipe.execute()
                moved += len(due)
        return moved


def _check(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit must be a positive int, got {limit!r}")
