"""Reads of one job by its tag: its rank in the whole queue, its ready score, its state
and its kept result (:mod:`django_zqueue.queue.lookup` asks them; its ``info`` is
:func:`.jobs.ranked_info`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...exceptions import CorruptResult
from ..ahead import ahead_of, queue_ahead
from ..redis.connection import unavailable_as_error

if TYPE_CHECKING:
    from ..base import EngineBase


def rank(e: EngineBase, tag: str) -> int | None:
    """Job ``tag``'s position in line (0: claimed next), None unless it is ready. One
    round trip on one shard; else two: its score and rank in its shard, then the jobs of
    the other shards ahead of it (the tie rule of :mod:`..ahead`)."""
    if e.partitions == 1:
        with unavailable_as_error():
            r: Any = e._client.zrank(e._keys.ready, tag)
        return None if r is None else int(r)
    shard = e._shard_for(tag)
    with unavailable_as_error():
        pipe = e._client.pipeline(transaction=False)
        pipe.zscore(shard.keys.ready, tag)
        pipe.zrank(shard.keys.ready, tag)
        score, own = pipe.execute()
        if score is None or own is None:
            return None
        pipe = e._client.pipeline(transaction=False)
        n = queue_ahead(pipe, e._shards, float(score), shard.index)
        return int(own) + ahead_of(iter(pipe.execute()), n)


def score(e: EngineBase, tag: str) -> float | None:
    """Job ``tag``'s ready score; None unless it is ready."""
    with unavailable_as_error():
        s = e._client.zscore(e._keys_for(tag).ready, tag)
    return None if s is None else float(s)


def state(e: EngineBase, tag: str) -> str | None:
    """Job ``tag``'s state (``state.lua``); None: no such job."""
    return e.run(e._shard_for(tag).state(tag))


def result(e: EngineBase, tag: str) -> Any:
    """The result kept for job ``tag``: ``LookupError`` when none is kept,
    :class:`CorruptResult` when it is not JSON."""
    key = e._keys_for(tag).result(tag)
    with unavailable_as_error():
        raw = e._client.get(key)
    if raw is None:
        raise LookupError(f"no result kept for job {tag!r} in queue {e.name!r}")
    return decode_result(raw, key)


def decode_result(raw: bytes | str, key: str) -> Any:
    """A kept result read from ``key``; :class:`CorruptResult` when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError as exc:  # (bad UTF-8 too)
        raise CorruptResult(
            f"the result at {key} is not JSON ({exc}): it cannot be read; delete the key "
            "(DEL) or let it expire"
        ) from exc
