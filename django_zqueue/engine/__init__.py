"""The engine of a queue: everything between a :class:`~django_zqueue.queue.Queue` and
Redis.

One :class:`Engine` per queue (``queue.engine``). Its core (:class:`~.base.Core`) owns the
Redis client, the queue's shards (:class:`~.shard.Shard`: one hash tag each, the typed
call builder of each script), the loaded scripts
(:class:`~django_zqueue.engine.scripts.Scripts`) and the queue's
:class:`~django_zqueue.engine.scripts.Policy`, and sends calls alone or pipelined
(:meth:`~.base.Core.run`, :meth:`~.base.Core.run_all`, :meth:`~.base.Core.batch`,
:meth:`~.base.Core.send`). Each capability is an object holding the core, in a module of
its own:

- ``engine.layout`` (:class:`~.layout.Layout`): the partition layout check, ``clear``;
- ``engine.consume`` (:class:`~.consume.Consume`): the calls of a claim and of each end
  of a delivery, for callers that batch them (a worker, the asyncio client);
- ``engine.flow`` (:class:`~.flow.Workflows`): workflow links, the dispatch of ends, the
  drain;
- ``engine.reads`` (:class:`~.reads.Reads`): the read verbs;
- ``engine.writes`` (:class:`~.writes.Writes`): new jobs (publish, publish_once);
- ``engine.sets`` (:class:`~.sets.Sets`): sets of prepared jobs planned into shared calls;
- ``engine.claims`` (:class:`~.claims.Claims`): the chunked claim and the wait for jobs;
- ``engine.control`` (:class:`~.control.Control`): operator actions on one job, the whole
  queue and the bulk actions;
- ``engine.workers`` (:class:`~.workers.Workers`): a worker's wake-ups and registration;
- ``engine.protocol`` (:class:`~.protocol.WireProtocol`): the queue set up for producers
  in other languages;
- ``engine.results`` (:class:`~.results.Results`), ``engine.stats``
  (:class:`~.stats.Stats`), ``engine.positions`` (:class:`~.positions.Positions`): what
  the backend, the outbox, the watch and the doctor read and write.

The layers above the queue core (tasks, worker, scanner, admin, commands) ask the
``Queue`` or its engine and hold no Redis client of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
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
from .claims import Claims
from .consume import (
    ACK_CHUNK,
    MAX_RESULT_TTL_MS,
    NO_RESULT,
    AckReply,
    ClaimPlan,
    Consume,
    min_hint,
)
from .control import Control
from .durable import Durable
from .flow import CASCADE_ROUNDS, PUBLISH_CHUNK, RESOLVE_CHUNK, Workflows, use_resolver
from .flow_publish import FlowPublish
from .layout import Layout
from .positions import Positions
from .protocol import WireProtocol
from .reads import Reads
from .records import Ack, Claimed, JobInfo, Message, NackResult
from .records.links import FlowJob, Kid, Ref
from .results import Results
from .scripts import Batch, Call, LoadedProtocol, Pending, ProtocolLoad, Sink, Standing
from .sets import Sets
from .shard import Shard
from .stats import Stats
from .workers import Wakeups, Workers
from .writes import Writes

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
    "Claims",
    "Consume",
    "Control",
    "Durable",
    "Engine",
    "FlowPublish",
    "Layout",
    "Positions",
    "Reads",
    "Results",
    "Sets",
    "Shard",
    "Stats",
    "Wakeups",
    "WireProtocol",
    "Workers",
    "Workflows",
    "Writes",
    "min_hint",
    "score_mode",
    "use_resolver",
]


class Engine(Core):
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
        # the capability objects, one line each, each holding the core
        #: the partition layout check and the removal of every key (:class:`~.layout.Layout`)
        self.layout = Layout(self)
        #: claims and the ends of a delivery as calls (:class:`~.consume.Consume`)
        self.consume = Consume(self)
        #: workflow links, the dispatch of ends and the drain (:class:`~.flow.Workflows`)
        self.flow = Workflows(self)
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
        #: the write verbs of new jobs (:class:`~.writes.Writes`)
        self.writes = Writes(self)
        #: the control verbs (:class:`~.control.Control`)
        self.control = Control(self)
        #: the publishing verbs of sets of prepared jobs (:class:`~.sets.Sets`)
        self.sets = Sets(self)
        #: the claiming verbs (:class:`~.claims.Claims`)
        self.claims = Claims(self)
        #: the durable-task verbs (:class:`~.durable.Durable`)
        self.durable = Durable(self)
        #: the publishing of workflows (:class:`~.flow_publish.FlowPublish`)
        self.flow_publish = FlowPublish(self)

    # ------------------------------------------------------------ forwarders
    # The names callers used before the engine was split by capability: each forwards to
    # its capability object. Callers should move to the capability object
    # (``engine.workers.register(...)`` for ``engine.register_worker(...)``).

    def check_layout(self) -> None:
        return self.layout.check()

    def ensure_layout(self) -> None:
        return self.layout.ensure()

    def clear(self) -> None:
        return self.layout.clear()

    def plan_claim(self, batch: int, consumer: str) -> ClaimPlan:
        return self.consume.plan_claim(batch, consumer)

    def claim_rest(self, plan: ClaimPlan, first: Claimed) -> tuple[list[Message], float | None]:
        return self.consume.claim_rest(plan, first)

    def make_ack(
        self,
        msg: Message,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        run_ms: int | None = None,
    ) -> Ack:
        return self.consume.make_ack(msg, result, result_ttl, run_ms)

    def ack_call(
        self,
        msg: Message,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        run_ms: int | None = None,
        passed: str = "",
    ) -> Call[bool]:
        return self.consume.ack_call(msg, result, result_ttl, run_ms, passed)

    def add_acks(self, batch: Sink, acks: Sequence[Ack]) -> list[AckReply]:
        return self.consume.add_acks(batch, acks)

    def settle_acks(self, replies: Sequence[AckReply]) -> None:
        return self.consume.settle_acks(replies)

    def release_call(self, msg: Message) -> Call[bool]:
        return self.consume.release_call(msg)

    def nack_call(
        self,
        msg: Message,
        error: str = "",
        retry_in: float | timedelta | None = None,
        *,
        dead: bool = False,
    ) -> Call[NackResult]:
        return self.consume.nack_call(msg, error, retry_in, dead=dead)

    def touch_call(
        self,
        msg: Message,
        extend: float | None = None,
        progress: float | None = None,
        note: str = "",
    ) -> Call[int | None]:
        return self.consume.touch_call(msg, extend, progress, note)

    def state_call(self, tag: str) -> Call[str | None]:
        return self.consume.state_call(tag)

    def info_call(self, tag: str, *, with_body: bool = True) -> Call[JobInfo | None]:
        return self.consume.info_call(tag, with_body=with_body)

    def link_parents(self, tag: str, parents: Sequence[Ref]) -> None:
        return self.flow.link_parents(tag, parents)

    def flow_calls(
        self, jobs: Sequence[FlowJob]
    ) -> list[tuple[Call[list[tuple[str, str]]], list[str]]]:
        return self.flow.flow_calls(jobs)

    def dispatch(self, tags: Sequence[str]) -> int:
        return self.flow.dispatch(tags)

    def settle_ends(self, tags: Sequence[str]) -> None:
        return self.flow.settle_ends(tags)

    def read_outbox(self, tags: Sequence[str]) -> list[tuple[str, bytes, list[Kid]]]:
        return self.flow.read_outbox(tags)

    def configured_engines(self) -> list[Core]:
        return self.flow.configured_engines()

    def dispatch_once(self, tags: Sequence[str]) -> tuple[int, list[Ref]]:
        return self.flow.dispatch_once(tags)

    def drain(self, limit: int = RESOLVE_CHUNK) -> int:
        return self.flow.drain(limit)

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
