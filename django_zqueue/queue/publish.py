"""Publishing: a job validated and encoded (:class:`~django_zqueue.engine.records.NewJob`), then
sent to its shard, at most 100 jobs per script call, all in one round trip."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from ..engine import PUBLISH_CHUNK, Engine, Shard
from ..engine.keys import partition_of
from ..engine.records import NewJob, encode_body, new_tag, validate
from ..engine.records.spec import JobSpec
from ..engine.redis.connection import unavailable_as_error
from ..exceptions import DuplicateJob, InvalidArgument, PayloadTooLarge, QueueFull
from .once import Once


def room_or_full(counts: Sequence[tuple[Shard, int]], engine: Engine) -> None:
    """:class:`QueueFull` (nothing written) when ``n`` more jobs do not fit in a shard's
    ``max_length`` (``counts``: shard, new jobs), read in one round trip: the check
    before a publish that spans several script calls (each call checks again)."""
    total: dict[int, tuple[Shard, int]] = {}
    for shard, n in counts:
        if shard.policy.max_length:
            total[id(shard)] = (shard, total.get(id(shard), (shard, 0))[1] + n)
    counts = list(total.values())
    if not counts:
        return
    with unavailable_as_error():
        pipe = engine.client.pipeline(transaction=False)
        for shard, _ in counts:
            pipe.zcard(shard.keys.ready)
            pipe.zcard(shard.keys.delayed)
        sizes = pipe.execute()
    for i, (shard, n) in enumerate(counts):
        waiting = int(sizes[2 * i]) + int(sizes[2 * i + 1])
        if waiting + n > shard.policy.max_length:
            raise QueueFull(
                f"{waiting} jobs wait and {n} more would pass max_length "
                f"{shard.policy.max_length}; nothing was written: retry later, or raise "
                "the queue option max_length"
            )


def group_room_or_full(counts: Sequence[tuple[Shard, str, int]], engine: Engine) -> None:
    """:class:`QueueFull` (nothing written) naming the first group whose ``n`` more jobs
    do not fit in its shard's ``group_max_length`` (``counts``: shard, group key or '',
    new jobs that enter a line): one read-only ``group_check`` call per shard, in one
    round trip, only for fair queues with the limit (each publish call checks again)."""
    adds: dict[int, tuple[Shard, dict[str, int]]] = {}
    for shard, group, n in counts:
        if shard.policy.group_max_length and n > 0:
            per = adds.setdefault(id(shard), (shard, {}))[1]
            per[group] = per.get(group, 0) + n
    if adds:
        engine.run_all([shard.group_check(list(per.items())) for shard, per in adds.values()])


@lru_cache(maxsize=256)
def _plain_spec(priority: int, max_retries: int) -> JobSpec:
    """The spec of a job with only a priority and retries (checked when first made)."""
    return JobSpec.build(priority=priority, max_retries=max_retries)


class Publishing(Once):
    """The write side of a queue: new jobs."""

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
        group: str | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> NewJob:
        """Validate and encode one job without sending it (see :meth:`publish_prepared`).

        Raises exactly what :meth:`publish` raises for bad input; touches no Redis."""
        data = encode_body(body)
        if len(data) > self.options.max_payload_bytes:
            raise PayloadTooLarge(len(data), self.options.max_payload_bytes)
        retries = self.options.max_retries if max_retries is None else max_retries
        if (
            type(priority) is int
            and type(retries) is int
            and score is None
            and delay is None
            and run_at is None
            and visibility_timeout is None
            and group is None
            and expires is None
        ):  # the common case: one spec per priority and retries, checked once
            spec = _plain_spec(priority, retries)
        else:
            spec = JobSpec.build(
                priority=priority,
                score=score,
                delay=delay,
                run_at=run_at,
                max_retries=retries,
                visibility_timeout=visibility_timeout,
                group=group,
                weight=self._weight(group),
                expires=expires,
            )
        if tag is None:
            return NewJob(new_tag(), data, spec, True)
        return NewJob(validate.tag(tag), data, spec)

    def _weight(self, group: str | None) -> float | None:
        """In a fair queue, the weight of the job's group (None: 1)."""
        if group is None or self.options.fairness != "groups":
            return None
        return self.options.group_weights.get(group)

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
        debounce: float | timedelta | None = None,
        unique_for: float | timedelta | None = None,
        group: str | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> str:
        """Add one job; return its tag.

        ``body`` is any JSON-serialisable value. ``priority`` (an int in [-1000, 1000],
        higher first) orders the line, FIFO within a priority by a server-side
        sequence. ``score`` places the job at that raw ready score instead (lower is
        claimed sooner; see docs/architecture.md for how scores are made). ``delay``
        (seconds or timedelta) or ``run_at`` (aware datetime) holds the job back until
        then, measured on Redis' clock; a delay <= 0 or a past run-at means now.
        ``max_retries`` and ``visibility_timeout`` override the queue's options.
        ``group`` (a string of at most 200 bytes, e.g. a tenant) is the job's group key:
        with ``fairness="groups"`` the queue serves groups in weighted fair order
        (docs/fairness.md); in any queue it is kept in the record and counted per group.
        ``expires`` (seconds or timedelta from now, or an aware datetime): a job not
        started by then never starts; it ends in the state ``expired`` (docs/queue.md).

        Raises :class:`DuplicateJob` (nothing overwritten) when ``tag`` belongs to a
        ready, delayed, in-flight, dead or expired job of this queue; :class:`QueueFull`
        (nothing written) past the queue's ``max_length``.

        ``debounce`` and ``unique_for`` (seconds; both need a ``tag``) apply the rules
        of :meth:`publish_once` (docs/job-control.md).
        """
        if (debounce is not None or unique_for is not None) and tag is None:
            raise InvalidArgument("debounce and unique_for need a tag")
        job = self.prepare(
            body,
            tag,
            priority,
            score,
            delay,
            run_at,
            max_retries=max_retries,
            visibility_timeout=visibility_timeout,
            group=group,
            expires=expires,
        )
        if debounce is not None or unique_for is not None:
            self.publish_once(job, debounce=debounce, unique_for=unique_for)
            return job.tag
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
        group: str | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> list[str]:
        """Add many jobs in one round trip; return their tags in order.

        Every body is validated and encoded before anything is sent. Calls of up to
        100 jobs (of one partition) are all-or-nothing. A longer call is sent as chunks
        of 100 in one pipeline after the ``tags`` given are checked for clashes, so a
        :class:`DuplicateJob` writes nothing unless another client published a clashing
        tag in the meantime (the exception's ``published`` then lists what was written).
        Tags drawn by :func:`~django_zqueue.engine.records.new_tag` (no ``tags`` given) are not
        checked first: two of them clash with odds of about n²/2^73, and a chunk that
        meets a clash is refused by its script all the same.
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
                group=group,
                expires=expires,
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
        self.engine.ensure_layout()
        if len(jobs) == 1:  # one job, one script call: atomic, no clash precheck
            found = self.engine.run(self.engine.shard_for(jobs[0].tag).publish(jobs))
            return self._published([jobs], [found], [jobs[0].tag]) if found else [jobs[0].tag]
        tags = [j.tag for j in jobs]
        groups: dict[int, list[NewJob]] = {0: list(jobs)}
        if self.partitions > 1:
            groups = {}
            for job in jobs:
                groups.setdefault(partition_of(job.tag, self.partitions), []).append(job)
        chunks = [
            (self.engine.shards[p], group[i : i + PUBLISH_CHUNK])
            for p, group in sorted(groups.items())
            for i in range(0, len(group), PUBLISH_CHUNK)
        ]
        if len(chunks) > 1:  # several calls are not atomic together: check first
            if not all(job.drawn for job in jobs):  # (tags drawn here do not clash)
                self._precheck_tags(tags)
            room_or_full([(shard, len(chunk)) for shard, chunk in chunks], self.engine)
            group_room_or_full(
                [(shard, j.spec.group or "", 1) for shard, chunk in chunks for j in chunk],
                self.engine,
            )
        batch = self.engine.batch()
        pending = [batch.add(shard.publish(chunk)) for shard, chunk in chunks]
        self.engine.send(batch)
        replies: list[list[tuple[str, str]]] = []
        full: QueueFull | None = None
        for p in pending:
            try:
                replies.append(p.result())
            except QueueFull as exc:  # filled by others since the check
                full = full or exc
                replies.append([("", "full")])  # not written
        if full is not None:  # say what was written
            written = [
                job.tag
                for (_, chunk), found in zip(chunks, replies, strict=True)
                if not found
                for job in chunk
            ]
            raise QueueFull(str(full), written)
        return self._published([chunk for _, chunk in chunks], replies, tags)

    @staticmethod
    def _published(
        chunks: Sequence[Sequence[NewJob]],
        replies: Sequence[list[tuple[str, str]]],
        tags: list[str],
    ) -> list[str]:
        """``tags``, once every chunk's publish reply says written; else DuplicateJob with
        the clashes and the tags that the other chunks did write."""
        published: set[str] = set()
        clashes: list[tuple[str, str]] = []
        for chunk, found in zip(chunks, replies, strict=True):
            if not found:
                published.update(job.tag for job in chunk)
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
        dupes = []
        for t in tags:
            if t in seen:
                dupes.append(t)
            seen.add(t)
        if dupes:
            raise DuplicateJob(dupes, ["batch"] * len(dupes))
        by_shard: dict[int, list[str]] = {}
        for t in tags:
            by_shard.setdefault(partition_of(t, self.partitions), []).append(t)
        chunks = [
            (self.engine.shards[p].keys, ts[i : i + PUBLISH_CHUNK])
            for p, ts in by_shard.items()
            for i in range(0, len(ts), PUBLISH_CHUNK)
        ]
        with unavailable_as_error():
            pipe = self.engine.client.pipeline(transaction=False)
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
            states = [
                self.engine.run(self.engine.shard_for(t).state(t)) or "unknown" for t in taken
            ]
            raise DuplicateJob(taken, states)
