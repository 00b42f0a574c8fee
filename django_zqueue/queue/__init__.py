"""The queue core: every state change of a job is one atomic Lua script call.

A job lives in exactly one of four sorted sets, or nowhere once finished::

    publish ──► ready ◄─────────────── delayed (run-at on Redis TIME)
                  │ claim (lease)          ▲ nack with a delay
                  ▼                        │
               leased ──► ack: gone ───────┘
                  │ nack / lease expired, attempts spent
                  ▼
                 dead  (bounded by count and age)

``ready`` is ordered exactly by claim order, so ``rank(tag)`` (ZRANK) is the number of
jobs that will be claimed before it.

:class:`Queue` validates input (:mod:`.validate`) and asks its engine
(``queue.engine``, :class:`~django_zqueue.engine.Engine`), which owns the client, routes
each job to its shard (one hash tag, one Redis Cluster slot) and sends the shard's script
calls (:mod:`.scripts`). Its reads of many jobs and counters live in :mod:`.read`
(``queue.read``).

The parts, each a module of this package: :mod:`.base` (name, options, engine),
:mod:`.publish` (new jobs), :mod:`.once` (debounce, unique-for), :mod:`.consume` (leases
and their ends), :mod:`.control` (operator actions), :mod:`.flow` (workflows),
:mod:`.lookup` (one job's rank, state and record), :mod:`.core` (the :class:`Queue` that
puts them together, removal, housekeeping), :mod:`.aio` (the asyncio client).
"""

from __future__ import annotations

from .. import conf
from ..engine import (
    CLAIM_CHUNK,
    FAIR_CLAIM_CHUNK,
    MAX_BLOCK,
    NOTIFY_CAP,
    PROMOTE_LIMIT,
    PUBLISH_CHUNK,
    Engine,
    use_resolver,
)
from ..engine.records import JobInfo, Message, NewJob, ScanResult, encode_body, new_tag
from ..engine.records.validate import MAX_TAG_BYTES
from ..exceptions import UnknownQueue
from ..read import MAX_MERGED, SERIES, live_thread_count, minute_rows
from .consume import MAX_BATCH, NO_RESULT, AckReply, ClaimPlan
from .control import CANCELLED_TTL, CancelledJob, CancelResult
from .core import Queue
from .flow import passed_ends, publish_flow

__all__ = [
    "CANCELLED_TTL",
    "CLAIM_CHUNK",
    "FAIR_CLAIM_CHUNK",
    "MAX_BATCH",
    "MAX_BLOCK",
    "MAX_MERGED",
    "MAX_TAG_BYTES",
    "NOTIFY_CAP",
    "NO_RESULT",
    "PROMOTE_LIMIT",
    "PUBLISH_CHUNK",
    "SERIES",
    "AckReply",
    "CancelResult",
    "CancelledJob",
    "ClaimPlan",
    "Engine",
    "JobInfo",
    "Message",
    "NewJob",
    "Queue",
    "ScanResult",
    "command_queue",
    "encode_body",
    "get_queue",
    "live_thread_count",
    "minute_rows",
    "new_tag",
    "passed_ends",
    "publish_flow",
]


_queues: dict[str, Queue] = {}


def get_queue(name: str = "default") -> Queue:
    """The configured queue ``name`` (cached until ``settings.ZQUEUE`` changes)."""
    config = conf.get_config()  # (cached; drops the queues when the test environment flips)
    q = _queues.get(name)
    if q is None:
        if name not in config.queues:
            raise UnknownQueue(name, list(config.queues))
        # no client given: the engine takes the shared client of the current settings
        q = _queues[name] = Queue(name, config.queues[name], prefix=config.prefix)
    return q


conf.on_reset(_queues.clear)
use_resolver(lambda name: get_queue(name).engine)


def command_queue(name: str) -> Queue:
    """The configured queue ``name`` for a management command: an unknown name is a
    ``CommandError`` (a clear message, no traceback)."""
    from django.core.management.base import CommandError

    try:
        return get_queue(name)
    except UnknownQueue as exc:
        raise CommandError(str(exc)) from exc
