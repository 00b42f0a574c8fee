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

from collections.abc import Mapping, Sequence
from typing import Any

import redis

from .. import conf
from .base import (
    CLAIM_CHUNK,
    FAIR_CLAIM_CHUNK,
    MAX_BLOCK,
    NOTIFY_CAP,
    PROMOTE_LIMIT,
    Core,
    score_mode,
)
from .consume import ACK_CHUNK, MAX_RESULT_TTL_MS, NO_RESULT, AckReply, ClaimPlan, min_hint
from .flow import CASCADE_ROUNDS, PUBLISH_CHUNK, RESOLVE_CHUNK, Flow, use_resolver
from .positions import Positions
from .protocol import WireProtocol
from .reads import Reads
from .records import JobInfo
from .results import Results
from .scripts import Batch, LoadedProtocol, Pending, ProtocolLoad, Standing
from .shard import Shard
from .stats import Stats
from .workers import Wakeups, Workers

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
    "Engine",
    "Positions",
    "Reads",
    "Results",
    "Shard",
    "Stats",
    "Wakeups",
    "WireProtocol",
    "Workers",
    "min_hint",
    "score_mode",
    "use_resolver",
]


class Engine(Flow):
    """The engine of one queue (see the module's docstring); ``queue.engine``."""

    def __init__(
        self,
        name: str,
        options: conf.QueueOptions | None = None,
        *,
        prefix: str = "zq",
        client: redis.Redis | None = None,
    ) -> None:
        super().__init__(name, options, prefix=prefix, client=client)
        #: the read verbs (:class:`~.reads.Reads`)
        self.reads = Reads(self)
        #: a worker's wake-ups and registration (:class:`~.workers.Workers`)
        self.workers = Workers(self)
        #: the queue set up for producers in other languages (:class:`~.protocol.WireProtocol`)
        self.protocol = WireProtocol(self)
        #: kept results and cancel records (:class:`~.results.Results`)
        self.results = Results(self)
        #: the stats hash and per-task statistics (:class:`~.stats.Stats`)
        self.stats = Stats(self)
        #: where jobs stand, and the jobs overdue (:class:`~.positions.Positions`)
        self.positions = Positions(self)

    # ------------------------------------------------------------ forwarders
    # The names callers used before the engine was split by capability: each forwards to
    # its capability object. Callers should move to the capability object
    # (``engine.workers.register(...)`` for ``engine.register_worker(...)``).

    def wakeups(self, engines: Sequence[Core]) -> Wakeups:
        return self.workers.wakeups(engines)

    def wrong_types(self, engines: Sequence[Core]) -> list[str]:
        return self.workers.wrong_types(engines)

    def register_worker(
        self, engines: Sequence[Core], worker: str, entry: str
    ) -> list[dict[Any, Any]]:
        return self.workers.register(engines, worker, entry)

    def forget_workers(self, entries: Sequence[tuple[Core, Any]]) -> None:
        return self.workers.forget(entries)

    def workers_key(self) -> str:
        return self.workers.key()

    def protocol_policy(self) -> dict[str, str]:
        return self.protocol.policy()

    def publish_protocol(self) -> ProtocolLoad:
        return self.protocol.publish()

    def restore_protocol(self) -> None:
        return self.protocol.restore()

    def proto_key(self) -> str:
        return self.protocol.key()

    def protocol_loaded(self) -> LoadedProtocol | None:
        return self.protocol.loaded()

    def protocol_stored(self) -> dict[str, str]:
        return self.protocol.stored()

    def result_raw(self, tag: str) -> Any:
        return self.results.raw(tag)

    def store_result(self, tag: str, value: str, ttl_ms: int) -> None:
        return self.results.store(tag, value, ttl_ms)

    def were_cancelled(self, tags: Sequence[str]) -> set[str]:
        return self.results.were_cancelled(tags)

    def incr_stat(self, counter: str, n: int) -> None:
        return self.stats.incr(counter, n)

    def add_task_stats(
        self, batch: Batch, slot: int, counts: Mapping[str, int], keep_seconds: int
    ) -> None:
        return self.stats.add_task_stats(batch, slot, counts, keep_seconds)

    def ready_standing(self, tag: str) -> tuple[int | None, float | None]:
        return self.positions.ready_standing(tag)

    def ahead_elsewhere(self, standings: Sequence[Standing]) -> list[int]:
        return self.positions.ahead_elsewhere(standings)

    def add_positions(
        self, batch: Batch, tags: Sequence[str], most: int
    ) -> tuple[list[Pending[list[Standing]]], list[list[str]]]:
        return self.positions.add_positions(batch, tags, most)

    def add_job_read(self, batch: Batch, tag: str) -> tuple[Pending[JobInfo | None], int]:
        return self.positions.add_job_read(batch, tag)

    def overdue(self, slack_ms: int) -> dict[str, tuple[int, float]]:
        return self.positions.overdue(slack_ms)

    def server_ms(self) -> int:
        return self.positions.server_ms()
