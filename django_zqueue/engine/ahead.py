"""How many ready jobs of a partitioned queue's other shards are ahead of a score: the
tie rule of a rank across shards, shared by every reader of ranks (the queue's ``rank``,
the read side, the position watch, the asyncio client)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redis.client import Pipeline

    from .shard import Shard


def queue_ahead(pipe: Pipeline, shards: Sequence[Shard], score: float, index: int) -> int:
    """``ZCOUNT`` in each shard but ``index`` of the ready jobs ahead of ``score`` in shard
    ``index`` (equal scores count in lower-numbered shards); returns how many commands
    were queued (0 on one shard), to be summed by :func:`ahead_of`."""
    bound = f"{score:.17g}"
    n = 0
    for s in shards:
        if s.index != index:
            pipe.zcount(s.keys.ready, "-inf", bound if s.index < index else "(" + bound)
            n += 1
    return n


def ahead_of(replies: Iterator[Any], n: int) -> int:
    """The sum of the next ``n`` replies (those :func:`queue_ahead` queued)."""
    return sum(int(next(replies)) for _ in range(n))
