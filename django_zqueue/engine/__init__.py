"""The engine of a queue: everything between a :class:`~django_zqueue.queue.Queue` and
Redis.

One :class:`Engine` per queue (``queue.engine``) owns the Redis client, the queue's
shards (:class:`~.shard.Shard`: one hash tag each, the typed call builder of each
script), the loaded scripts (:class:`~django_zqueue.engine.scripts.Scripts`) and the queue's
:class:`~django_zqueue.engine.scripts.Policy`; it sends calls alone or pipelined (:meth:`run`,
:meth:`run_all`, :meth:`batch`, :meth:`send`), checks the partition layout, builds the
calls of a claim and of each end of a delivery for callers that batch them (a worker,
the asyncio client), dispatches workflow ends, and answers the few Redis reads and
writes the layers above need, with typed results (:mod:`.ops`). The layers above the
queue core (tasks, worker, scanner, admin, commands) ask the ``Queue`` or its engine and
hold no Redis client of their own.

The parts: :mod:`.base` (client, shards, sending), :mod:`.layout` (the partition
layout), :mod:`.consume` (claims, acks, nacks, touches as calls), :mod:`.flow`
(workflows), :mod:`.ops` (reads and writes for the layers above), :mod:`.shard`.
"""

from __future__ import annotations

from typing import Any

from .base import (
    CLAIM_CHUNK,
    FAIR_CLAIM_CHUNK,
    MAX_BLOCK,
    NOTIFY_CAP,
    PROMOTE_LIMIT,
    score_mode,
)
from .consume import ACK_CHUNK, MAX_RESULT_TTL_MS, NO_RESULT, AckReply, ClaimPlan, min_hint
from .durable import Durable
from .flow import CASCADE_ROUNDS, PUBLISH_CHUNK, RESOLVE_CHUNK, use_resolver
from .ops import Ops, Wakeups
from .reads import Reads
from .shard import Shard
from .workflows import Workflows

__all__ = [
    "ACK_CHUNK",
    "CASCADE_ROUNDS",
    "CLAIM_CHUNK",
    "FAIR_CLAIM_CHUNK",
    "MAX_BLOCK",
    "MAX_RESULT_TTL_MS",
    "NOTIFY_CAP",
    "NO_RESULT",
    "PROMOTE_LIMIT",
    "PUBLISH_CHUNK",
    "RESOLVE_CHUNK",
    "AckReply",
    "ClaimPlan",
    "Durable",
    "Engine",
    "Reads",
    "Shard",
    "Wakeups",
    "Workflows",
    "min_hint",
    "score_mode",
    "use_resolver",
]


class Engine(Ops):
    """The engine of one queue (see the module's docstring); ``queue.engine``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: the read verbs (:class:`~.reads.Reads`)
        self.reads = Reads(self)
        #: the durable-task verbs (:class:`~.durable.Durable`)
        self.durable = Durable(self)
        #: the workflow verbs (:class:`~.workflows.Workflows`)
        self.workflows = Workflows(self)
