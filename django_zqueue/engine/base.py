"""The core of :class:`~django_zqueue.engine.Engine`: its client, shards, script builders
and policy, and how a script call is sent (alone, or pipelined in a batch). Built in
small named steps: :func:`check_options`, :func:`policy_of`, :func:`shards_of`."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis

from .. import conf
from ..exceptions import ConfigurationError, InvalidArgument
from .keys import QueueKeys, partition_keys, partition_of, queue_keys
from .records import Message
from .redis.connection import get_client, slot_groups, socket_timeout, unavailable_as_error
from .scripts import Batch, Call, Policy, ScoreMode, Scripts
from .shard import Shard

T = TypeVar("T")

#: the notify list never holds more wake-up tokens than this
NOTIFY_CAP = 64
#: due delayed jobs promoted by one claim call
PROMOTE_LIMIT = 100
#: longest single blocking wait; a wait is also cut to a share of the socket timeout
MAX_BLOCK = 5.0
#: at most this many jobs per claim script call (a bigger claim sends several, pipelined)
CLAIM_CHUNK = 100
#: the same in a fair queue, whose claim does more per job (groups, limits): a call of 40
#: stays under 5 ms of Redis time with 100,000 groups and limits on (docs/fairness.md)
FAIR_CLAIM_CHUNK = 40


def score_mode(o: conf.QueueOptions) -> ScoreMode:
    """How the queue's ready scores are made: ``fair`` with ``fairness="groups"``;
    partitions in strict mode share one clock-based sequence (``tstrict``) so scores
    compare across them."""
    if o.fairness == "groups":
        return "fair"
    return "tstrict" if o.partitions > 1 and o.priority_mode == "strict" else o.priority_mode


#: how an engine finds the engine of another queue of the same Redis by name
#: (``django_zqueue.queue`` sets it from its ``get_queue``): workflows link jobs of
#: several queues
RESOLVER: list[Callable[[str], Core]] = []


def use_resolver(resolve: Callable[[str], Core]) -> None:
    """How an engine finds another queue's engine by name."""
    RESOLVER[:] = [resolve]


def check_options(name: str, o: conf.QueueOptions) -> None:
    """Refuse options an engine cannot run: ``partitions`` out of range, or combined
    with what needs one partition (``concurrency``, ``qps``, ``group_max_length``)."""
    n = o.partitions
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= conf.MAX_PARTITIONS:
        raise InvalidArgument(f"partitions must be an int in [1, {conf.MAX_PARTITIONS}]")
    if n > 1 and (o.concurrency or o.qps):
        raise InvalidArgument("concurrency and qps cannot be combined with partitions > 1")
    if o.group_max_length is not None and (o.fairness != "groups" or n > 1):
        raise ConfigurationError(
            f"queue {name!r}: group_max_length needs fairness='groups' and partitions = 1; "
            "set fairness='groups', or use max_length for the whole queue"
        )


def policy_of(o: conf.QueueOptions) -> Policy:
    """A queue's options as its scripts take them (of checked options)."""
    n = o.partitions
    return Policy(
        mode=score_mode(o),
        aging_us=int(o.priority_aging_seconds * 1_000_000),
        visibility_ms=o.visibility_timeout_ms,
        concurrency=o.concurrency or 0,
        qps=o.qps or 0,
        dead_max=o.dead_letter_max,
        dead_ttl_ms=int(o.dead_letter_ttl * 1000),
        trim_limit=o.scan_batch,
        notify_cap=NOTIFY_CAP,
        ack_notify=NOTIFY_CAP if o.concurrency else 0,
        promote_limit=PROMOTE_LIMIT,
        group_concurrency=o.group_concurrency or 0,
        group_qps=o.group_qps or 0,
        # on a partitioned queue each partition holds its share
        max_length=-(-(o.max_length or 0) // n),
        group_max_length=o.group_max_length or 0,
        compact=conf.get_config().compact_records,
        # on a partitioned queue each partition keeps its share
        keep_finished=-(-o.keep_finished // n),
        finished_ttl_ms=int(o.finished_ttl * 1000),
    )


def shards_of(name: str, prefix: str, policy: Policy, partitions: int) -> list[Shard]:
    """One shard per hash tag of queue ``name``."""
    keys = partition_keys(prefix, name, partitions)
    return [Shard(name, i, k, policy) for i, k in enumerate(keys)]


def max_block_of(client: redis.Redis) -> float:
    """The longest one blocking wait may take: ``MAX_BLOCK``, cut to a share of the
    client's socket timeout."""
    timeout = socket_timeout(client)
    return MAX_BLOCK if timeout is None else max(0.01, min(MAX_BLOCK, timeout * 0.8))


class Core:
    """The core of an engine (see :class:`~django_zqueue.engine.Engine`): the client, the
    shards, the scripts, the policy and the sending of calls. The capability objects
    (``engine.layout``, ``engine.consume``, ``engine.flow``, ...) each hold it."""

    def __init__(
        self,
        name: str,
        options: conf.QueueOptions | None = None,
        *,
        prefix: str = "zq",
        client: redis.Redis | None = None,
    ) -> None:
        self.name = name
        self.options = o = options or conf.QueueOptions()
        self.prefix = prefix
        #: the queue's own hash tag: its jobs when unpartitioned; always its workers hash
        self._keys: QueueKeys = queue_keys(prefix, name)
        check_options(name, o)
        #: number of partitions (hash tags) the queue's jobs are spread over
        self.partitions: int = o.partitions
        self._client: redis.Redis = client if client is not None else get_client()
        self._scripts = Scripts(self._client, functions=conf.get_config().lua_functions)
        #: the queue's options as its scripts take them
        self.policy = policy_of(o)
        #: most jobs one claim script call leases (CLAIM_CHUNK, FAIR_CLAIM_CHUNK)
        self.claim_chunk = FAIR_CLAIM_CHUNK if o.fairness == "groups" else CLAIM_CHUNK
        #: one shard per hash tag; ``shards[0].keys`` is ``keys`` when unpartitioned
        self._shards = shards_of(name, prefix, self.policy, self.partitions)
        #: the keys of the queue's periodic schedules (shard 0, with the cron jobs)
        self._sched_keys: QueueKeys = self._shards[0].keys
        self._rr = secrets.randbelow(self.partitions)  # round-robin start of the next claim
        #: whether the partition layout was checked (``engine.layout`` sets it)
        self.layout_checked = self.partitions == 1
        #: the proto hash's fields ``engine.protocol.publish`` wrote (() : none yet)
        self.proto_written: tuple[str, ...] = ()
        self._set_up_waits()

    def _set_up_waits(self) -> None:
        """The notify lists a waiting consumer blocks on, and for how long at most."""
        #: the notify lists a waiting consumer blocks on
        self._notify_keys: list[str] = [s.keys.notify for s in self._shards]
        # BLPOP names keys of one slot only on a Redis Cluster (see connection.wait_any)
        self._notify_groups = slot_groups(self._client, self._notify_keys)
        self.wait_turn = [0]
        #: the longest one blocking wait may take (a share of the socket timeout)
        self.max_block = max_block_of(self._client)

    @property
    def tag(self) -> str:
        """The queue's own hash tag (``{prefix:name}``), as its repr shows it."""
        return self._keys.tag

    def __repr__(self) -> str:
        return f"<Engine {self.name!r} keys={self._keys.tag} partitions={self.partitions}>"

    def lease_ms(self, msg: Message) -> int:
        """The lease length of a delivery: the job's own, else the queue's."""
        return msg.visibility_timeout_ms or self.policy.visibility_ms

    # ----------------------------------------------------------------- shards

    def _shard_for(self, tag: str) -> Shard:
        """The shard that holds job ``tag`` (:func:`keys.partition_of`)."""
        if self.partitions == 1:
            return self._shards[0]
        return self._shards[partition_of(tag, self.partitions)]

    def _front_of_others(self, shard: Shard) -> float | None:
        """The lowest ready score of the partitions other than ``shard`` (one round trip),
        for a job sent to the front of the whole queue; None on one partition, or when
        the others are empty."""
        if self.partitions == 1:
            return None
        with unavailable_as_error():
            pipe = self._client.pipeline(transaction=False)
            for s in self._shards:
                if s is not shard:
                    pipe.zrange(s.keys.ready, 0, 0, withscores=True)
            heads = [float(r[0][1]) for r in pipe.execute() if r]
        return min(heads) if heads else None

    def _keys_for(self, tag: str) -> QueueKeys:
        """The keys of the shard that holds job ``tag``."""
        return self._shard_for(tag).keys

    def other(self, name: str) -> Core:
        """The engine of this queue, or of another configured queue of the same Redis."""
        if name == self.name:
            return self
        if not RESOLVER:
            raise InvalidArgument(f"queue {name!r} is not known here")
        return RESOLVER[0](name)

    def _keys_of(self, queue: str, tag: str) -> QueueKeys:
        """The keys of the shard holding job ``tag`` of queue ``queue``."""
        return self.other(queue)._keys_for(tag)

    @property
    def _part_keys(self) -> list[QueueKeys]:
        """The keys of each shard; ``[self._keys]`` for an unpartitioned queue."""
        return [s.keys for s in self._shards]

    def _next_shard(self) -> int:
        """The shard the next claim starts at; advances round-robin."""
        start = self._rr
        self._rr = (start + 1) % self.partitions
        return start

    # ----------------------------------------------------------------- sending calls

    def batch(self) -> Batch:
        """Calls to send in one round trip (:meth:`send`)."""
        return self._scripts.batch()

    def send(self, batch: Batch) -> list[Any]:
        """Send a batch; connection errors become ``QueueUnavailable``. Each call's result
        is read from the ``Pending`` its ``add`` returned."""
        with unavailable_as_error():
            return batch.send()

    def run_all(self, calls: Sequence[Call[T]]) -> list[T]:
        """Send calls in one round trip (one call: a plain EVALSHA, no pipeline); their
        results in order. The first failed call raises, once all were sent."""
        if len(calls) == 1:
            return [self.run(calls[0])]
        batch = self.batch()
        pending = [batch.add(call) for call in calls]
        self.send(batch)
        return [p.result() for p in pending]

    def run(self, call: Call[T]) -> T:
        """Send one script call; connection errors become ``QueueUnavailable``."""
        with unavailable_as_error():
            return self._scripts.run(call)


#: the old name of :class:`Core`, for the type hints that still use it
EngineBase = Core
