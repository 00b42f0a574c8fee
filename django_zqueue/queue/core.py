"""The queue: :class:`Queue` puts its parts together (publishing, consuming, looking up)
and adds removal and housekeeping (the Redis side: ``engine.control``)."""

from __future__ import annotations

from ..engine.records import ScanResult, validate
from ..exceptions import InvalidArgument
from .bulk import Bulk
from .consume import Consuming
from .durable_calls import Durable
from .lookup import Lookup


class Queue(Bulk, Consuming, Lookup, Durable):
    """A named queue in Redis. Every method is one round trip unless it says otherwise.

    Jobs are identified by a *tag*: given by the caller (and then unique among the
    queue's live and dead jobs, which gives deduplication) or generated.

    Methods that change state run one Lua script each, atomically. Methods raise
    :class:`~django_zqueue.exceptions.QueueUnavailable` when Redis cannot be reached,
    and an ``InvalidArgument`` (a ``ValueError``) or ``TypeError`` for bad input, in
    which case nothing was written.
    """

    # ----------------------------------------------------------------- removal

    def delete(self, tag: str) -> bool:
        """Remove a ready, delayed, waiting (for its parents) or dead job with its record;
        a workflow job's dependents are told at once (its end is a failure for them; one
        more round trip).

        Returns False when there is no such job, or when it is in flight (a consumer
        holds its lease; it is left alone).
        """
        return self.engine.control.delete(validate.tag(tag))

    def requeue_dead(self, tag: str, *, front: bool = False) -> bool:
        """Put a dead job back in line with its attempts reset. False if it isn't dead.

        By default it goes to the back of its priority's line, as a new job would;
        ``front=True`` ("retry now") puts it at the front of the whole queue: claimed
        next (rank 0; on a partitioned queue ahead of the heads of the other partitions
        as read just before, one more round trip).
        """
        return self.engine.control.requeue_dead(validate.tag(tag), front)

    def purge_dead(self) -> int:
        """Delete every dead letter, in bounded script calls. Returns how many."""
        return self.engine.control.purge_dead(self.options.scan_batch)

    # ----------------------------------------------------------------- housekeeping

    def scan(self, limit: int | None = None) -> ScanResult:
        """One bounded housekeeping step (at most ``limit`` jobs per kind per shard,
        default ``scan_batch``): promote due delayed jobs, recover expired leases, trim
        dead letters. ``more`` in the result says whether another step has work to do."""
        limit = self.options.scan_batch if limit is None else limit
        if not 1 <= limit <= 5000:
            raise InvalidArgument("limit must be in [1, 5000]")
        return self.engine.control.scan(limit)

    def clear(self) -> None:
        """Delete every key of this queue (all jobs, records and counters). For tests
        and operators; not atomic with concurrent publishers."""
        self.engine.layout.clear()
