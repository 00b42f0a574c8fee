"""The engine's check of a queue's partition layout, and the removal of all its keys."""

from __future__ import annotations

import time

from .. import conf
from ..exceptions import PartitionMismatch
from .base import EngineBase
from .keys import layout_key, partition_keys
from .redis.connection import unavailable_as_error


class Layout(EngineBase):
    """The partition layout recorded in Redis, checked against the queue's option."""

    def check_layout(self) -> None:
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
        layout = layout_key(self.prefix, self.name)
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            pipe.get(layout)
            k = self.keys
            for key in (k.ready, k.delayed, k.leased, k.dead):
                pipe.exists(key)
            replies = pipe.execute()
            if self.partitions > 1 and any(int(r) for r in replies[-4:]):
                raise PartitionMismatch(self.name, 1, self.partitions)
            if self.partitions > 1 and replies[0] is None:
                # first use: record the layout (SET NX GET: a concurrent first use wins)
                replies[0] = self.client.set(layout, self.partitions, nx=True, get=True)
                replies[0] = replies[0] if replies[0] is not None else self.partitions
        recorded = int(replies[0]) if replies[0] is not None else None
        if recorded is not None and recorded != self.partitions:
            if not 1 < recorded <= conf.MAX_PARTITIONS or self._holds_jobs(recorded):
                raise PartitionMismatch(self.name, recorded, self.partitions)
            with unavailable_as_error():  # the old layout is drained: take the new one
                if self.partitions > 1:
                    self.client.set(layout, self.partitions)
                else:
                    self.client.delete(layout)
        self.layout_checked = True

    def _holds_jobs(self, partitions: int) -> bool:
        """Whether any partition of the ``partitions`` layout holds a job (one pipeline)."""
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            for k in partition_keys(self.prefix, self.name, partitions):
                for key in (k.ready, k.delayed, k.leased, k.dead):
                    pipe.exists(key)
            return any(int(r) for r in pipe.execute())

    def ensure_layout(self) -> None:
        """:meth:`check_layout`, once per engine."""
        if not self.layout_checked:
            self.check_layout()

    def clear(self) -> None:
        """Delete every key of the queue (all jobs, records and counters) and its layout
        record; not atomic with concurrent publishers."""
        with unavailable_as_error():
            for k in {self.keys, *self.part_keys}:  # one DEL per hash tag (one slot each)
                self.client.delete(*k.all())
            self.client.delete(*self.keys.recent_task_stats(time.time()))
            if self.partitions > 1:
                self.client.delete(layout_key(self.prefix, self.name))
        self.layout_checked = self.partitions == 1
