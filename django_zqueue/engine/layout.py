"""The engine's check of a queue's partition layout, and the removal of all its keys
(``engine.layout``)."""

from __future__ import annotations

import time

from .. import conf
from ..exceptions import PartitionMismatch
from .base import Core
from .keys import layout_key, partition_keys
from .redis.connection import unavailable_as_error


class Layout:
    """The partition layout recorded in Redis, checked against the queue's option
    (``engine.layout``); whether it was checked is the core's ``layout_checked``."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def check(self) -> None:
        """Refuse a change of ``partitions`` while the queue holds jobs.

        A partitioned queue records its number of partitions in ``{p:q}:partitions`` at
        first use (``SET NX``); it checks this once per engine, at its first publish or
        claim (a worker checks every queue at start). Raises :class:`PartitionMismatch`,
        writing nothing, when the unpartitioned keys still hold jobs, or when the
        recorded number differs and the partitions of that layout still hold jobs; once
        they are drained the new number is recorded. :meth:`clear` removes the record.
        One or two round trips (more on a change). Only the check is atomic per read: a
        process still running with the old setting can write between the check and its
        own next check."""
        e = self._engine
        layout = layout_key(e.prefix, e.name)
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            pipe.get(layout)
            k = e._keys
            for key in (k.ready, k.delayed, k.leased, k.dead):
                pipe.exists(key)
            replies = pipe.execute()
            if e.partitions > 1 and any(int(r) for r in replies[-4:]):
                raise PartitionMismatch(e.name, 1, e.partitions)
            if e.partitions > 1 and replies[0] is None:
                # first use: record the layout (SET NX GET: a concurrent first use wins)
                replies[0] = e._client.set(layout, e.partitions, nx=True, get=True)
                replies[0] = replies[0] if replies[0] is not None else e.partitions
        recorded = int(replies[0]) if replies[0] is not None else None
        if recorded is not None and recorded != e.partitions:
            if not 1 < recorded <= conf.MAX_PARTITIONS or self._holds_jobs(recorded):
                raise PartitionMismatch(e.name, recorded, e.partitions)
            with unavailable_as_error():  # the old layout is drained: take the new one
                if e.partitions > 1:
                    e._client.set(layout, e.partitions)
                else:
                    e._client.delete(layout)
        e.layout_checked = True

    def _holds_jobs(self, partitions: int) -> bool:
        """Whether any partition of the ``partitions`` layout holds a job (one pipeline)."""
        e = self._engine
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            for k in partition_keys(e.prefix, e.name, partitions):
                for key in (k.ready, k.delayed, k.leased, k.dead):
                    pipe.exists(key)
            return any(int(r) for r in pipe.execute())

    def ensure(self) -> None:
        """:meth:`check`, once per engine."""
        if not self._engine.layout_checked:
            self.check()

    def clear(self) -> None:
        """Delete every key of the queue (all jobs, records and counters) and its layout
        record; not atomic with concurrent publishers."""
        e = self._engine
        with unavailable_as_error():
            for k in {e._keys, *e._part_keys}:  # one DEL per hash tag (one slot each)
                e._client.delete(*k.all())
            e._client.delete(*e._keys.recent_task_stats(time.time()))
            if e.partitions > 1:
                e._client.delete(layout_key(e.prefix, e.name))
        e.layout_checked = e.partitions == 1
