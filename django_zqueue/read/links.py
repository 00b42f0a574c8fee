"""A workflow job's links as the read side shows them: its parents and its dependents
(docs/workflows.md), each with its state, a page at a time (a chord's callback has up to
10,000 parents).

Two round trips: ``HGETALL`` of the job's links (``wf:<id>``), then ``ZSCORE`` in the
five sets of each listed job's shard (O(log N) each), for at most ``limit`` parents and
``limit`` dependents. A page of waiting jobs reads only how many parents each needs and
has seen succeed (:func:`queue_link_counts`: ``HMGET wf:<id> need got``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from redis.client import Pipeline

from ..engine.records import text
from ..engine.records.links import COUNT_FIELDS, PROGRESS_FIELDS, Links, Ref, link_counts
from ..engine.redis.connection import unavailable_as_error
from .pipeline import Replies, take

if TYPE_CHECKING:
    from .source import Readable

#: the sets a job may be in, and the state each means (a workflow adds ``waiting``)
LINK_STATES = ("ready", "delayed", "leased", "dead", "waiting")
#: most parents (and most dependents) one read lists
MAX_LINKED = 500


@dataclass(frozen=True, slots=True)
class LinkedJob:
    """A parent or dependent: its queue, tag and state (None: no longer in its queue,
    i.e. finished, or deleted)."""

    queue: str
    tag: str
    state: str | None


@dataclass(frozen=True, slots=True)
class JobLinks:
    """One page of a job's parents and dependents, with their totals; ``need`` parents
    must succeed for it to run, ``got`` have."""

    tag: str
    parents: list[LinkedJob]
    children: list[LinkedJob]
    parent_count: int
    child_count: int
    need: int
    got: int
    any_end: bool = False  # every parent counts however it ends (a batch's on_complete)


@dataclass(frozen=True, slots=True)
class Progress:
    """How many parents a job waits for (``need``) and how many are in (``got``);
    ``any_end``: every parent counts however it ends (a batch's ``on_complete``)."""

    need: int
    got: int
    any_end: bool


def read_progress(q: Readable, tag: str) -> Progress | None:
    """The :class:`Progress` of job ``tag``: one ``HMGET``, O(1) whatever the number of
    parents. None when it has no links (gone, or acked)."""
    with unavailable_as_error():
        values = q.client.hmget(q.keys_for(tag).wf(tag), PROGRESS_FIELDS)
    links = link_counts(values[:2])
    if links is None:
        return None
    return Progress(links.need, links.got, text(values[2] or b"") == "*")


def read_links(q: Readable, tag: str, offset: int = 0, limit: int = 50) -> JobLinks | None:
    """The links of job ``tag`` of ``q`` (None: it has none, or is gone)."""
    limit = max(1, min(limit, MAX_LINKED))
    offset = max(0, offset)
    with unavailable_as_error():
        raw = q.client.hgetall(q.keys_for(tag).wf(tag))
    links = Links.decode(raw)
    if links is None:
        return None
    parents = list(links.parents[offset : offset + limit])
    kids = [Ref(k.queue, k.tag) for k in links.kids[offset : offset + limit]]
    states = _states(q, [*parents, *kids])
    return JobLinks(
        tag=tag,
        parents=[LinkedJob(r.queue, r.tag, s) for r, s in zip(parents, states, strict=False)],
        children=[
            LinkedJob(r.queue, r.tag, s) for r, s in zip(kids, states[len(parents) :], strict=True)
        ],
        parent_count=len(links.parents),
        child_count=len(links.kids),
        need=links.need,
        got=links.got,
        any_end=text(raw.get(b"opt", raw.get("opt", b""))) == "*",
    )


def _states(q: Readable, refs: Sequence[Ref]) -> list[str | None]:
    if not refs:
        return []
    with unavailable_as_error():
        pipe = q.client.pipeline(transaction=False)
        for ref in refs:
            k = q.keys_of(ref.queue, ref.tag)
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
