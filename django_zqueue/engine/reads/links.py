"""Reads of a workflow job's links (``wf:<id>``): the whole hash, its counts, and the
state of each linked job (:mod:`django_zqueue.read.links` shapes them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis.client import Pipeline

from ..records.links import COUNT_FIELDS, PROGRESS_FIELDS, Links, Ref, link_counts
from ..redis.connection import unavailable_as_error
from .pipeline import Hash, Replies, take

if TYPE_CHECKING:
    from ..base import EngineBase
    from ..flow import Flow

#: the sets a job may be in, and the state each means (a workflow adds ``waiting``)
LINK_STATES = ("ready", "delayed", "leased", "dead", "waiting")


def links_hash(e: EngineBase, tag: str) -> Hash:
    """Job ``tag``'s links hash as stored ({}: none): one ``HGETALL``."""
    with unavailable_as_error():
        found: Hash = e._client.hgetall(e._keys_for(tag).wf(tag))
    return found


def progress_fields(e: EngineBase, tag: str) -> list[Any]:
    """``need``, ``got`` and ``opt`` of job ``tag``'s links, as stored: one ``HMGET``,
    O(1) whatever the number of parents."""
    with unavailable_as_error():
        found: list[Any] = e._client.hmget(e._keys_for(tag).wf(tag), PROGRESS_FIELDS)
    return found


def link_states(e: Flow, refs: Sequence[Ref]) -> list[str | None]:
    """The state of each job of ``refs`` (one of :data:`LINK_STATES`; None: in none of
    them, i.e. finished or deleted): one round trip, ``ZSCORE`` in the five sets of each
    job's shard (in its own queue, which must be of this engine's Redis)."""
    if not refs:
        return []
    with unavailable_as_error():
        pipe = e._client.pipeline(transaction=False)
        for ref in refs:
            k = e._keys_of(ref.queue, ref.tag)
            for key in (k.ready, k.delayed, k.leased, k.dead, k.wait):
                pipe.zscore(key, ref.tag)
        replies = pipe.execute()
    out: list[str | None] = []
    for i in range(len(refs)):
        found = replies[5 * i : 5 * i + 5]
        out.append(
            next((s for s, v in zip(LINK_STATES, found, strict=True) if v is not None), None)
        )
    return out


def queue_link_counts(pipe: Pipeline, keys: Sequence[str]) -> None:
    """``HMGET <key> need got`` of each ``wf:<id>`` key (read back by
    :func:`link_counts_of`): O(1) each, whatever the number of parents."""
    for key in keys:
        pipe.hmget(key, COUNT_FIELDS)


def link_counts_of(replies: Replies, n: int) -> list[Links | None]:
    """The need and got of ``n`` jobs (parents and dependents left empty), from the
    replies of :func:`queue_link_counts`; None for a job without links."""
    return [link_counts(reply) for reply in take(replies, n)]
