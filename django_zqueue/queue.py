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

:class:`Queue` validates input (:mod:`.validate`), routes each job to its shard
(:mod:`.shard`: one hash tag, one Redis Cluster slot) and sends the shard's script calls
(:mod:`.scripts`). Its reads of many jobs and counters live in :mod:`.read`
(``queue.read``).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

import redis

from . import conf, validate
from .connection import get_client, slot_groups, socket_timeout, unavailable_as_error, wait_any
from .exceptions import (
    DuplicateJob,
    InvalidArgument,
    PartitionMismatch,
    PayloadTooLarge,
    UnknownQueue,
)
from .keys import QueueKeys, layout_key, partition_keys, partition_of, queue_keys
from .read import MAX_MERGED, SERIES, QueueReader, live_thread_count, minute_rows
from .records import (
    Claimed,
    JobInfo,
    Message,
    NackResult,
    NewJob,
    ScanResult,
    encode_body,
    from_ms,
    new_tag,
)
from .scripts import Batch, Call, Policy, Scripts
from .shard import Shard
from .validate import MAX_TAG_BYTES

__all__ = [
    "CLAIM_CHUNK",
    "MAX_BATCH",
    "MAX_MERGED",
    "MAX_TAG_BYTES",
    "NOTIFY_CAP",
    "NO_RESULT",
    "SERIES",
    "ClaimPlan",
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
]

T = TypeVar("T")

#: at most this many jobs per publish script call, so one call stays short
PUBLISH_CHUNK = 100
#: most jobs one claim may lease
MAX_BATCH = 1000
#: at most this many jobs per claim script call (a bigger claim sends several, pipelined)
CLAIM_CHUNK = 100
#: the notify list never holds more wake-up tokens than this
NOTIFY_CAP = 64
#: due delayed jobs promoted by one claim call
PROMOTE_LIMIT = 100
#: longest single blocking wait; a wait is also cut to a share of the socket timeout
MAX_BLOCK = 5.0
#: "no result to keep" for :meth:`Queue.ack`
NO_RESULT: Any = object()


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """The first call of a claim (on shard ``start``), for a caller that sends it in a
    batch of its own; :meth:`Queue.claim_rest` finishes the claim from its result."""

    start: int
    batch: int
    consumer: str
    call: Call[Claimed]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _hint(claimed: Sequence[Claimed]) -> float | None:
    known = [c.hint_ms for c in claimed if c.hint_ms >= 0]
    return min(known) / 1000 if known else None


class Queue:
    """A named queue in Redis. Every method is one round trip unless it says otherwise.

    Jobs are identified by a *tag*: given by the caller (and then unique among the
    queue's live and dead jobs, which gives deduplication) or generated.

    Methods that change state run one Lua script each, atomically. Methods raise
    :class:`~django_zqueue.exceptions.QueueUnavailable` when Redis cannot be reached,
    and an ``InvalidArgument`` (a ``ValueError``) or ``TypeError`` for bad input, in
    which case nothing was written.
    """

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
        self.keys: QueueKeys = queue_keys(prefix, name)
        n = o.partitions
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= conf.MAX_PARTITIONS:
            raise InvalidArgument(f"partitions must be an int in [1, {conf.MAX_PARTITIONS}]")
        if n > 1 and (o.concurrency or o.qps):
            raise InvalidArgument("concurrency and qps cannot be combined with partitions > 1")
        #: number of partitions (hash tags) the queue's jobs are spread over
        self.partitions = n
        self.client: redis.Redis = client if client is not None else get_client()
        self.scripts = Scripts(self.client)
        #: the queue's options as its scripts take them; partitions share one clock-based
        #: sequence ('tstrict') so scores compare across them
        self.policy = Policy(
            mode="tstrict" if n > 1 and o.priority_mode == "strict" else o.priority_mode,
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
        )
        #: one shard per hash tag; ``shards[0].keys`` is ``keys`` when unpartitioned
        self.shards = [
            Shard(name, i, k, self.scripts, self.policy)
            for i, k in enumerate(partition_keys(prefix, name, n))
        ]
        #: the keys of the queue's periodic schedules (shard 0, with the cron jobs)
        self.sched_keys: QueueKeys = self.shards[0].keys
        #: the notify lists a waiting consumer blocks on
        self.notify_keys: list[str] = [s.keys.notify for s in self.shards]
        #: reads of many jobs and of the counters (:class:`~.read.QueueReader`)
        self.read = QueueReader(self)
        self._rr = secrets.randbelow(n)  # round-robin start shard of the next claim
        self._layout_ok = n == 1
        # BLPOP names keys of one slot only on a Redis Cluster (see connection.wait_any)
        self._notify_groups = slot_groups(self.client, self.notify_keys)
        self._wait_turn = [0]
        timeout = socket_timeout(self.client)
        #: the longest one blocking wait may take (a share of the socket timeout)
        self.max_block = MAX_BLOCK if timeout is None else max(0.01, min(MAX_BLOCK, timeout * 0.8))

    def __repr__(self) -> str:
        if self.partitions > 1:
            return f"<Queue {self.name!r} keys={self.keys.tag} partitions={self.partitions}>"
        return f"<Queue {self.name!r} keys={self.keys.tag}>"

    @property
    def visibility_timeout_ms(self) -> int:
        """The queue's lease length (a job may have its own)."""
        return self.policy.visibility_ms

    def lease_ms(self, msg: Message) -> int:
        """The lease length of a delivery: the job's own, else the queue's."""
        return msg.visibility_timeout_ms or self.policy.visibility_ms

    # ----------------------------------------------------------------- shards

    def shard_for(self, tag: str) -> Shard:
        """The shard that holds job ``tag`` (:func:`keys.partition_of`)."""
        return self.shards[partition_of(tag, self.partitions)]

    def keys_for(self, tag: str) -> QueueKeys:
        """The keys of the shard that holds job ``tag``."""
        return self.shard_for(tag).keys

    @property
    def part_keys(self) -> list[QueueKeys]:
        """The keys of each shard; ``[self.keys]`` for an unpartitioned queue."""
        return [s.keys for s in self.shards]

    def batch(self) -> Batch:
        """Calls to send in one round trip (:meth:`send`)."""
        return self.scripts.batch()

    def send(self, batch: Batch) -> list[Any]:
        """Send a batch; connection errors become ``QueueUnavailable``. Each call's result
        is read from the ``Pending`` its ``add`` returned."""
        with unavailable_as_error():
            return batch.send()

    def _run(self, call: Call[T]) -> T:
        with unavailable_as_error():
            return self.scripts.run(call)

    def check_layout(self) -> None:
        """Refuse a change of ``partitions`` while the queue holds jobs.

        A partitioned queue records its number of partitions in ``{p:q}:partitions`` at
        first use (``SET NX``); it checks this once per :class:`Queue` object, at its
        first publish or claim (a worker checks every queue at start). Raises
        :class:`PartitionMismatch`, writing nothing, when the unpartitioned keys still
        hold jobs, or when the recorded number differs and the partitions of that
        layout still hold jobs; once they are drained the new number is recorded.
        ``clear()`` removes the record. One or two round trips (more on a change).
        Only the check is atomic per read: a process still running with the old
        setting can write between the check and its own next check."""
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
        self._layout_ok = True

    def _holds_jobs(self, partitions: int) -> bool:
        """Whether any partition of the ``partitions`` layout holds a job (one pipeline)."""
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            for k in partition_keys(self.prefix, self.name, partitions):
                for key in (k.ready, k.delayed, k.leased, k.dead):
                    pipe.exists(key)
            return any(int(r) for r in pipe.execute())

    def _layout(self) -> None:
        if not self._layout_ok:
            self.check_layout()

    # ----------------------------------------------------------------- publishing

    def prepare(
        self,
        body: Any,
        tag: str | None = None,
        priority: int = 0,
        score: float | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        *,
        max_retries: int | None = None,
        visibility_timeout: float | None = None,
    ) -> NewJob:
        """Validate and encode one job without sending it (see :meth:`publish_prepared`).

        Raises exactly what :meth:`publish` raises for bad input; touches no Redis."""
        data = encode_body(body)
        if len(data) > self.options.max_payload_bytes:
            raise PayloadTooLarge(len(data), self.options.max_payload_bytes)
        retries = self.options.max_retries if max_retries is None else max_retries
        try:
            retries = validate.max_retries(retries)
        except InvalidArgument:
            raise InvalidArgument(f"max_retries must be an int >= 0, got {max_retries!r}") from None
        vt = (
            None
            if visibility_timeout is None
            else validate.visibility_timeout_ms(visibility_timeout)
        )
        delay_ms, run_at_ms = validate.when(delay, run_at)
        return NewJob(
            tag=validate.tag(tag) if tag is not None else new_tag(),
            body=data,
            priority=validate.priority(priority),
            score=None if score is None else validate.score(score),
            delay_ms=delay_ms,
            run_at_ms=run_at_ms,
            max_retries=retries,
            visibility_timeout_ms=vt,
        )

    def publish(
        self,
        body: Any,
        tag: str | None = None,
        priority: int = 0,
        score: float | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        *,
        max_retries: int | None = None,
        visibility_timeout: float | None = None,
    ) -> str:
        """Add one job; return its tag.

        ``body`` is any JSON-serialisable value. ``priority`` (an int in [-1000, 1000],
        higher first) orders the line, FIFO within a priority by a server-side
        sequence. ``score`` places the job at that raw ready score instead (lower is
        claimed sooner; see docs/architecture.md for how scores are made). ``delay``
        (seconds or timedelta) or ``run_at`` (aware datetime) holds the job back until
        then, measured on Redis' clock; a delay <= 0 or a past run-at means now.
        ``max_retries`` and ``visibility_timeout`` override the queue's options.

        Raises :class:`DuplicateJob` (nothing overwritten) when ``tag`` belongs to a
        ready, delayed, in-flight or dead job of this queue.
        """
        job = self.prepare(
            body,
            tag,
            priority,
            score,
            delay,
            run_at,
            max_retries=max_retries,
            visibility_timeout=visibility_timeout,
        )
        return self.publish_prepared([job])[0]

    def publish_many(
        self,
        bodies: Iterable[Any],
        priority: int = 0,
        delay: float | timedelta | None = None,
        *,
        tags: Iterable[str] | None = None,
        run_at: datetime | None = None,
        max_retries: int | None = None,
    ) -> list[str]:
        """Add many jobs in one round trip; return their tags in order.

        Every body is validated and encoded before anything is sent. Calls of up to
        100 jobs (of one partition) are all-or-nothing. A longer call is sent as chunks
        of 100 in one pipeline after its tags are checked for clashes, so a
        :class:`DuplicateJob` writes nothing unless another client published a clashing
        tag in the meantime (the exception's ``published`` then lists what was written).
        """
        tag_list = list(tags) if tags is not None else None
        body_list = list(bodies)
        if tag_list is not None and len(tag_list) != len(body_list):
            raise InvalidArgument(
                f"got {len(body_list)} bodies but {len(tag_list)} tags; give one tag per body"
            )
        jobs = [
            self.prepare(
                b,
                tag_list[i] if tag_list else None,
                priority,
                None,
                delay,
                run_at,
                max_retries=max_retries,
            )
            for i, b in enumerate(body_list)
        ]
        return self.publish_prepared(jobs)

    def publish_prepared(self, jobs: Sequence[NewJob]) -> list[str]:
        """Send jobs made by :meth:`prepare`: one script call per shard and per 100 jobs,
        all in one round trip. A call that spans several script calls is checked for
        clashes first."""
        if not jobs:
            return []
        self._layout()
        tags = [j.tag for j in jobs]
        groups: dict[int, list[NewJob]] = {}
        for job in jobs:
            groups.setdefault(partition_of(job.tag, self.partitions), []).append(job)
        calls = [
            self.shards[p].publish(group[i : i + PUBLISH_CHUNK])
            for p, group in sorted(groups.items())
            for i in range(0, len(group), PUBLISH_CHUNK)
        ]
        if len(calls) == 1:
            clashes = self._run(calls[0])
            if clashes:
                raise DuplicateJob([t for t, _ in clashes], [s for _, s in clashes])
            return tags
        self._precheck_tags(tags)
        batch = self.batch()
        pending = [batch.add(call) for call in calls]
        self.send(batch)
        return self._published(calls, [p.result() for p in pending], tags)

    @staticmethod
    def _published(
        calls: Sequence[Call[Any]], replies: Sequence[list[tuple[str, str]]], tags: list[str]
    ) -> list[str]:
        """``tags``, once every chunk's publish reply says written; else DuplicateJob with
        the clashes and the tags that the other chunks did write."""
        published: set[str] = set()
        clashes: list[tuple[str, str]] = []
        for call, found in zip(calls, replies, strict=True):
            if not found:  # ARGV: mode, aging, cap, n, then 8 slots per job, tag first
                published.update(str(call.args[i]) for i in range(4, len(call.args), 8))
            clashes.extend(found)
        if clashes:
            raise DuplicateJob(
                [t for t, _ in clashes],
                [s for _, s in clashes],
                [t for t in tags if t in published],
            )
        return tags

    def _precheck_tags(self, tags: list[str]) -> None:
        seen: set[str] = set()
        dupes = [t for t in tags if t in seen or seen.add(t)]  # type: ignore[func-returns-value]
        if dupes:
            raise DuplicateJob(dupes, ["batch"] * len(dupes))
        by_shard: dict[int, list[str]] = {}
        for t in tags:
            by_shard.setdefault(partition_of(t, self.partitions), []).append(t)
        chunks = [
            (self.shards[p].keys, ts[i : i + PUBLISH_CHUNK])
            for p, ts in by_shard.items()
            for i in range(0, len(ts), PUBLISH_CHUNK)
        ]
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            for k, ts in chunks:
                pipe.hmget(k.meta, ts)
            found = pipe.execute()
        taken = [
            t
            for (_, ts), vs in zip(chunks, found, strict=True)
            for t, v in zip(ts, vs, strict=True)
            if v is not None
        ]
        if taken:
            raise DuplicateJob(taken, [self.state(t) or "unknown" for t in taken])

    # ----------------------------------------------------------------- consuming

    def claim(self, batch: int = 1, consumer: str = "") -> tuple[list[Message], float | None]:
        """Lease up to ``batch`` jobs now, without waiting.

        Returns the messages and, when none could be claimed, a hint: seconds until a
        delayed job is due or the rate limit admits a start (``None``: nothing known,
        wait for new work). Due delayed jobs are promoted first; the queue's global
        ``concurrency`` and ``qps`` limits are enforced inside the script. A partitioned
        queue is claimed round-robin: from the next partition on, while the batch is not
        full.
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise InvalidArgument(f"batch must be an int in [1, {MAX_BATCH}], got {batch!r}")
        plan = self.plan_claim(batch, consumer)
        if batch <= CLAIM_CHUNK:
            return self.claim_rest(plan, self._run(plan.call))
        # one short script call per chunk on the start shard, all in one round trip
        shard = self.shards[plan.start]
        sizes = [min(CLAIM_CHUNK, batch - i) for i in range(0, batch, CLAIM_CHUNK)]
        b = self.batch()
        pending = [b.add(plan.call)] + [b.add(shard.claim(n, consumer)) for n in sizes[1:]]
        self.send(b)
        got = [p.result() for p in pending]
        first = Claimed([m for c in got for m in c.messages], _min_hint(got))
        return self.claim_rest(plan, first)

    def plan_claim(self, batch: int, consumer: str) -> ClaimPlan:
        """The first call of a claim of ``batch`` jobs (at most ``CLAIM_CHUNK`` in it), on
        the next shard round-robin, for the caller to send (in a batch of its own)."""
        self._layout()
        start = self._rr
        self._rr = (start + 1) % self.partitions
        call = self.shards[start].claim(min(batch, CLAIM_CHUNK), consumer)
        return ClaimPlan(start, batch, consumer, call)

    def claim_rest(self, plan: ClaimPlan, first: Claimed) -> tuple[list[Message], float | None]:
        """Finish a claim from its first call's result: on a partitioned queue go on to the
        following shards while the batch is not full (one call each); then the messages,
        and the wait hint when there are none (see :meth:`claim`)."""
        msgs = list(first.messages)
        got = [first]
        for i in range(1, self.partitions):
            if len(msgs) >= plan.batch:
                break
            shard = self.shards[(plan.start + i) % self.partitions]
            more = self._run(shard.claim(min(CLAIM_CHUNK, plan.batch - len(msgs)), plan.consumer))
            msgs.extend(more.messages)
            got.append(more)
        return msgs, (None if msgs else _hint(got))

    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds`` for a wake-up from a publish, retry or ack.

        Returns True when woken. A wait is cut to a share of the socket timeout, so a
        long wait returns early (False) and the caller simply claims again.
        """
        if seconds <= 0:
            return False
        seconds = min(seconds, self.max_block)
        with unavailable_as_error():
            return wait_any(self.client, self._notify_groups, max(seconds, 0.001), self._wait_turn)

    def get(self, timeout: float = 0, consumer: str = "") -> Message | None:
        """Claim one job, waiting up to ``timeout`` seconds for one; None if none came."""
        for msg in self.subscribe(batch_size=1, timeout=timeout, consumer=consumer):
            return msg
        return None

    def subscribe(
        self, batch_size: int = 10, timeout: float | None = None, consumer: str = ""
    ) -> Iterator[Message]:
        """Yield claimed messages as they come, claiming ``batch_size`` at a time.

        Idle, it blocks on the queue's notify list (no polling) and wakes when a job
        is published, a delayed job falls due or, with a concurrency limit, a slot
        frees. Stops after ``timeout`` seconds without a message (None: never).
        Every yielded message is leased: ack or nack it before its lease runs out.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            msgs, hint = self.claim(batch_size, consumer)
            if msgs:
                yield from msgs
                if deadline is not None:
                    deadline = time.monotonic() + (timeout or 0)
                continue
            remaining = MAX_BLOCK if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return
            if hint is not None:
                remaining = min(remaining, hint)
            if hint != 0:
                self.wait(remaining)

    # ----------------------------------------------------------------- finishing a delivery
    # Each has a ``*_call`` form that builds the script call without sending it, for a
    # caller that sends many in one round trip (a worker's batch of acks and its claim).

    def ack_call(
        self,
        msg: Message,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        run_ms: int | None = None,
    ) -> Call[bool]:
        stored = "" if result is NO_RESULT else encode_body(result).decode("utf-8")
        return self.shard_for(msg.tag).ack(msg, stored, int(result_ttl * 1000), run_ms)

    def ack(self, msg: Message, result: Any = NO_RESULT, result_ttl: float = 86400) -> bool:
        """Finish a delivery: the job and its record are deleted.

        With ``result`` (any JSON value), it is kept for ``result_ttl`` seconds and can be
        read back with :meth:`result`. Returns False, changing nothing, when the delivery
        is stale (its lease was recovered, or the job was handed to another consumer).
        """
        return self._run(self.ack_call(msg, result, result_ttl))

    def ack_many(self, msgs: Sequence[Message]) -> list[bool]:
        """Ack several deliveries in one pipelined round trip."""
        if not msgs:
            return []
        batch = self.batch()
        pending = [batch.add(self.ack_call(m)) for m in msgs]
        self.send(batch)
        return [p.result() for p in pending]

    def release_call(self, msg: Message) -> Call[bool]:
        return self.shard_for(msg.tag).release(msg)

    def release(self, msg: Message) -> bool:
        """Give a delivery back unrun: the job is back in line at once (at its place) and
        this attempt does not count. False for a stale delivery."""
        return self._run(self.release_call(msg))

    def nack_call(
        self,
        msg: Message,
        error: str = "",
        retry_in: float | timedelta | None = None,
        *,
        dead: bool = False,
    ) -> Call[NackResult]:
        if not isinstance(error, str):
            raise InvalidArgument(f"error must be a str, got {type(error).__name__}")
        if retry_in is None:
            retry_s = self.options.retry_backoff.delay(msg.attempt)
        else:
            retry_s = max(0.0, validate.seconds(retry_in, "retry_in"))
        return self.shard_for(msg.tag).nack(msg, error[:65536], int(retry_s * 1000), dead)

    def nack(
        self,
        msg: Message,
        error: str = "",
        retry_in: float | timedelta | None = None,
        *,
        dead: bool = False,
    ) -> NackResult:
        """A delivery failed. Retry the job, or move it to dead letters.

        ``retry_in``: seconds before the retry (default: the queue's backoff for this
        attempt, with jitter; 0 = back in line now). The job is dead instead when it
        has had ``max_retries`` retries, or at once with ``dead=True``. ``error`` (text,
        e.g. a traceback) is kept on the job record.

        Returns ``"retry"``, ``"dead"``, or None for a stale delivery (nothing changed).
        """
        return self._run(self.nack_call(msg, error, retry_in, dead=dead))

    def touch_call(
        self,
        msg: Message,
        extend: float | None = None,
        progress: float | None = None,
        note: str = "",
    ) -> Call[int | None]:
        ext = -1 if extend is None else int(validate.seconds(extend, "extend") * 1000)
        if extend is not None and ext < 0:
            raise InvalidArgument("extend must be >= 0 seconds")
        prog = ""
        if progress is not None:
            value = validate.seconds(progress, "progress")
            if not 0 <= value <= 1:
                raise InvalidArgument(f"progress must be in [0, 1], got {progress!r}")
            prog = json.dumps({"v": value, "n": str(note)[:200], "t": _now_ms()})
        return self.shard_for(msg.tag).touch(msg, ext, prog)

    def touch(
        self,
        msg: Message,
        extend: float | None = None,
        progress: float | None = None,
        note: str = "",
    ) -> datetime | None:
        """Heartbeat: extend the lease by ``extend`` seconds from now (default: the
        job's own visibility timeout, else the queue's) and/or record progress
        (0.0-1.0 and a short note).

        Returns the new lease deadline, or None when the delivery is stale.
        """
        deadline = self._run(self.touch_call(msg, extend, progress, note))
        return from_ms(deadline) if deadline else None

    # ----------------------------------------------------------------- one job

    def rank(self, tag: str) -> int | None:
        """Position in line: 0 = claimed next. None unless the job is ready.

        On a partitioned queue, the exact position in the global order (score, then
        partition, then tag): the job's rank in its partition plus, in every other
        partition, the jobs with a lower score, and those with an equal score in a
        lower-numbered partition. Two round trips, O(partitions · log N)."""
        validate.tag(tag)
        if self.partitions == 1:
            with unavailable_as_error():
                r: Any = self.client.zrank(self.keys.ready, tag)
            return None if r is None else int(r)
        shard = self.shard_for(tag)
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            pipe.zscore(shard.keys.ready, tag)
            pipe.zrank(shard.keys.ready, tag)
            score, own = pipe.execute()
            if score is None or own is None:
                return None
            return int(own) + self._ahead(float(score), shard.index)

    def _ahead(self, score: float, p: int) -> int:
        """Jobs of the other shards ahead of score ``score`` in shard ``p`` (0 when the
        queue has one shard)."""
        others = [s for s in self.shards if s.index != p]
        if not others:
            return 0
        bound = f"{score:.17g}"
        pipe = self.client.pipeline(transaction=False)
        for s in others:  # ties: a lower-numbered shard goes first
            pipe.zcount(s.keys.ready, "-inf", bound if s.index < p else "(" + bound)
        return sum(int(c) for c in pipe.execute())

    def score(self, tag: str) -> float | None:
        """The job's ready score (lower = sooner). None unless the job is ready."""
        with unavailable_as_error():
            s = self.client.zscore(self.keys_for(validate.tag(tag)).ready, tag)
        return None if s is None else float(s)

    def state(self, tag: str) -> str | None:
        """``"ready"``, ``"delayed"``, ``"leased"``, ``"dead"``, or None (no such job)."""
        return self._run(self.shard_for(validate.tag(tag)).state(tag))

    def state_call(self, tag: str) -> Call[str | None]:
        return self.shard_for(validate.tag(tag)).state(tag)

    def exists(self, tag: str) -> bool:
        """True while the job is ready, delayed or in flight (dead letters excluded)."""
        return self.state(tag) in ("ready", "delayed", "leased")

    def info_call(self, tag: str, *, with_body: bool = True) -> Call[JobInfo | None]:
        """The info script call of one job (rank within its shard: see :meth:`info`)."""
        return self.shard_for(validate.tag(tag)).info(tag, with_body)

    def info(self, tag: str, *, with_body: bool = True) -> JobInfo | None:
        """Everything known about one job, read atomically; None if there is no such job."""
        info = self._run(self.info_call(tag, with_body=with_body))
        if info is not None and info.rank is not None and self.partitions > 1:
            # the script ranks within the shard; add the other shards' share
            assert info.score is not None
            with unavailable_as_error():
                ahead = self._ahead(info.score, self.shard_for(tag).index)
            info = replace(info, rank=info.rank + ahead)
        return info

    def result(self, tag: str) -> Any:
        """The result kept by ``ack(msg, result=...)``; raises ``LookupError`` when none is
        kept (never stored, or expired)."""
        with unavailable_as_error():
            raw = self.client.get(self.keys_for(validate.tag(tag)).result(tag))
        if raw is None:
            raise LookupError(f"no result kept for job {tag!r} in queue {self.name!r}")
        return json.loads(raw)

    # ----------------------------------------------------------------- many jobs, counters
    # (the read model, :mod:`.read`; kept here as the queue's documented API)

    def total_count(self) -> int:
        """Jobs waiting in line (ready)."""
        return self.read.total_count()

    def counts(self) -> dict[str, int]:
        """Jobs per state: ``ready``, ``delayed``, ``inflight``, ``dead`` (one snapshot;
        on a partitioned queue, the sums of one read of each partition)."""
        return self.read.counts()

    def stats(self) -> dict[str, int]:
        """Lifetime counters: enqueued, claimed, acked, failed, retried, dead, expired, ..."""
        return self.read.stats()

    def minutes(self, last: int = 60) -> list[dict[str, int]]:
        """Per-minute figures for the ``last`` minutes (at most 63), oldest first: minute
        (since the epoch, Redis time), enqueued, acked, failed, dead, run_ms, and ready
        (depth: the last sample the scanner took in that minute, -1 when none was
        taken; for the current minute, the depth now). Minutes with no activity are
        zeros. One round trip (two on a Redis Cluster or a partitioned queue)."""
        return self.read.minutes(last)

    def live_threads(self, within: float = 30.0) -> int:
        """Worker threads serving this queue, as registered by workers seen in the last
        ``within`` seconds."""
        return self.read.live_threads(within)

    def dead_letters(self, offset: int = 0, limit: int = 50) -> list[JobInfo]:
        """Dead jobs, most recent first, with their last error (one page)."""
        return self.read.dead_letters(offset, limit)

    def merged_page(self, state: str, offset: int, limit: int) -> list[tuple[str, float, int]]:
        """One page of a state's jobs over all shards in global order (see
        :meth:`QueueReader.page <django_zqueue.read.QueueReader.page>`)."""
        return self.read.page(state, offset, limit)

    # ----------------------------------------------------------------- removal

    def delete(self, tag: str) -> bool:
        """Remove a ready, delayed or dead job with its record.

        Returns False when there is no such job, or when it is in flight (a consumer
        holds its lease; it is left alone).
        """
        return self._run(self.shard_for(validate.tag(tag)).delete(tag, False)) == 1

    def cancel(self, tag: str) -> bool:
        """Remove a job only while it waits (ready or delayed). False otherwise."""
        return self._run(self.shard_for(validate.tag(tag)).delete(tag, True)) == 1

    def requeue_dead(self, tag: str) -> bool:
        """Put a dead job back in line with its attempts reset. False if it isn't dead."""
        return self._run(self.shard_for(validate.tag(tag)).requeue_dead(tag))

    def purge_dead(self) -> int:
        """Delete every dead letter, in bounded script calls. Returns how many."""
        total = 0
        limit = self.options.scan_batch
        for shard in self.shards:
            while True:
                n = self._run(shard.purge_dead(limit))
                total += n
                if n < limit:
                    break
        return total

    # ----------------------------------------------------------------- housekeeping

    def scan(self, limit: int | None = None) -> ScanResult:
        """One bounded housekeeping step (at most ``limit`` jobs per kind per shard,
        default ``scan_batch``): promote due delayed jobs, recover expired leases, trim
        dead letters. ``more`` in the result says whether another step has work to do."""
        limit = self.options.scan_batch if limit is None else limit
        if not 1 <= limit <= 5000:
            raise InvalidArgument("limit must be in [1, 5000]")
        if self.partitions == 1:
            return ScanResult.from_replies([self._run(self.shards[0].scan(limit))])
        batch = self.batch()
        pending = [batch.add(s.scan(limit)) for s in self.shards]
        self.send(batch)
        return ScanResult.from_replies([p.result() for p in pending])

    def fire(self, name: str, tick: int, next_tick: int | None, job: NewJob | None) -> bool:
        """Fire one tick of periodic schedule ``name`` exactly once (``fire.lua``): enqueue
        ``job`` (None: only move on) if the schedule's next tick is still ``tick``, and
        move it to ``next_tick`` (None: out of the due set). False: already handled."""
        return self._run(self.shards[0].fire(name, tick, next_tick, job))

    def clear(self) -> None:
        """Delete every key of this queue (all jobs, records and counters). For tests
        and operators; not atomic with concurrent publishers."""
        with unavailable_as_error():
            for k in {self.keys, *self.part_keys}:  # one DEL per hash tag (one slot each)
                self.client.delete(*k.all())
            if self.partitions > 1:
                self.client.delete(layout_key(self.prefix, self.name))
        self._layout_ok = self.partitions == 1


def _min_hint(got: Sequence[Claimed]) -> int:
    known = [c.hint_ms for c in got if c.hint_ms >= 0]
    return min(known) if known else -1


_queues: dict[str, Queue] = {}


def get_queue(name: str = "default") -> Queue:
    """The configured queue ``name`` (cached until ``settings.ZQUEUE`` changes)."""
    q = _queues.get(name)
    if q is None:
        config = conf.get_config()
        if name not in config.queues:
            raise UnknownQueue(name, list(config.queues))
        q = _queues[name] = Queue(
            name, config.queues[name], prefix=config.prefix, client=get_client(config)
        )
    return q


conf.on_reset(_queues.clear)


def command_queue(name: str) -> Queue:
    """The configured queue ``name`` for a management command: an unknown name is a
    ``CommandError`` (a clear message, no traceback)."""
    from django.core.management.base import CommandError

    try:
        return get_queue(name)
    except UnknownQueue as exc:
        raise CommandError(str(exc)) from exc
