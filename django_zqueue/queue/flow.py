"""Workflows in the queue core: jobs that wait for parents, and the dispatch of a job's
end to its dependents (docs/workflows.md).

A job's end is recorded **in its own slot**, in the same script call as the end itself
(``ack``, ``nack``/``scan`` burying it, ``delete``): an entry in its shard's outbox
(``wf_out``/``wf_res``, see ``lua/_wf_mark.lua``). :meth:`Flows.dispatch` then applies it
to each dependent **in the dependent's slot** (``wf_resolve.lua``, idempotent: each
parent counts once per dependent) and clears the entry (``wf_clear.lua``). A crash
between the two leaves the entry, and the scanner's :meth:`Flows.drain` applies it again:
exactly-once across queues and Redis Cluster slots, without a cross-slot transaction.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from .. import conf
from ..connection import unavailable_as_error
from ..exceptions import DuplicateJob, InvalidArgument, UnknownQueue, ZQueueError
from ..links import (
    MAX_LINKS,
    FlowJob,
    Kid,
    Links,
    Ref,
    Resolution,
    Resolved,
    kids_or_none,
)
from ..links import passed_results as decode_results
from ..records import NewJob
from ..scripts import Call
from .base import RESOLVER, QueueBase
from .orphans import dependents_of
from .publish import PUBLISH_CHUNK, Publishing, room_or_full

#: entries one ``wf_resolve`` call applies, and outbox entries one drain step reads
RESOLVE_CHUNK = 100
#: cascades (a dependent buried for a failed parent, with dependents of its own) one
#: dispatch follows; deeper ones are left to the scanner's next drain
CASCADE_ROUNDS = 20


def use_resolver(resolve: Callable[[str], QueueBase]) -> None:
    """How a queue finds another queue by name (``django_zqueue.queue.get_queue``)."""
    RESOLVER[:] = [resolve]


def parse_ref(value: Any, default_queue: str) -> Ref:
    """A parent given as a tag (of ``default_queue``), a ``(queue, tag)`` pair, or any
    object with ``id`` and ``queue_name`` (a task's ``Job``)."""
    if isinstance(value, str):
        return Ref(default_queue, value)
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(x, str) for x in value):
        return Ref(value[0], value[1])
    tag, queue = getattr(value, "id", None), getattr(value, "queue_name", None)
    if isinstance(tag, str) and isinstance(queue, str):
        return Ref(queue, tag)
    raise InvalidArgument(
        f"depends_on takes job tags, (queue, tag) pairs or Job handles; got {value!r}"
    )


class Flows(Publishing):
    """The workflow side of a queue."""

    def queue_named(self, name: str) -> Flows:
        """This queue, or another configured queue of the same Redis."""
        found = self.other(name)
        if not isinstance(found, Flows):
            raise InvalidArgument(f"queue {name!r} is not known here")
        return found

    # ----------------------------------------------------------------- publishing

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
        depends_on: Iterable[Any] | None = None,
    ) -> str:
        """As :meth:`Publishing.publish`; with ``depends_on`` (tags of this queue,
        ``(queue, tag)`` pairs or ``Job`` handles) the job waits (state ``waiting``)
        until every parent has succeeded: see :meth:`publish_after`. ``depends_on`` does
        not go with ``debounce`` or ``unique_for``."""
        if depends_on is None:
            return super().publish(
                body,
                tag,
                priority,
                score,
                delay,
                run_at,
                max_retries=max_retries,
                visibility_timeout=visibility_timeout,
                debounce=debounce,
                unique_for=unique_for,
                group=group,
                expires=expires,
            )
        if debounce is not None or unique_for is not None:
            raise InvalidArgument("depends_on does not go with debounce or unique_for")
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
        return self.publish_after(job, depends_on)

    def publish_after(self, job: NewJob, depends_on: Iterable[Any]) -> str:
        """Publish ``job`` waiting for existing jobs: it enters the line once all have
        succeeded, exactly once. A parent that is no longer in its queue (finished, or
        never published) counts as succeeded; a dead one as failed (the job then goes to
        dead letters with ``dependency <tag> failed``; requeueing the parent revives it)."""
        if isinstance(depends_on, str | bytes):  # not its characters: one tag each
            raise InvalidArgument(
                f"depends_on takes a list of job tags, (queue, tag) pairs or Job handles, "
                f"not a single {type(depends_on).__name__}: depends_on=[{depends_on!r}]"
            )
        parents = tuple(parse_ref(p, self.name) for p in depends_on)
        if Ref(self.name, job.tag) in parents:
            raise InvalidArgument(f"job {job.tag!r} cannot depend on itself")
        if not parents:
            return self.publish_prepared([job])[0]
        if len(parents) > MAX_LINKS or len(set(parents)) != len(parents):
            raise InvalidArgument(f"depends_on takes 1..{MAX_LINKS} distinct jobs")
        if job.spec.delay_ms is not None or job.spec.run_at_ms is not None:
            raise InvalidArgument("a job that depends on others cannot also be delayed")
        self.ensure_layout()
        found = self.run(self.shard_for(job.tag).wf_publish([FlowJob(job, parents)]))
        if found:
            raise DuplicateJob([t for t, _ in found], [s for _, s in found])
        self.link_parents(job.tag, parents)
        return job.tag

    def link_parents(self, tag: str, parents: Sequence[Ref]) -> None:
        """Register waiting job ``tag`` with each parent (one ``wf_link`` each, in one
        round trip); parents already finished or dead are applied at once."""
        calls = [
            self.queue_named(p.queue)
            .shard_for(p.tag)
            .wf_link(p.tag, json.dumps([self.name, tag, i]), MAX_LINKS)
            for i, p in enumerate(parents, 1)
        ]
        states = self.run_all(calls)
        now = [
            Resolution(tag, i, "1" if state == "" else "0", "null" if state == "" else "", p.tag)
            for i, (p, state) in enumerate(zip(parents, states, strict=True), 1)
            if state != "linked"
        ]
        for i in range(0, len(now), RESOLVE_CHUNK):
            self.run(self.shard_for(tag).wf_resolve(now[i : i + RESOLVE_CHUNK]))

    def flow_calls(
        self, jobs: Sequence[FlowJob]
    ) -> list[tuple[Call[list[tuple[str, str]]], list[str]]]:
        """The ``wf_publish`` calls of jobs of this queue (per shard, per 100 jobs), each
        with the tags it writes."""
        self.ensure_layout()
        groups: dict[int, list[FlowJob]] = {}
        for fj in jobs:
            groups.setdefault(self.shard_for(fj.job.tag).index, []).append(fj)
        return [
            (
                self.shards[s].wf_publish(group[i : i + PUBLISH_CHUNK]),
                [fj.job.tag for fj in group[i : i + PUBLISH_CHUNK]],
            )
            for s, group in sorted(groups.items())
            for i in range(0, len(group), PUBLISH_CHUNK)
        ]

    # ----------------------------------------------------------------- dispatch

    def dispatch(self, tags: Sequence[str]) -> int:
        """Apply the outbox entries of jobs ``tags`` of this queue to their dependents,
        then of the dependents buried on the way (up to ``CASCADE_ROUNDS`` levels; the
        scanner's drain goes on from there). Returns the entries applied. Idempotent: any
        number of processes may dispatch the same entries."""
        work: dict[str, set[str]] = {self.name: set(tags)}
        done = 0
        for _ in range(CASCADE_ROUNDS):
            nxt: dict[str, set[str]] = {}
            for name, batch in work.items():
                applied, cascade = self.queue_named(name).dispatch_once(sorted(batch))
                done += applied
                for ref in cascade:
                    nxt.setdefault(ref.queue, set()).add(ref.tag)
            if not nxt:
                break
            work = nxt
        return done

    def settle_ends(self, tags: Sequence[str]) -> None:
        """Dispatch the ends of jobs ``tags`` just cancelled or deleted (one round trip
        more when they were not workflow jobs); a failure is left to the scanner."""
        with contextlib.suppress(ZQueueError):
            self.dispatch(tags)

    def read_outbox(self, tags: Sequence[str]) -> list[tuple[str, bytes, list[Kid]]]:
        """(tag, entry, dependents) of each of ``tags`` that has an outbox entry."""
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            for t in tags:
                k = self.keys_for(t)
                pipe.hget(k.wf_res, t)
                pipe.hget(k.wf(t), "kids")
            replies = pipe.execute()
        out = []
        for i, t in enumerate(tags):
            if replies[2 * i] is None:
                continue
            kids = kids_or_none(replies[2 * i + 1])
            if kids is None:  # its list of dependents is corrupt: find them from theirs
                kids = dependents_of(self.name, t, self.configured_queues())
            out.append((t, replies[2 * i], kids))
        return out

    def configured_queues(self) -> list[Flows]:
        """Every queue of the settings, as this process would open it (this one included,
        when it is not in the settings)."""
        names = [n for n in conf.get_config().queues if n != self.name]
        return [self, *(self.queue_named(n) for n in names)]

    def dispatch_once(self, tags: Sequence[str]) -> tuple[int, list[Ref]]:
        """One level of :meth:`dispatch`: the entries applied and the buried dependents
        whose own entries are to be dispatched next. A dependent whose links are corrupt
        is skipped; an entry with a dependent in a queue this process does not know is
        applied to the others and kept (not cleared) for a process that knows it."""
        entries = self.read_outbox(tags)
        if not entries:
            return 0, []
        groups: dict[tuple[str, int], list[Resolution]] = {}
        kept: set[str] = set()  # entries with a dependent in a queue not configured here
        for tag, entry, kids in entries:
            end = entry[:1].decode("ascii", "replace")
            result = entry[1:].decode("utf-8") if end == "1" else ""
            for kid in kids:
                if not kid.tag or not 1 <= kid.place <= MAX_LINKS:
                    continue  # corrupt links: nothing to apply (not a poison entry)
                try:
                    owner = self.queue_named(kid.queue)
                except (UnknownQueue, InvalidArgument):
                    # not configured in this process (a rolling deploy, a queue removed):
                    # the entry stays for a process that knows it; the others go on
                    kept.add(tag)
                    continue
                shard = owner.shard_for(kid.tag)
                groups.setdefault((kid.queue, shard.index), []).append(
                    Resolution(kid.tag, kid.place, end, result, tag)
                )
        calls: list[Call[Resolved]] = []
        owners: list[str] = []
        for (name, index), group in groups.items():
            shard = self.queue_named(name).shards[index]
            for i in range(0, len(group), RESOLVE_CHUNK):
                calls.append(shard.wf_resolve(group[i : i + RESOLVE_CHUNK]))
                owners.append(name)
        resolved = self.run_all(calls) if calls else []
        clear = [self.shard_for(t).wf_clear(t, e) for t, e, _ in entries if t not in kept]
        if clear:
            self.run_all(clear)
        cascade = [Ref(o, t) for o, r in zip(owners, resolved, strict=True) for t in r.cascade]
        return len(entries) - len(kept), cascade

    def drain(self, limit: int = RESOLVE_CHUNK) -> int:
        """The scanner's part: dispatch up to ``limit`` outbox entries of each shard (what
        a worker did not dispatch, or a crash interrupted). Returns how many."""
        total = 0
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            for s in self.shards:
                pipe.zrange(s.keys.wf_out, 0, limit - 1)
            found = pipe.execute()
        tags = sorted({t.decode("utf-8") for ts in found for t in ts})
        if tags:
            total = self.dispatch(tags)
        return total

    # ----------------------------------------------------------------- reading

    def links(self, tag: str) -> Links | None:
        """Job ``tag``'s parents and dependents (None: it has none, or it is gone)."""
        with unavailable_as_error():
            raw = self.client.hgetall(self.keys_for(tag).wf(tag))
        return Links.decode(raw)

    def passed_results(self, tag: str) -> list[Any]:
        """The results job ``tag``'s parents passed on, in the order of its parents
        (``LookupError`` when one is missing)."""
        with unavailable_as_error():
            raw = self.client.hgetall(self.keys_for(tag).wf(tag))
        return decode_results(raw)

    def outbox_size(self) -> int:
        """Entries waiting for dispatch (all shards)."""
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            for s in self.shards:
                pipe.zcard(s.keys.wf_out)
            return sum(int(n) for n in pipe.execute())


def publish_flow(parts: Sequence[tuple[Flows, FlowJob]]) -> list[str]:
    """Publish the jobs of a workflow over any queues: first every job that waits for
    parents (they cannot run yet), then the others, so a parent never ends before its
    dependents exist. Tags and room (``max_length``) are checked first (nothing written
    on a clash or a full queue). If a step fails, every job already written by this call
    is deleted again."""
    if not parts:
        return []
    check_free(parts)
    check_room([(q, fj) for q, fj in parts if not fj.need])
    first = [(q, fj) for q, fj in parts if fj.need]
    second = [(q, fj) for q, fj in parts if not fj.need]
    written: list[tuple[Flows, str]] = []
    try:
        for step in (first, second):
            _send_step(step, written)
    except Exception:
        for q, tag in written:
            with contextlib.suppress(Exception):  # the original error says more
                q.run(q.shard_for(tag).delete(tag, False))
        raise
    return [fj.job.tag for _, fj in parts]


def _send_step(step: Sequence[tuple[Flows, FlowJob]], written: list[tuple[Flows, str]]) -> None:
    """Send one step's calls in one round trip; add to ``written`` the tags of each call
    that wrote its jobs (a call refused on a clash or a full queue wrote nothing)."""
    by_queue: dict[str, tuple[Flows, list[FlowJob]]] = {}
    for q, fj in step:
        by_queue.setdefault(q.name, (q, []))[1].append(fj)
    calls = [(q, call, tags) for q, jobs in by_queue.values() for call, tags in q.flow_calls(jobs)]
    if not calls:
        return
    head = next(iter(by_queue.values()))[0]
    batch = head.batch()
    pending = [batch.add(call) for _, call, _ in calls]
    head.send(batch)
    clashes: list[tuple[str, str]] = []
    for (q, _, tags), p in zip(calls, pending, strict=True):
        if p.failed is None and not p.result():
            written.extend((q, t) for t in tags)
    for p in pending:
        clashes.extend(p.result())  # the first failed call raises
    if clashes:
        raise DuplicateJob([t for t, _ in clashes], [s for _, s in clashes])


def check_room(parts: Sequence[tuple[Flows, FlowJob]]) -> None:
    """QueueFull (nothing written) when the jobs that enter a line now do not fit in
    their shard's ``max_length``: one round trip, only for queues with a limit."""
    need: dict[tuple[str, int], tuple[Flows, int]] = {}
    for q, fj in parts:
        if q.policy.max_length:
            key = (q.name, q.shard_for(fj.job.tag).index)
            need[key] = (q, need.get(key, (q, 0))[1] + 1)
    if need:
        room_or_full([(q.shards[i], n) for (_, i), (q, n) in need.items()], parts[0][0])


def check_free(parts: Sequence[tuple[Flows, FlowJob]]) -> None:
    """DuplicateJob (nothing written) when a tag is used twice or is taken."""
    seen: set[Ref] = set()
    dupes = []
    for q, fj in parts:
        ref = Ref(q.name, fj.job.tag)
        if ref in seen:
            dupes.append(ref.tag)
        seen.add(ref)
    if dupes:
        raise DuplicateJob(dupes, ["batch"] * len(dupes))
    head = parts[0][0]
    with unavailable_as_error():
        pipe = head.client.pipeline(transaction=False)
        for q, fj in parts:
            pipe.hexists(q.keys_for(fj.job.tag).meta, fj.job.tag)
        taken = [(q, fj) for (q, fj), t in zip(parts, pipe.execute(), strict=True) if t]
    if taken:  # rare: one more round trip to name each clash's state, as publish does
        calls = [q.shard_for(fj.job.tag).state(fj.job.tag) for q, fj in taken]
        states = head.run_all(calls)
        raise DuplicateJob([fj.job.tag for _, fj in taken], [s or "unknown" for s in states])
