"""The queue engine: every state change of a job is one atomic Lua script call.

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
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.utils import timezone

from . import conf
from .connection import (
    get_client,
    is_cluster,
    server_time_ms,
    slot_groups,
    socket_timeout,
    unavailable_as_error,
    wait_any,
)
from .exceptions import (
    DuplicateJob,
    InvalidArgument,
    PartitionMismatch,
    PayloadTooLarge,
    UnknownQueue,
)
from .keys import QueueKeys, layout_key, partition_keys, partition_of, queue_keys
from .scripts import Arg, Scripts

#: at most this many jobs per publish script call, so one call stays short
PUBLISH_CHUNK = 100
#: most jobs one claim may lease
MAX_BATCH = 1000
#: at most this many jobs per claim script call (a bigger claim sends several, pipelined)
CLAIM_CHUNK = 100
#: a tag is 1..MAX_TAG_BYTES bytes of UTF-8
MAX_TAG_BYTES = 256
#: the notify list never holds more wake-up tokens than this
NOTIFY_CAP = 64
#: due delayed jobs promoted by one claim call
PROMOTE_LIMIT = 100
#: longest single blocking wait; a wait is also cut to a share of the socket timeout
MAX_BLOCK = 5.0
#: on a partitioned queue, a merged listing (dead letters, admin pages) reads at most
#: this many entries per partition: offset + limit must stay within it
MAX_MERGED = 10_000

STATES = ("ready", "delayed", "leased", "dead")
SERIES = {"e": "enqueued", "a": "acked", "f": "failed", "d": "dead", "t": "run_ms", "r": "ready"}
#: "no result to keep" for :meth:`Queue.ack_pipelined`
NO_RESULT: Any = object()


@dataclass(frozen=True, slots=True)
class Message:
    """One delivery of a job to one consumer, valid while its lease lasts.

    ``token`` identifies this delivery: :meth:`Queue.ack`, :meth:`Queue.nack` and
    :meth:`Queue.touch` are rejected once the job was handed to anyone else.
    """

    queue: str
    tag: str
    body: Any
    attempt: int
    token: int
    priority: int
    max_retries: int
    enqueued_at_ms: int
    lease_deadline_ms: int
    raw_body: bytes
    visibility_timeout_ms: int | None = None  # the job's own lease length, if it has one

    @property
    def enqueued_at(self) -> datetime:
        return _from_ms(self.enqueued_at_ms)

    @property
    def lease_deadline(self) -> datetime:
        return _from_ms(self.lease_deadline_ms)


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A consistent snapshot of one job (see :meth:`Queue.info`)."""

    tag: str
    queue: str
    state: str  # ready | delayed | leased | dead | orphan
    rank: int | None  # position in line while ready
    score: float | None  # ready score while ready
    run_at: datetime | None  # while delayed
    lease_deadline: datetime | None  # while leased
    died_at: datetime | None  # while dead
    priority: int
    attempts: int
    max_retries: int
    enqueued_at: datetime
    started_at: datetime | None  # last claim
    consumer: str | None  # last consumer that claimed it
    last_error: str | None
    progress: dict[str, Any] | None
    body: Any


@dataclass(frozen=True, slots=True)
class ScanResult:
    promoted: int  # delayed jobs now due, moved to ready
    recovered: int  # expired leases put back in line
    buried: int  # expired leases whose attempts were spent, now dead
    trimmed: int  # dead letters removed by age or count
    more: bool  # a limit was hit: call again to finish


def minute_rows(
    fields: Mapping[str, int], now_minute: int, last: int, ready_now: int | None = None
) -> list[dict[str, int]]:
    """Rows of :meth:`Queue.minutes` from the decoded stats hash (the 64-slot ring);
    ``ready_now``, when given, is the current minute's depth (the live ZCARD)."""
    out = []
    for minute in range(now_minute - last + 1, now_minute + 1):
        slot = minute % 64
        live = fields.get(f"m{slot}") == minute
        row = {"minute": minute}
        for short, name in SERIES.items():
            row[name] = fields.get(f"{short}{slot}", 0) if live else 0
        if not live or f"r{slot}" not in fields:
            row["ready"] = -1
        out.append(row)
    if ready_now is not None and out:
        out[-1]["ready"] = ready_now
    return out


def live_thread_count(workers: Mapping[Any, Any], cutoff_ms: float) -> int:
    """Threads of the worker registrations (the workers hash) seen since ``cutoff_ms``."""
    total = 0
    for value in workers.values():
        try:
            entry = json.loads(value)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("seen", 0) >= cutoff_ms:
            total += int(entry.get("threads", 1))
    return total


def _from_ms(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _now_ms() -> int:
    return int(time.time() * 1000)


def encode_body(body: Any) -> bytes:
    """JSON-encode a body; ``TypeError``/``ValueError`` (``InvalidArgument``) if it can't be."""
    try:
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # NaN / inf, circular reference
        raise InvalidArgument(f"body is not valid JSON: {exc}") from exc
    return text.encode("utf-8")


def new_tag() -> str:
    """A fresh random job tag: 22 URL-safe characters (about 128 random bits), never
    starting with "-"."""
    while True:
        tag = secrets.token_urlsafe(16)
        if tag[0] != "-":  # a leading "-" would read as an option on a command line
            return tag


def _check_tag(tag: object) -> str:
    if not isinstance(tag, str):
        raise InvalidArgument(f"tag must be a str, not {type(tag).__name__}")
    size = len(tag.encode("utf-8"))
    if size == 0 or size > MAX_TAG_BYTES:
        raise InvalidArgument(f"tag must be 1 to {MAX_TAG_BYTES} bytes of UTF-8, got {size}")
    return tag


def _check_priority(priority: object) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidArgument(
            f"priority must be an int in [{conf.PRIORITY_MIN}, {conf.PRIORITY_MAX}], "
            f"got {priority!r}"
        )
    if not conf.PRIORITY_MIN <= priority <= conf.PRIORITY_MAX:
        raise InvalidArgument(
            f"priority must be in [{conf.PRIORITY_MIN}, {conf.PRIORITY_MAX}], got {priority}"
        )
    return priority


def _check_score(score: object) -> str:
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise InvalidArgument(f"score must be a number, got {score!r}")
    if isinstance(score, float) and not math.isfinite(score):
        raise InvalidArgument(f"score must be finite, got {score!r}")
    if abs(score) > conf.MAX_EXACT:
        raise InvalidArgument(f"score must be within ±2**53 to be exact, got {score!r}")
    return repr(float(score))


def _seconds(value: object, what: str) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{what} must be seconds (int/float) or a timedelta, got {value!r}")
    if not math.isfinite(value):
        raise InvalidArgument(f"{what} must be finite, got {value!r}")
    return float(value)


def _when(delay: object, run_at: object) -> tuple[str, str]:
    """(delay_ms, run_at_ms) script arguments; '' means not given."""
    if delay is not None and run_at is not None:
        raise InvalidArgument("give delay or run_at, not both")
    if delay is not None:
        ms = _seconds(delay, "delay") * 1000
        if conf.delay_problem(ms / 1000):
            raise InvalidArgument(conf.delay_problem(ms / 1000))
        return (str(int(ms)) if ms >= 1 else ""), ""
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise InvalidArgument(f"run_at must be a datetime, got {run_at!r}")
        if timezone.is_naive(run_at):
            if settings.USE_TZ:
                raise InvalidArgument(
                    "run_at is a naive datetime while USE_TZ = True; pass an aware datetime"
                )
            run_at = timezone.make_aware(run_at, timezone.get_default_timezone())
        if conf.delay_problem(run_at.timestamp() - time.time(), "run_at"):
            raise InvalidArgument(conf.delay_problem(run_at.timestamp() - time.time(), "run_at"))
        return "", str(int(run_at.timestamp() * 1000))
    return "", ""


def _s(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


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
        self.options = options or conf.QueueOptions()
        self.prefix = prefix
        #: the queue's own hash tag: its jobs when unpartitioned; always its workers hash
        self.keys: QueueKeys = queue_keys(prefix, name)
        o = self.options
        n = o.partitions
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= conf.MAX_PARTITIONS:
            raise InvalidArgument(f"partitions must be an int in [1, {conf.MAX_PARTITIONS}]")
        if n > 1 and (o.concurrency or o.qps):
            raise InvalidArgument("concurrency and qps cannot be combined with partitions > 1")
        #: number of partitions (hash tags) the queue's jobs are spread over
        self.partitions = n
        #: the keys of each partition; ``[self.keys]`` for an unpartitioned queue
        self.part_keys: list[QueueKeys] = partition_keys(prefix, name, n)
        #: the keys of the queue's periodic schedules (partition 0, with the cron jobs)
        self.sched_keys: QueueKeys = self.part_keys[0]
        #: the notify lists a waiting consumer blocks on
        self.notify_keys: list[str] = [k.notify for k in self.part_keys]
        self._rr = secrets.randbelow(n)  # round-robin start partition of the next claim
        self._layout_ok = n == 1
        self.client: redis.Redis = client if client is not None else get_client()
        self.scripts = Scripts(self.client)
        # BLPOP names keys of one slot only on a Redis Cluster (see connection.wait_any)
        self._notify_groups = slot_groups(self.client, self.notify_keys)
        self._wait_turn = [0]
        # partitions share one clock-based sequence so scores compare across them
        self._mode = "tstrict" if n > 1 and o.priority_mode == "strict" else o.priority_mode
        self._aging_us = int(o.priority_aging_seconds * 1_000_000)
        self._vt_ms = o.visibility_timeout_ms
        self._concurrency = o.concurrency or 0
        self._qps = o.qps or 0
        self._dead_ttl_ms = int(o.dead_letter_ttl * 1000)
        self._ack_notify = NOTIFY_CAP if o.concurrency else 0
        timeout = socket_timeout(self.client)
        self._max_block = MAX_BLOCK if timeout is None else max(0.01, min(MAX_BLOCK, timeout * 0.8))

    def __repr__(self) -> str:
        if self.partitions > 1:
            return f"<Queue {self.name!r} keys={self.keys.tag} partitions={self.partitions}>"
        return f"<Queue {self.name!r} keys={self.keys.tag}>"

    # ----------------------------------------------------------------- partitions

    def keys_for(self, tag: str) -> QueueKeys:
        """The keys of the partition that holds job ``tag`` (:func:`keys.partition_of`)."""
        if self.partitions == 1:
            return self.keys
        return self.part_keys[partition_of(tag, self.partitions)]

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
            k = queue_keys(self.prefix, self.name)
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
    ) -> list[Arg]:
        """Validate and encode one job without sending it (see :meth:`publish_prepared`).

        Raises exactly what :meth:`publish` raises for bad input; touches no Redis."""
        data = encode_body(body)
        if len(data) > self.options.max_payload_bytes:
            raise PayloadTooLarge(len(data), self.options.max_payload_bytes)
        retries = self.options.max_retries if max_retries is None else max_retries
        if conf.max_retries_problem(retries):
            raise InvalidArgument(conf.max_retries_problem(retries))
        vt = ""
        if visibility_timeout is not None:
            secs = _seconds(visibility_timeout, "visibility_timeout")
            if conf.visibility_timeout_problem(secs):
                raise InvalidArgument(conf.visibility_timeout_problem(secs))
            vt = str(int(secs * 1000))
        when = _when(delay, run_at)
        return [
            _check_tag(tag) if tag is not None else new_tag(),
            data,
            _check_priority(priority),
            "" if score is None else _check_score(score),
            when[0],
            when[1],
            retries,
            vt,
        ]

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
        100 jobs are all-or-nothing. A longer call is sent as chunks of 100 in one
        pipeline after its tags are checked for clashes, so a :class:`DuplicateJob`
        writes nothing unless another client published a clashing tag in the meantime
        (the exception's ``published`` then lists what was written).
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

    def publish_prepared(self, jobs: Sequence[Sequence[Arg]]) -> list[str]:
        """Send jobs made by :meth:`prepare`: one script call per 100, one round trip."""
        if not jobs:
            return []
        if self.partitions > 1:
            return self._publish_partitioned(jobs)
        tags = [_s(j[0]) for j in jobs]  # type: ignore[arg-type]
        if len(jobs) <= PUBLISH_CHUNK:
            with unavailable_as_error():
                reply = self.scripts.publish(
                    self.keys, self._mode, self._aging_us, NOTIFY_CAP, jobs
                )
            if int(reply[0]) != 0:
                raise DuplicateJob([_s(x) for x in reply[1::2]], [_s(x) for x in reply[2::2]])
            return tags
        chunks = [jobs[i : i + PUBLISH_CHUNK] for i in range(0, len(jobs), PUBLISH_CHUNK)]
        self._precheck_tags(tags)
        with unavailable_as_error():
            pipe = self.scripts.pipeline()  # plain EVALSHA calls in one round trip
            for chunk in chunks:
                self.scripts.publish(
                    self.keys, self._mode, self._aging_us, NOTIFY_CAP, chunk, client=pipe
                )
            replies = self.scripts.execute(pipe)
        return self._published(chunks, replies, tags)

    @staticmethod
    def _published(
        chunks: Sequence[Sequence[Sequence[Arg]]], replies: Sequence[Any], tags: list[str]
    ) -> list[str]:
        """``tags``, once every chunk's publish reply says written; else DuplicateJob with
        the clashes and the tags that the other chunks did write."""
        published: set[str] = set()
        clashes: list[tuple[list[str], list[str]]] = []
        for chunk, reply in zip(chunks, replies, strict=True):
            if int(reply[0]) == 0:
                published.update(_s(j[0]) for j in chunk)  # type: ignore[arg-type]
            else:
                clashes.append(([_s(x) for x in reply[1::2]], [_s(x) for x in reply[2::2]]))
        if clashes:
            raise DuplicateJob(
                [t for ts, _ in clashes for t in ts],
                [s for _, ss in clashes for s in ss],
                [t for t in tags if t in published],
            )
        return tags

    def _publish_partitioned(self, jobs: Sequence[Sequence[Arg]]) -> list[str]:
        """Publish on a partitioned queue: one script call per partition (and per
        ``PUBLISH_CHUNK`` jobs), each on that partition's keys only, in one round trip. A
        call that spans partitions is checked for clashes first, like a chunked call."""
        self._layout()
        tags = [_s(j[0]) for j in jobs]  # type: ignore[arg-type]
        groups: dict[int, list[Sequence[Arg]]] = {}
        for tag, job in zip(tags, jobs, strict=True):
            groups.setdefault(partition_of(tag, self.partitions), []).append(job)
        calls = [
            (p, group[i : i + PUBLISH_CHUNK])
            for p, group in sorted(groups.items())
            for i in range(0, len(group), PUBLISH_CHUNK)
        ]
        if len(calls) > 1:
            self._precheck_tags(tags)
        with unavailable_as_error():
            if len(calls) == 1:  # one partition: a plain call
                p, chunk = calls[0]
                args = (self._mode, self._aging_us, NOTIFY_CAP, chunk)
                replies = [self.scripts.publish(self.part_keys[p], *args)]
            else:  # plain EVALSHA calls in one round trip
                pipe = self.scripts.pipeline()
                for p, chunk in calls:
                    args = (self._mode, self._aging_us, NOTIFY_CAP, chunk)
                    self.scripts.publish(self.part_keys[p], *args, client=pipe)
                replies = self.scripts.execute(pipe)
        return self._published([chunk for _, chunk in calls], replies, tags)

    def _precheck_tags(self, tags: list[str]) -> None:
        seen: set[str] = set()
        dupes = [t for t in tags if t in seen or seen.add(t)]  # type: ignore[func-returns-value]
        if dupes:
            raise DuplicateJob(dupes, ["batch"] * len(dupes))
        if self.partitions > 1:
            by_part: dict[int, list[str]] = {}
            for t in tags:
                by_part.setdefault(partition_of(t, self.partitions), []).append(t)
            batches = [
                (self.part_keys[p], ts[i : i + PUBLISH_CHUNK])
                for p, ts in by_part.items()
                for i in range(0, len(ts), PUBLISH_CHUNK)
            ]
        else:
            batches = [
                (self.keys, tags[i : i + PUBLISH_CHUNK]) for i in range(0, len(tags), PUBLISH_CHUNK)
            ]
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            for k, ts in batches:
                pipe.hmget(k.meta, ts)
            found = pipe.execute()
        taken = [
            t
            for (_, ts), vs in zip(batches, found, strict=True)
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
        ``concurrency`` and ``qps`` limits are enforced inside the script.
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise InvalidArgument(f"batch must be an int in [1, {MAX_BATCH}], got {batch!r}")
        if self.partitions > 1:
            return self._claim_partitioned(batch, consumer)
        sizes = [min(CLAIM_CHUNK, batch - i) for i in range(0, batch, CLAIM_CHUNK)]
        with unavailable_as_error():
            if len(sizes) == 1:
                replies = [self._claim_call(batch, consumer, self.client)]
            else:  # one short script call per chunk, all in one round trip
                pipe = self.scripts.pipeline()
                for size in sizes:
                    self._claim_call(size, consumer, pipe)
                replies = self.scripts.execute(pipe)
        msgs = [
            self._message(*reply[i : i + 4]) for reply in replies for i in range(1, len(reply), 4)
        ]
        if msgs:
            return msgs, None
        hint = int(replies[0][0])
        return msgs, (hint / 1000 if hint >= 0 else None)

    def next_partition(self) -> int:
        """The partition the next claim starts at; advances round-robin."""
        p = self._rr
        self._rr = (p + 1) % self.partitions
        return p

    def claim_reply(self, reply: list[Any]) -> tuple[list[Message], int]:
        """Messages and raw hint (ms, -1 = none known) of one claim script reply."""
        msgs = [self._message(*reply[i : i + 4]) for i in range(1, len(reply), 4)]
        return msgs, int(reply[0])

    def _claim_partitioned(
        self, batch: int, consumer: str, first: tuple[int, list[Message], int] | None = None
    ) -> tuple[list[Message], float | None]:
        """Claim round-robin: start at the next partition, go on to the following ones
        while the batch is not full; at most one script call per partition (of at most
        ``CLAIM_CHUNK`` jobs), each on one partition's keys. ``first``: the reply of the
        start partition, already claimed."""
        self._layout()
        start, msgs, hint = first if first is not None else (self.next_partition(), [], -1)
        hints = [hint] if first is not None else []
        for i in range(1 if first is not None else 0, self.partitions):
            if len(msgs) >= batch:
                break
            k = self.part_keys[(start + i) % self.partitions]
            with unavailable_as_error():
                reply = self._claim_call(min(CLAIM_CHUNK, batch - len(msgs)), consumer, keys=k)
            got, h = self.claim_reply(reply)
            msgs.extend(got)
            hints.append(h)
        if msgs:
            return msgs, None
        known = [h for h in hints if h >= 0]
        return msgs, (min(known) / 1000 if known else None)

    def _claim_call(
        self, batch: int, consumer: str, client: Any = None, keys: QueueKeys | None = None
    ) -> Any:
        """One claim script call (at most ``CLAIM_CHUNK`` jobs) on ``keys`` (default: the
        queue's; a partition's keys on a partitioned queue), sent on ``client``."""
        return self.scripts.claim(
            keys or self.keys,
            batch,
            self._vt_ms,
            self._concurrency,
            self._qps,
            PROMOTE_LIMIT,
            self._mode,
            self._aging_us,
            consumer,
            client=client,
        )

    def _message(self, tag: bytes, raw: bytes, meta_raw: bytes, deadline: int) -> Message:
        meta = json.loads(meta_raw)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None  # an undecodable payload: the consumer sees raw_body and body=None
        return Message(
            queue=self.name,
            tag=_s(tag),
            body=body,
            attempt=int(meta.get("a", 1)),
            token=int(meta["t"]),
            priority=int(meta.get("p", 0)),
            max_retries=int(meta.get("m", 0)),
            enqueued_at_ms=int(meta.get("e", 0)),
            lease_deadline_ms=int(deadline),
            raw_body=raw,
            visibility_timeout_ms=int(meta["v"]) if "v" in meta else None,
        )

    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds`` for a wake-up from a publish, retry or ack.

        Returns True when woken. A wait is cut to a share of the socket timeout, so a
        long wait returns early (False) and the caller simply claims again.
        """
        if seconds <= 0:
            return False
        seconds = min(seconds, self._max_block)
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

    def ack(self, msg: Message, result: Any = NO_RESULT, result_ttl: float = 86400) -> bool:
        """Finish a delivery: the job and its record are deleted.

        With ``result`` (any JSON value), it is kept for ``result_ttl`` seconds and can be
        read back with :meth:`result`. Returns False, changing nothing, when the delivery
        is stale (its lease was recovered, or the job was handed to another consumer).
        """
        with unavailable_as_error():
            return int(self.ack_pipelined(msg, None, result, result_ttl)) == 1

    def ack_pipelined(
        self,
        msg: Message,
        pipe: Any,
        result: Any = NO_RESULT,
        result_ttl: float = 86400,
        run_ms: int | None = None,
    ) -> Any:
        """Queue the ack of ``msg`` on ``pipe`` (or run it now when ``pipe`` is None)."""
        stored = "" if result is NO_RESULT else encode_body(result).decode("utf-8")
        return self.scripts.ack(
            self.keys_for(msg.tag),
            msg.tag,
            msg.token,
            self._ack_notify,
            stored,
            int(result_ttl * 1000),
            run_ms,
            client=pipe,
        )

    def ack_many(self, msgs: Sequence[Message]) -> list[bool]:
        """Ack several deliveries in one pipelined round trip."""
        if not msgs:
            return []
        with unavailable_as_error():
            pipe = self.scripts.pipeline()
            for msg in msgs:
                self.ack_pipelined(msg, pipe)
            return [int(r) == 1 for r in self.scripts.execute(pipe)]

    def result(self, tag: str) -> Any:
        """The result kept by ``ack(msg, result=...)``; raises ``LookupError`` when none is
        kept (never stored, or expired)."""
        with unavailable_as_error():
            raw = self.client.get(self.keys_for(_check_tag(tag)).result(tag))
        if raw is None:
            raise LookupError(f"no result kept for job {tag!r} in queue {self.name!r}")
        return json.loads(raw)

    def release(self, msg: Message) -> bool:
        """Give a delivery back unrun: the job is back in line at once and this attempt
        does not count. False for a stale delivery."""
        with unavailable_as_error():
            reply = self.scripts.release(
                self.keys_for(msg.tag), msg.tag, msg.token, self._mode, self._aging_us, NOTIFY_CAP
            )
        return int(reply) == 1

    def nack(
        self,
        msg: Message,
        error: str = "",
        retry_in: float | timedelta | None = None,
        *,
        dead: bool = False,
    ) -> str | None:
        """A delivery failed. Retry the job, or move it to dead letters.

        ``retry_in``: seconds before the retry (default: the queue's backoff for this
        attempt, with jitter; 0 = back in line now). The job is dead instead when it
        has had ``max_retries`` retries, or at once with ``dead=True``. ``error`` (text,
        e.g. a traceback) is kept on the job record.

        Returns ``"retry"``, ``"dead"``, or None for a stale delivery (nothing changed).
        """
        if not isinstance(error, str):
            raise InvalidArgument(f"error must be a str, got {type(error).__name__}")
        if retry_in is None:
            retry_s = self.options.retry_backoff.delay(msg.attempt)
        else:
            retry_s = max(0.0, _seconds(retry_in, "retry_in"))
            if conf.delay_problem(retry_s, "retry_in"):
                raise InvalidArgument(conf.delay_problem(retry_s, "retry_in"))
        with unavailable_as_error():
            reply = int(
                self.scripts.nack(
                    self.keys_for(msg.tag),
                    msg.tag,
                    msg.token,
                    error[:65536],
                    int(retry_s * 1000),
                    dead,
                    self._mode,
                    self._aging_us,
                    self.options.dead_letter_max,
                    self._dead_ttl_ms,
                    self.options.scan_batch,
                    NOTIFY_CAP,
                )
            )
        return {1: "retry", 2: "dead"}.get(reply)

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
        ext = -1 if extend is None else int(_seconds(extend, "extend") * 1000)
        if not -1 <= ext <= conf.MAX_VISIBILITY_TIMEOUT * 1000:
            raise InvalidArgument(f"extend must be in [0, {conf.MAX_VISIBILITY_TIMEOUT}] seconds")
        if extend is not None and ext < 0:
            raise InvalidArgument("extend must be >= 0 seconds")
        prog = ""
        if progress is not None:
            value = _seconds(progress, "progress")
            if not 0 <= value <= 1:
                raise InvalidArgument(f"progress must be in [0, 1], got {progress!r}")
            prog = json.dumps({"v": value, "n": str(note)[:200], "t": _now_ms()})
        with unavailable_as_error():
            deadline = int(
                self.scripts.touch(
                    self.keys_for(msg.tag), msg.tag, msg.token, ext, prog, self._vt_ms
                )
            )
        return _from_ms(deadline) if deadline else None

    # ----------------------------------------------------------------- inspection

    def rank(self, tag: str) -> int | None:
        """Position in line: 0 = claimed next. None unless the job is ready.

        On a partitioned queue, the exact position in the global order (score, then
        partition, then tag): the job's rank in its partition plus, in every other
        partition, the jobs with a lower score, and those with an equal score in a
        lower-numbered partition. Two round trips, O(partitions · log N)."""
        _check_tag(tag)
        if self.partitions == 1:
            with unavailable_as_error():
                r: Any = self.client.zrank(self.keys.ready, tag)
            return None if r is None else int(r)
        p = partition_of(tag, self.partitions)
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            pipe.zscore(self.part_keys[p].ready, tag)
            pipe.zrank(self.part_keys[p].ready, tag)
            score, own = pipe.execute()
            if score is None or own is None:
                return None
            return int(own) + self._ahead(float(score), p)

    def _ahead(self, score: float, p: int) -> int:
        """Jobs of the other partitions ahead of score ``score`` in partition ``p``."""
        bound = f"{score:.17g}"
        pipe = self.client.pipeline(transaction=False)
        for j, k in enumerate(self.part_keys):
            if j != p:  # ties: a lower-numbered partition goes first
                pipe.zcount(k.ready, "-inf", bound if j < p else "(" + bound)
        return sum(int(c) for c in pipe.execute())

    def score(self, tag: str) -> float | None:
        """The job's ready score (lower = sooner). None unless the job is ready."""
        with unavailable_as_error():
            s = self.client.zscore(self.keys_for(_check_tag(tag)).ready, tag)
        return None if s is None else float(s)

    def state(self, tag: str) -> str | None:
        """``"ready"``, ``"delayed"``, ``"leased"``, ``"dead"``, or None (no such job)."""
        with unavailable_as_error():
            s = _s(self.scripts.state(self.keys_for(_check_tag(tag)), tag))
        return s or None

    def exists(self, tag: str) -> bool:
        """True while the job is ready, delayed or in flight (dead letters excluded)."""
        return self.state(tag) in ("ready", "delayed", "leased")

    def total_count(self) -> int:
        """Jobs waiting in line (ready)."""
        if self.partitions > 1:
            return self.counts()["ready"]
        with unavailable_as_error():
            return int(self.client.zcard(self.keys.ready))

    def counts(self) -> dict[str, int]:
        """Jobs per state: ``ready``, ``delayed``, ``inflight``, ``dead`` (one snapshot;
        on a partitioned queue, the sums of one read of each partition)."""
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=self.partitions == 1)
            for k in self.part_keys:
                for key in (k.ready, k.delayed, k.leased, k.dead):
                    pipe.zcard(key)
            replies = pipe.execute()
        r, d, inflight, dead = (sum(int(x) for x in replies[i::4]) for i in range(4))
        return {"ready": r, "delayed": d, "inflight": inflight, "dead": dead}

    def _stats_fields(self) -> dict[str, int]:
        """The stats hash, decoded; on a partitioned queue, summed over the partitions:
        lifetime counters field by field, and each slot of the minute ring over the
        partitions whose slot counts for the newest minute (the caller handles errors)."""
        pipe = self.client.pipeline(transaction=False)
        for k in self.part_keys:
            pipe.hgetall(k.stats)
        parts = [{_s(k): int(v) for k, v in raw.items()} for raw in pipe.execute()]
        fields: dict[str, int] = {}
        for part in parts:
            for name, v in part.items():
                if not name[-1:].isdigit():
                    fields[name] = fields.get(name, 0) + v
        for slot in range(64):
            owners = [part for part in parts if f"m{slot}" in part]
            if not owners:
                continue
            minute = max(part[f"m{slot}"] for part in owners)
            fields[f"m{slot}"] = minute
            for part in owners:
                if part[f"m{slot}"] != minute:
                    continue
                for short in SERIES:
                    if f"{short}{slot}" in part:
                        key = f"{short}{slot}"
                        fields[key] = fields.get(key, 0) + part[key]
        return fields

    def stats(self) -> dict[str, int]:
        """Lifetime counters: enqueued, claimed, acked, failed, retried, dead, expired, ..."""
        if self.partitions > 1:
            with unavailable_as_error():
                fields = self._stats_fields()
            return {name: v for name, v in fields.items() if not name[-1:].isdigit()}
        with unavailable_as_error():
            raw = self.client.hgetall(self.keys.stats)
        return {name: int(v) for k, v in raw.items() if not (name := _s(k))[-1:].isdigit()}

    def minutes(self, last: int = 60) -> list[dict[str, int]]:
        """Per-minute figures for the ``last`` minutes (at most 63), oldest first: minute
        (since the epoch, Redis time), enqueued, acked, failed, dead, run_ms, and ready
        (depth: the last sample the scanner took in that minute, -1 when none was
        taken; for the current minute, the depth now). Minutes with no activity are
        zeros. One round trip (two on a Redis Cluster)."""
        if not 1 <= last <= 63:
            raise InvalidArgument("last must be in [1, 63]")
        with unavailable_as_error():
            if self.partitions > 1:
                now_ms = server_time_ms(self.client, self.keys.stats)
                fields = self._stats_fields()
                depth = self.counts()["ready"]
            else:
                pipe = self.client.pipeline(transaction=False)
                if is_cluster(self.client):  # a cluster pipeline takes no TIME: read it first
                    now_ms = server_time_ms(self.client, self.keys.stats)
                else:
                    pipe.time()
                pipe.hgetall(self.keys.stats)
                pipe.zcard(self.keys.ready)
                *time_reply, raw, depth = pipe.execute()
                if time_reply:
                    secs, micros = time_reply[0]
                    now_ms = int(secs) * 1000 + int(micros) // 1000
                fields = {_s(k): int(v) for k, v in raw.items()}
        return minute_rows(fields, now_ms // 60000, last, int(depth))

    def live_threads(self, within: float = 30.0) -> int:
        """Worker threads serving this queue, as registered by workers seen in the last
        ``within`` seconds."""
        with unavailable_as_error():
            raw = self.client.hgetall(self.keys.workers)
        return live_thread_count(raw, _now_ms() - within * 1000)

    def info(self, tag: str, *, with_body: bool = True) -> JobInfo | None:
        """Everything known about one job, read atomically; None if there is no such job."""
        with unavailable_as_error():
            reply = self.scripts.info(self.keys_for(_check_tag(tag)), tag, with_body)
            info = self._job_info(tag, reply)
            if info is not None and info.rank is not None and self.partitions > 1:
                # the script ranks within the partition; add the other partitions' share
                assert info.score is not None
                p = partition_of(tag, self.partitions)
                info = replace(info, rank=info.rank + self._ahead(info.score, p))
        return info

    def _job_info(self, tag: str, reply: list[Any]) -> JobInfo | None:
        if not reply:
            return None
        state_raw, score_raw, rank, meta_raw, error, progress, body = reply
        state = _s(state_raw)
        meta = json.loads(meta_raw) if meta_raw else {}
        sc = float(score_raw) if score_raw not in (b"", "") else None
        decoded: Any = None
        if body:
            try:
                decoded = json.loads(body)
            except ValueError:
                decoded = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return JobInfo(
            tag=tag,
            queue=self.name,
            state=state,
            rank=int(rank) if int(rank) >= 0 else None,
            score=sc if state == "ready" else None,
            run_at=_from_ms(sc) if state == "delayed" and sc is not None else None,
            lease_deadline=_from_ms(sc) if state == "leased" and sc is not None else None,
            died_at=_from_ms(sc) if state == "dead" and sc is not None else None,
            priority=int(meta.get("p", 0)),
            attempts=int(meta.get("a", 0)),
            max_retries=int(meta.get("m", 0)),
            enqueued_at=_from_ms(meta.get("e", 0)),
            started_at=_from_ms(meta["st"]) if "st" in meta else None,
            consumer=meta.get("c"),
            last_error=_s(error) or None,
            progress=json.loads(progress) if progress else None,
            body=decoded,
        )

    # ----------------------------------------------------------------- removal

    def delete(self, tag: str) -> bool:
        """Remove a ready, delayed or dead job with its record.

        Returns False when there is no such job, or when it is in flight (a consumer
        holds its lease; it is left alone).
        """
        with unavailable_as_error():
            return int(self.scripts.delete(self.keys_for(_check_tag(tag)), tag)) == 1

    def cancel(self, tag: str) -> bool:
        """Remove a job only while it waits (ready or delayed). False otherwise."""
        with unavailable_as_error():
            k = self.keys_for(_check_tag(tag))
            return int(self.scripts.delete(k, tag, waiting_only=True)) == 1

    def dead_letters(self, offset: int = 0, limit: int = 50) -> list[JobInfo]:
        """Dead jobs, most recent first, with their last error (one page)."""
        if offset < 0 or not 1 <= limit <= 1000:
            raise InvalidArgument("offset must be >= 0 and limit in [1, 1000]")
        if self.partitions > 1:
            return self._dead_letters_merged(offset, limit)
        with unavailable_as_error():
            tags: list[bytes] = self.client.zrevrange(self.keys.dead, offset, offset + limit - 1)  # type: ignore[assignment]
            pipe = self.scripts.pipeline()
            for t in tags:
                self.scripts.info(self.keys, _s(t), True, client=pipe)
            replies = self.scripts.execute(pipe)
        infos = (self._job_info(_s(t), r) for t, r in zip(tags, replies, strict=True))
        return [i for i in infos if i is not None]

    def merged_page(self, state: str, offset: int, limit: int) -> list[tuple[str, float, int]]:
        """One page of a state's sorted set over all partitions, in global order:
        ``(tag, score, partition)``. Ready, delayed, leased ascend by (score, partition,
        tag); dead descends (most recent first). Reads ``offset + limit`` entries of
        each partition, so ``offset + limit`` must be at most ``MAX_MERGED`` on a
        partitioned queue. One round trip."""
        if offset < 0 or limit < 1 or offset + limit > MAX_MERGED:
            raise InvalidArgument(
                f"offset + limit must be at most {MAX_MERGED} on a partitioned queue "
                f"(got offset={offset}, limit={limit})"
            )
        newest = state == "dead"
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            for k in self.part_keys:
                key = getattr(k, {"inflight": "leased"}.get(state, state))
                if newest:
                    pipe.zrevrange(key, 0, offset + limit - 1, withscores=True)
                else:
                    pipe.zrange(key, 0, offset + limit - 1, withscores=True)
            replies = pipe.execute()
        entries = [
            (_s(tag), float(score), p) for p, rows in enumerate(replies) for tag, score in rows
        ]
        entries.sort(key=lambda e: (e[1], e[2], e[0].encode("utf-8")), reverse=newest)
        return entries[offset : offset + limit]

    def _dead_letters_merged(self, offset: int, limit: int) -> list[JobInfo]:
        page = self.merged_page("dead", offset, limit)
        with unavailable_as_error():
            pipe = self.scripts.pipeline()
            for tag, _, p in page:
                self.scripts.info(self.part_keys[p], tag, True, client=pipe)
            replies = self.scripts.execute(pipe)
        infos = (self._job_info(t, r) for (t, _, _), r in zip(page, replies, strict=True))
        return [i for i in infos if i is not None]

    def requeue_dead(self, tag: str) -> bool:
        """Put a dead job back in line with its attempts reset. False if it isn't dead."""
        with unavailable_as_error():
            reply = self.scripts.requeue_dead(
                self.keys_for(_check_tag(tag)), tag, self._mode, self._aging_us, NOTIFY_CAP
            )
        return int(reply) == 1

    def purge_dead(self) -> int:
        """Delete every dead letter, in bounded script calls. Returns how many."""
        total = 0
        limit = self.options.scan_batch
        for k in self.part_keys:
            while True:
                with unavailable_as_error():
                    n = int(self.scripts.purge_dead(k, limit))
                total += n
                if n < limit:
                    break
        return total

    # ----------------------------------------------------------------- housekeeping

    def scan(self, limit: int | None = None) -> ScanResult:
        """One bounded housekeeping step (at most ``limit`` jobs per kind, default
        ``scan_batch``): promote due delayed jobs, recover expired leases, trim dead
        letters. ``more`` in the result says whether another step has work to do."""
        limit = self.options.scan_batch if limit is None else limit
        if not 1 <= limit <= 5000:
            raise InvalidArgument("limit must be in [1, 5000]")
        args = (limit, self._mode, self._aging_us, self.options.dead_letter_max)
        with unavailable_as_error():
            if self.partitions == 1:
                replies = [self.scripts.scan(self.keys, *args, self._dead_ttl_ms, NOTIFY_CAP)]
            else:
                pipe = self.scripts.pipeline()
                for k in self.part_keys:  # one script call per partition, on its own keys
                    self.scripts.scan(k, *args, self._dead_ttl_ms, NOTIFY_CAP, client=pipe)
                replies = self.scripts.execute(pipe)
        p, r, b, t, more = (sum(int(x[i]) for x in replies) for i in range(5))
        return ScanResult(p, r, b, t, bool(more))

    def clear(self) -> None:
        """Delete every key of this queue (all jobs, records and counters). For tests
        and operators; not atomic with concurrent publishers."""
        with unavailable_as_error():
            if self.partitions == 1:
                self.client.delete(*self.keys.all())
                return
            for k in [self.keys, *self.part_keys]:  # one DEL per hash tag (one slot each)
                self.client.delete(*k.all())
            self.client.delete(layout_key(self.prefix, self.name))
        self._layout_ok = False


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
