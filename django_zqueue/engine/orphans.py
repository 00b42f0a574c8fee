"""The dependents of a workflow job whose own list of them (``kids`` in its ``wf:<id>``
hash) no longer decodes: found from the other side, in the links of the jobs waiting in
each configured queue (each names its parents in ``par``), so that the parent's end still
reaches them (docs/workflows.md, "A bad entry holds up no other").

This reads every waiting job's links, in bounded steps (``SCAN_STEP`` jobs a round
trip, at most ``SCAN_MOST`` in all); it runs only for an entry whose list is corrupt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from ..events import kv, log
from .records.links import Kid
from .redis.connection import unavailable_as_error

#: waiting jobs whose links one round trip reads, and most read for one parent
SCAN_STEP = 500
SCAN_MOST = 200_000


class Waiting(Protocol):
    """What is read of a queue: its name, client and shards' keys."""

    @property
    def name(self) -> str: ...
    @property
    def _client(self) -> Any: ...
    @property
    def _shards(self) -> Sequence[Any]: ...


def dependents_of(parent_queue: str, parent: str, queues: Sequence[Waiting]) -> list[Kid]:
    """The jobs of ``queues`` waiting with ``(parent_queue, parent)`` among their parents,
    each with that parent's place."""
    found: list[Kid] = []
    seen = 0
    for q in queues:
        for shard in q._shards:
            k = shard.keys
            cursor = 0
            while seen < SCAN_MOST:
                with unavailable_as_error():
                    cursor, members = q._client.zscan(k.wait, cursor, count=SCAN_STEP)
                    tags = [m.decode("utf-8") if isinstance(m, bytes) else m for m, _ in members]
                    pipe = q._client.pipeline(transaction=False)
                    for tag in tags:
                        pipe.hget(k.wf(tag), "par")
                    pars = pipe.execute() if tags else []
                seen += len(tags)
                for tag, raw in zip(tags, pars, strict=True):
                    place = _place(raw, parent_queue, parent)
                    if place:
                        found.append(Kid(q.name, tag, place))
                if int(cursor) == 0:
                    break
    log.warning(
        kv(
            event="workflow_links_corrupt",
            queue=parent_queue,
            job=parent,
            dependents_found=len(found),
            waiting_read=seen,
            fix="its list of dependents did not decode: they were found from their own links",
        )
    )
    return found


def _place(raw: bytes | str | None, queue: str, tag: str) -> int:
    """The 1-based place of ``(queue, tag)`` among a job's parents (0: not one)."""
    try:
        parents = json.loads(raw) if raw else []
    except ValueError:
        return 0
    if not isinstance(parents, list):
        return 0
    for i, ref in enumerate(parents, 1):
        if isinstance(ref, list) and len(ref) == 2 and ref[0] == queue and ref[1] == tag:
            return i
    return 0
