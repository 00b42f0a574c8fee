"""The Redis reads and writes the layers above the queue core need, each with a typed
result, so that no module above holds a Redis client or builds a key name: the worker's
wake-ups and registration, the key-type check behind an error line, the watch's and the
Django Tasks backend's reads, the outbox's counter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis.exceptions import ResponseError

from ..events import kv, log
from ..exceptions import ProtocolError, QueueUnavailable
from .ahead import ahead_of, queue_ahead
from .base import EngineBase
from .flow import Flow
from .keys import wrong_types
from .records import JobInfo, text
from .redis.connection import (
    is_cluster,
    server_time_ms,
    slot_groups,
    unavailable_as_error,
    wait_any,
)
from .scripts import (
    Batch,
    LoadedProtocol,
    Pending,
    ProtocolLoad,
    Standing,
    load_protocol,
    loaded_protocol,
)
from .scripts.calls import on_library_lost
from .scripts.source import PROTOCOL_VERSION


class Wakeups:
    """The notify lists of several queues of one Redis, grouped by cluster slot: what a
    worker's idle threads block on (``BLPOP``)."""

    __slots__ = ("client", "groups", "turn")

    def __init__(self, client: Any, keys: list[str]) -> None:
        self.client = client
        #: the lists, grouped by cluster slot (one group off a cluster)
        self.groups: list[list[str]] = slot_groups(client, keys)
        self.turn = [0]  # which group a wait blocks on next (connection.wait_any)

    @property
    def pipelined(self) -> bool:
        """Whether one ``BLPOP`` of every list can lead a pipeline (one group, no
        cluster): a woken thread's claim then goes right behind it."""
        return len(self.groups) == 1 and not is_cluster(self.client)

    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds`` for a wake-up token on any list; True if one came
        (:func:`~django_zqueue.engine.redis.connection.wait_any`)."""
        return wait_any(self.client, self.groups, seconds, self.turn)


class Ops(Flow):
    """Reads and writes for the worker, the scanner, the tasks and the commands."""

    # ----------------------------------------------------------------- several queues

    def wakeups(self, engines: Sequence[EngineBase]) -> Wakeups:
        """The notify lists of ``engines`` (queues of this engine's Redis)."""
        return Wakeups(self.client, [key for e in engines for key in e.notify_keys])

    def wrong_types(self, engines: Sequence[EngineBase]) -> list[str]:
        """The fixed keys of ``engines`` whose type is wrong, as ``key (found, not
        expected)`` (one round trip; [] when they cannot be read)."""
        return wrong_types(self.client, [k for e in engines for k in e.part_keys])

    def register_worker(
        self, engines: Sequence[EngineBase], worker: str, entry: str
    ) -> list[dict[Any, Any]]:
        """Write ``worker``'s entry in the workers hash of each of ``engines`` and read
        each hash back (one round trip); ``QueueUnavailable`` when it fails."""
        pipe = self.client.pipeline(transaction=False)
        for e in engines:
            pipe.hset(e.keys.workers, worker, entry)
            pipe.hgetall(e.keys.workers)
        # the proto hashes this process wrote (publish_protocol): one gone means a server
        # that lost its data, maybe with its scripts' library loaded again by another
        # process before this one's calls found it missing (on_library_lost)
        set_up = [e for e in engines if isinstance(e, Ops) and e.proto_written]
        for e in set_up:
            pipe.exists(e.keys.proto)
        try:
            replies = pipe.execute()
        except Exception as exc:
            raise QueueUnavailable(str(exc)) from exc
        hashes = replies[: 2 * len(engines)]
        for e, present in zip(set_up, replies[2 * len(engines) :], strict=True):
            if not present:
                try:
                    e.restore_protocol()
                except Exception as exc:  # the next registration tries again
                    log.warning(kv(event="restore_failed", what=e.keys.proto, error=str(exc)))
        return list(hashes[1::2])

    def forget_workers(self, entries: Sequence[tuple[EngineBase, Any]]) -> None:
        """Delete the workers-hash entries ``(engine, worker id)`` (one round trip, none
        when there are none); ``QueueUnavailable`` when it fails."""
        pipe = self.client.pipeline(transaction=False)
        for e, worker in entries:
            pipe.hdel(e.keys.workers, worker)
        try:
            pipe.execute()
        except Exception as exc:
            raise QueueUnavailable(str(exc)) from exc

    # ----------------------------------------------------------------- the wire protocol

    def protocol_policy(self) -> dict[str, str]:
        """The queue's policy as producers in other languages read it (its proto hash,
        docs/protocol.md)."""
        p = self.policy
        return {
            "v": str(PROTOCOL_VERSION),
            "mode": p.mode,
            "aging_us": str(p.aging_us),
            "notify_cap": str(p.notify_cap),
            "max_length": str(p.max_length),
            "group_max_length": str(p.group_max_length),
            "layout": "compact" if p.compact else "json",
            "partitions": str(self.partitions),
            "max_payload_bytes": str(self.options.max_payload_bytes),
            "max_retries": str(self.options.max_retries),
        }

    def publish_protocol(self) -> ProtocolLoad:
        """Set the queue up for producers in other languages (docs/protocol.md): load the
        protocol library (:func:`~django_zqueue.engine.scripts.load_protocol`) and write the
        queue's policy to its proto hash (one HSET). While this engine lives, a script
        call of this process that finds the scripts' library lost (a server restarted
        without persistence) puts both back (:meth:`restore_protocol`)."""
        with unavailable_as_error():
            try:
                loaded = load_protocol(self.client)
            except ResponseError as exc:  # no Redis Functions (Redis < 7), no permission
                raise ProtocolError(f"the protocol library was not loaded: {exc}") from exc
            fields = [x for pair in self.protocol_policy().items() for x in pair]
            self.client.hset(self.keys.proto, items=fields)
        self.proto_written = tuple(fields)
        on_library_lost(self.client, self.keys.proto, self.restore_protocol)
        return loaded

    def restore_protocol(self) -> None:
        """Load the protocol library again (as :func:`~django_zqueue.engine.scripts.load_protocol`
        does: a newer release's is kept) and write back the proto hash
        :meth:`publish_protocol` wrote; nothing when it wrote none."""
        if not self.proto_written:
            return
        load_protocol(self.client)
        self.client.hset(self.keys.proto, items=list(self.proto_written))
        log.info(kv(event="protocol_restored", queue=self.name, key=self.keys.proto))

    def proto_key(self) -> str:
        """The name of the queue's proto hash (for the command's output)."""
        return self.keys.proto

    def protocol_loaded(self) -> LoadedProtocol | None:
        """The protocol library this queue's Redis holds (None: none)."""
        with unavailable_as_error():
            return loaded_protocol(self.client)

    def protocol_stored(self) -> dict[str, str]:
        """The queue's proto hash as stored ({}: not set up)."""
        with unavailable_as_error():
            raw = self.client.hgetall(self.keys.proto)
        return {text(k): text(v) for k, v in raw.items()}

    def workers_key(self) -> str:
        """The name of the queue's workers hash (for a log line)."""
        return self.keys.workers

    # ----------------------------------------------------------------- one queue

    def incr_stat(self, counter: str, n: int) -> None:
        """Add ``n`` to ``counter`` in the queue's stats hash (of its first shard)."""
        self.client.hincrby(self.shards[0].keys.stats, counter, n)

    def result_raw(self, tag: str) -> Any:
        """The raw value of job ``tag``'s result key (None: none kept)."""
        return self.client.get(self.keys_for(tag).result(tag))

    def store_result(self, tag: str, value: str, ttl_ms: int) -> None:
        """Set job ``tag``'s result key to ``value``, expiring in ``ttl_ms``."""
        self.client.set(self.keys_for(tag).result(tag), value, px=ttl_ms)

    def ready_standing(self, tag: str) -> tuple[int | None, float | None]:
        """(rank in its shard, score) of job ``tag`` in ``ready``, in one round trip;
        (None, None) unless it is ready."""
        ready = self.keys_for(tag).ready
        pipe = self.client.pipeline(transaction=False)
        pipe.zrank(ready, tag)
        pipe.zscore(ready, tag)
        rank, score = pipe.execute()
        return (None if rank is None else int(rank), None if score is None else float(score))

    def were_cancelled(self, tags: Sequence[str]) -> set[str]:
        """Which of ``tags`` have a cancel record kept (one round trip, none when empty)."""
        if not tags:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for tag in tags:
            pipe.exists(self.keys_for(tag).cancelled(tag))
        return {tag for tag, found in zip(tags, pipe.execute(), strict=True) if found}

    def ahead_elsewhere(self, standings: Sequence[Standing]) -> list[int]:
        """For each ready job of ``standings`` (each with a score), the jobs of the other
        shards ahead of it (one round trip; zeros on an unpartitioned queue)."""
        if len(self.shards) == 1 or not standings:
            return [0] * len(standings)
        pipe = self.client.pipeline(transaction=False)
        counts = [
            queue_ahead(pipe, self.shards, s.score or 0.0, self.shard_for(s.tag).index)
            for s in standings
        ]
        replies = iter(pipe.execute())
        return [ahead_of(replies, n) for n in counts]

    def add_positions(
        self, batch: Batch, tags: Sequence[str], most: int
    ) -> tuple[list[Pending[list[Standing]]], list[list[str]]]:
        """Add to ``batch`` the reads of where ``tags`` stand: one ``positions`` call per
        shard and ``most`` jobs, then per shard the progress of its jobs (one ``HMGET``),
        then per shard its ``acked`` and ``run_ms`` counters, then the workers hash. The
        pending replies of the ``positions`` calls and the tags of each shard, in the
        order of the ``HMGET``s (the batch's raw replies after the calls')."""
        by_shard: dict[int, list[str]] = {}
        for tag in tags:
            by_shard.setdefault(self.shard_for(tag).index, []).append(tag)
        pending = [
            batch.add(self.shards[i].positions(chunk[n : n + most]))
            for i, chunk in by_shard.items()
            for n in range(0, len(chunk), most)
        ]
        for i, chunk in by_shard.items():
            batch.command("hmget", self.shards[i].keys.progress, chunk)
        for s in self.shards:
            batch.command("hmget", s.keys.stats, ["acked", "run_ms"])
        batch.command("hgetall", self.keys.workers)
        return pending, list(by_shard.values())

    def add_job_read(self, batch: Batch, tag: str) -> tuple[Pending[JobInfo | None], int]:
        """Add to ``batch`` the info call of job ``tag`` (with its body) and a ``GET`` of its
        result key: the info's pending reply and the index of the ``GET``'s raw reply."""
        shard = self.shard_for(tag)  # the job's partition (the queue's own if one)
        return batch.add(shard.info(tag, True)), batch.command("get", shard.keys.result(tag))

    def add_task_stats(
        self, batch: Batch, slot: int, counts: Mapping[str, int], keep_seconds: int
    ) -> None:
        """Add to ``batch`` an ``HINCRBY`` of each of ``counts`` in the per-task statistics
        of 5-minute slot ``slot``, and one ``EXPIRE`` of ``keep_seconds``."""
        key = self.keys.task_stats(slot)
        for field, n in counts.items():
            batch.command("hincrby", key, field, n)
        batch.command("expire", key, keep_seconds)

    def overdue(self, slack_ms: int) -> dict[str, tuple[int, float]]:
        """For ``"delayed"`` and ``"leased"``: how many of the queue's jobs are due (a delay
        ended, a lease expired) for longer than ``slack_ms``, and for how long (ms) the
        oldest, on Redis' clock."""
        with unavailable_as_error():
            now = server_time_ms(self.client, self.keys.ready)
            late: dict[str, tuple[int, float]] = {}
            for kind in ("delayed", "leased"):
                pipe = self.client.pipeline(transaction=False)
                for k in self.part_keys:
                    key = getattr(k, kind)
                    pipe.zcount(key, "-inf", now - slack_ms)
                    pipe.zrange(key, 0, 0, withscores=True)
                replies = pipe.execute()
                count = sum(int(c) for c in replies[0::2])
                oldest = min((r[0][1] for r in replies[1::2] if r), default=now)
                late[kind] = (count, now - oldest)
        return late

    def server_ms(self) -> int:
        """Redis ``TIME`` in ms on the queue's node."""
        with unavailable_as_error():
            return server_time_ms(self.client, self.keys.ready)
