"""A workflow job's links as the read side shows them: its parents and its dependents
(docs/workflows.md), each with its state, a page at a time (a chord's callback has up to
10,000 parents).

Two round trips: ``HGETALL`` of the job's links (``wf:<id>``), then ``ZSCORE`` in the
five sets of each listed job's shard (O(log N) each), for at most ``limit`` parents and
``limit`` dependents. A page of waiting jobs reads only how many parents each needs and
has seen succeed (read with the page's records). The reads are the engine's
(:class:`~django_zqueue.engine.reads.Reads`: ``links_hash``, ``link_states``,
``progress_fields``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engine.reads.links import LINK_STATES as LINK_STATES
from ..engine.records import text
from ..engine.records.links import Links, Ref, link_counts

if TYPE_CHECKING:
    from .source import Readable

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
    values = q.reads.progress_fields(tag)
    links = link_counts(values[:2])
    if links is None:
        return None
    return Progress(links.need, links.got, text(values[2] or b"") == "*")


def read_links(q: Readable, tag: str, offset: int = 0, limit: int = 50) -> JobLinks | None:
    """The links of job ``tag`` of ``q`` (None: it has none, or is gone)."""
    limit = max(1, min(limit, MAX_LINKED))
    offset = max(0, offset)
    raw = q.reads.links_hash(tag)
    links = Links.decode(raw)
    if links is None:
        return None
    parents = list(links.parents[offset : offset + limit])
    kids = [Ref(k.queue, k.tag) for k in links.kids[offset : offset + limit]]
    states = q.reads.link_states([*parents, *kids])
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
        any_end=text(raw.get(b"opt") or raw.get("opt") or b"") == "*",
    )
