"""The engine's write verbs for new jobs (``engine.writes``): publishing jobs made by
``Queue.prepare`` (:class:`~.records.NewJob`), cut into script calls of at most
``MAX_PUBLISH_JOBS`` jobs and ``PUBLISH_CALL_BYTES`` of bodies (conf/bounds.py), one round
trip per ``PUBLISH_WINDOW`` calls, with the room and clash checks a publish that spans
several script calls makes first; and one job under a tag with the debounce and
unique-for rules of ``publish_once``. The queue (``queue/publish.py``,
``queue/once.py``) validates and encodes; it holds no client, sends no command and
knows no key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from ..conf.bounds import PUBLISH_WINDOW
from ..exceptions import DuplicateJob, QueueFull, ZQueueError
from .flow import PUBLISH_CHUNK, cut_calls
from .keys import partition_of
from .layout import Layout
from .lean import LeanPublish
from .records import NewJob
from .records.spec import JobSpec
from .redis.connection import unavailable_as_error
from .scripts import takes_lean
from .shard import Shard

if TYPE_CHECKING:
    from .flow import Flow

__all__ = ["OnceResult", "Writes", "group_room_or_full", "room_or_full"]

#: what :meth:`Writes.publish_once` did: a new job, or a waiting one debounced
OnceResult = Literal["new", "replaced"]


def room_or_full(counts: Sequence[tuple[Shard, int]], engine: Flow) -> None:
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
        pipe = engine._client.pipeline(transaction=False)
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


def group_room_or_full(counts: Sequence[tuple[Shard, str, int]], engine: Flow) -> None:
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


def _body(job: NewJob) -> bytes:
    return job.body


def _stopped(
    exc: BaseException, tags: list[str], written: set[str], unknown: set[str]
) -> BaseException:
    """``exc``, the error that stopped a publish of ``tags`` cut into several calls,
    telling which jobs were written (``published``: answered written; ``unconfirmed``:
    sent in the round trip that got no answer) and which were not sent."""
    published = [t for t in tags if t in written]
    unconfirmed = [t for t in tags if t in unknown]
    rest = len(tags) - len(published) - len(unconfirmed)
    if isinstance(exc, ZQueueError):
        exc.published, exc.unconfirmed = published, unconfirmed
    exc.add_note(
        f"publish of {len(tags)} jobs stopped: {len(published)} were written (.published), "
        f"{len(unconfirmed)} were sent without an answer (.unconfirmed), {rest} were not"
    )
    return exc


class Writes:
    """The write verbs of one queue's engine (``engine.writes``) for new jobs. Connection
    errors become ``QueueUnavailable``."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Flow) -> None:
        self._engine = engine

    def publish(self, jobs: Sequence[NewJob]) -> list[str]:
        """Send jobs made by ``Queue.prepare``: script calls per shard cut by
        :func:`~.flow.cut_calls` (``MAX_PUBLISH_JOBS`` jobs or ``PUBLISH_CALL_BYTES`` of
        bodies), one round trip per ``PUBLISH_WINDOW`` calls; their tags in order. A
        publish that spans several script calls is checked first (tags given by the caller
        for clashes, then the room of each shard and group). A call that fails stops the
        publish at the end of its round trip: the error's ``published`` lists the jobs
        written (:class:`DuplicateJob` and :class:`QueueFull` when another client got in
        between; any other error too, ``unconfirmed`` the jobs of a round trip that got
        no answer)."""
        e = self._engine
        if not jobs:
            return []
        Layout(e).ensure()
        if len(jobs) == 1:  # one job, one script call: atomic, no clash precheck
            found = e.run(e._shard_for(jobs[0].tag).publish(jobs))
            if found:
                raise DuplicateJob([t for t, _ in found], [s for _, s in found])
            return [jobs[0].tag]
        tags = [j.tag for j in jobs]
        groups: dict[int, list[NewJob]] = {0: list(jobs)}
        if e.partitions > 1:
            groups = {}
            for job in jobs:
                groups.setdefault(partition_of(job.tag, e.partitions), []).append(job)
        chunks = [
            (e._shards[p], part)
            for p, group in sorted(groups.items())
            for part in cut_calls(group, _body)
        ]
        if len(chunks) > 1:  # several calls are not atomic together: check first
            if not all(job.drawn for job in jobs):  # (tags drawn here do not clash)
                self._precheck_tags(tags)
            room_or_full([(shard, len(chunk)) for shard, chunk in chunks], e)
            group_room_or_full(
                [(shard, j.spec.group or "", 1) for shard, chunk in chunks for j in chunk], e
            )
        written: set[str] = set()
        for i in range(0, len(chunks), PUBLISH_WINDOW):  # a failed round trip stops here
            self._send_window(chunks[i : i + PUBLISH_WINDOW], written, tags)
        return tags

    def lean(self, spec: JobSpec, limit: int) -> LeanPublish | None:
        """The publish of one job of ``spec`` whose body may hold ``limit`` bytes, made
        once (:class:`~.lean.LeanPublish`: what :meth:`publish` sends for such a job
        alone); None where :meth:`publish` must choose each job's script: a partitioned
        queue (the shard is the tag's), or a queue or spec ``publish_lean.lua`` does not
        take (:func:`~.scripts.takes_lean`)."""
        e = self._engine
        if e.partitions != 1 or not takes_lean(spec, e._shards[0].policy):
            return None
        return LeanPublish(e, e._shards[0], spec, limit)

    def _send_window(
        self, window: Sequence[tuple[Shard, Sequence[NewJob]]], written: set[str], tags: list[str]
    ) -> None:
        """One round trip of :meth:`publish`: its calls' jobs join ``written`` (the tags
        of this publish written so far); a failed call raises its error once the round
        trip is read, its ``published`` the tags written (in ``tags``' order)."""
        e = self._engine
        batch = e.batch()
        pending = [batch.add(shard.publish(chunk)) for shard, chunk in window]
        try:
            e.send(batch)
        except ZQueueError as exc:  # no answer: this round trip's jobs are unknown
            sent = {job.tag for _, chunk in window for job in chunk}
            raise _stopped(exc, tags, written, sent) from exc.__cause__
        clashes: list[tuple[str, str]] = []
        failed: BaseException | None = None
        for (_, chunk), p in zip(window, pending, strict=True):
            try:
                found = p.result()
            except Exception as exc:  # QueueFull (filled by others since the check), ...
                failed = failed or exc
                continue
            if not found:
                written.update(job.tag for job in chunk)
            clashes.extend(found)
        if failed is None and not clashes:
            return
        published = [t for t in tags if t in written]
        if clashes:
            raise DuplicateJob([t for t, _ in clashes], [s for _, s in clashes], published)
        assert failed is not None
        raise _stopped(failed, tags, written, set()) from failed.__cause__

    def publish_once(self, job: NewJob) -> OnceResult:
        """Send one job whose spec holds its ``debounce_ms`` and ``unique_ms`` rules, in
        one script call; :class:`DuplicateJob` (nothing written) when its tag is taken."""
        e = self._engine
        Layout(e).ensure()
        outcome, state = e.run(e._shard_for(job.tag).publish_once(job))
        if outcome == "clash":
            raise DuplicateJob([job.tag], [state])
        return "replaced" if outcome == "replaced" else "new"

    def _precheck_tags(self, tags: list[str]) -> None:
        """:class:`DuplicateJob` (nothing written) when ``tags`` repeat one another or
        name jobs the queue holds: one round trip, and one more to name their states."""
        e = self._engine
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
            by_shard.setdefault(partition_of(t, e.partitions), []).append(t)
        chunks = [
            (e._shards[p].keys, ts[i : i + PUBLISH_CHUNK])
            for p, ts in by_shard.items()
            for i in range(0, len(ts), PUBLISH_CHUNK)
        ]
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
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
            states = [e.run(e._shard_for(t).state(t)) or "unknown" for t in taken]
            raise DuplicateJob(taken, states)
