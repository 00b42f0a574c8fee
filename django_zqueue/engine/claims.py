"""The engine's claiming verbs (``engine.claims``): lease jobs now, and wait for new
ones. :mod:`django_zqueue.queue.consume` validates the input and loops
(``subscribe``); it holds no client and knows no shard.

Its own small object: a claim spreads over several script calls of one shard (one per
``claim_chunk`` jobs, all in one round trip) and a wait blocks on the notify lists, both
uses of the shards and the client that the calls of :mod:`.consume` (built, not sent)
leave to their caller; neither is control of jobs (``engine.control``) nor a read
(``engine.reads``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .consume import Consume, min_hint
from .records import Claimed, Message
from .redis.connection import unavailable_as_error, wait_any

if TYPE_CHECKING:
    from .flow import Flow

__all__ = ["Claims"]


class Claims:
    """The claiming verbs of one queue's engine. Connection errors become
    ``QueueUnavailable``."""

    __slots__ = ("_consume", "_engine")

    def __init__(self, engine: Flow) -> None:
        self._engine = engine
        self._consume = Consume(engine)

    def claim(self, batch: int, consumer: str) -> tuple[list[Message], float | None]:
        """Lease up to ``batch`` jobs now (see ``Queue.claim``): the messages and, when
        none, the hint. More than ``claim_chunk`` jobs: one script call per chunk on the
        start shard, all in one round trip, then the other shards while not full."""
        e = self._engine
        plan = self._consume.plan_claim(batch, consumer)
        chunk = e.claim_chunk
        if batch <= chunk:
            return self._consume.claim_rest(plan, e.run(plan.call))
        shard = e._shards[plan.start]
        sizes = [min(chunk, batch - i) for i in range(0, batch, chunk)]
        b = e.batch()
        pending = [b.add(plan.call)] + [b.add(shard.claim(n, consumer)) for n in sizes[1:]]
        e.send(b)
        got = [p.result() for p in pending]
        first = Claimed([m for c in got for m in c.messages], min_hint(got))
        return self._consume.claim_rest(plan, first)

    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds`` (cut to ``max_block``, at least 1 ms) on the queue's
        notify lists; True when woken."""
        e = self._engine
        seconds = min(seconds, e.max_block)
        with unavailable_as_error():
            return wait_any(e._client, e._notify_groups, max(seconds, 0.001), e.wait_turn)
