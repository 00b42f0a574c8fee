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
- ``engine.durable`` (:class:`~.durable.Durable`): durable steps' records, parking and
  signals;
- ``engine.flow_publish`` (:class:`~.flow_publish.FlowPublish`): the publishing of
  workflows (a waiting job, a step over several queues, the checks before it);
- ``engine.order`` (:class:`~.order.Ordering`): strict order per key: the blocked keys and
  unblocking one;
- ``engine.joblogs`` (:class:`~.joblogs.JobLogs`): the lines a job says while it runs;
- ``engine.jobstreams`` (:class:`~.jobstreams.JobStreams`): the chunks a job streams;
- ``engine.chunkcalls`` (:class:`~.chunkcalls.ChunkCalls`): the jobs of one chunk
  task's handler call;
- ``engine.workers`` (:class:`~.workers.Workers`): a worker's wake-ups, registration and orders;
- ``engine.protocol`` (:class:`~.protocol.WireProtocol`): the queue set up for producers
  in other languages;
- ``engine.results`` (:class:`~.results.Results`), ``engine.stats``
  (:class:`~.stats.Stats`), ``engine.positions`` (:class:`~.positions.Positions`): what
  the backend, the outbox, the watch and the doctor read and write.

The layers above the queue core (tasks, worker, scanner, admin, commands) ask the
``Queue`` or its engine and hold no Redis client of their own.
"""

from __future__ import annotations

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
from .chunkcalls import ChunkCalls
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
from .flow import (
    CASCADE_ROUNDS,
    PUBLISH_CHUNK,
    RESOLVE_CHUNK,
    Workflows,
    cut_calls,
    use_resolver,
)
from .flow_publish import FlowPublish
from .joblogs import JobLogs
from .jobstreams import JobStreams
from .layout import Layout
from .order import Ordering
from .positions import Positions
from .protocol import WireProtocol
from .reads import Reads
from .results import Results
from .sandbox import Sandbox
from .sets import Sets
from .shard import Shard
from .stats import Stats
from .workers import ORDERS as WORKER_ORDERS
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
    "WORKER_ORDERS",
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
    "Sandbox",
    "Sets",
    "Shard",
    "Stats",
    "Wakeups",
    "WireProtocol",
    "Workers",
    "Workflows",
    "Writes",
    "cut_calls",
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
        #: strict order per key: blocked keys, unblock (:class:`~.order.Ordering`)
        self.order = Ordering(self)
        #: the lines a job says while it runs (:class:`~.joblogs.JobLogs`)
        self.joblogs = JobLogs(self)
        #: which jobs one chunk task's handler call ran (:class:`~.chunkcalls.ChunkCalls`)
        self.chunkcalls = ChunkCalls(self)
        #: the chunks a job streams to its reader (:class:`~.jobstreams.JobStreams`)
        self.jobstreams = JobStreams(self)
        #: test-only verbs: a prefix wiped, delayed jobs made due (:class:`~.sandbox.Sandbox`)
        self.sandbox = Sandbox(self)
