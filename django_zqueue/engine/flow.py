"""The engine's part of workflows (``engine.flow``): linking a waiting job to its parents, the
``wf_publish`` calls of a workflow's jobs, and the dispatch of a job's end to its
dependents (docs/workflows.md).

A job's end is recorded **in its own slot**, in the same script call as the end itself
(``ack``, ``nack``/``scan`` burying it, ``delete``): an entry in its shard's outbox
(``wf_out``/``wf_res``, see ``lua/_wf_mark.lua``). :meth:`Workflows.dispatch` then applies it
to each dependent **in the dependent's slot** (``wf_resolve.lua``, idempotent: each
parent counts once per dependent) and clears the entry (``wf_clear.lua``). A crash
between the two leaves the entry, and the scanner's :meth:`Workflows.drain` applies it again:
exactly-once across queues and Redis Cluster slots, without a cross-slot transaction.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from typing import TypeVar

from .. import conf
from ..conf.bounds import MAX_PUBLISH_JOBS, PUBLISH_CALL_BYTES
from ..exceptions import InvalidArgument, UnknownQueue, ZQueueError
from .base import RESOLVER, Core, use_resolver
from .layout import Layout
from .orphans import dependents_of
from .records.links import MAX_LINKS, FlowJob, Kid, Ref, Resolution, Resolved, kids_or_none
from .redis.connection import unavailable_as_error
from .scripts import Call

__all__ = [
    "CASCADE_ROUNDS",
    "PUBLISH_CHUNK",
    "RESOLVER",
    "RESOLVE_CHUNK",
    "Flow",
    "Workflows",
    "cut_calls",
    "use_resolver",
]

#: at most this many jobs per publish script call, so one call stays short (the bound
#: ``conf.bounds.MAX_PUBLISH_JOBS``; :func:`cut_calls` also cuts by bytes of bodies)
PUBLISH_CHUNK = MAX_PUBLISH_JOBS
#: at most this many ``wf_resolve`` entries per call, and outbox entries per drain step
RESOLVE_CHUNK = 100
#: cascades (a dependent buried for a failed parent, with dependents of its own) one
#: dispatch follows; deeper ones are left to the scanner's next drain
CASCADE_ROUNDS = 20

J = TypeVar("J")


def _flow_body(fj: FlowJob) -> bytes:
    return fj.job.body


def cut_calls(jobs: Sequence[J], body: Callable[[J], bytes]) -> list[Sequence[J]]:
    """``jobs`` (of one shard) cut, in order, into the jobs of each publish script call:
    at most ``MAX_PUBLISH_JOBS`` jobs and ``PUBLISH_CALL_BYTES`` bytes of bodies
    (``body``: a job's encoded body) a call, whichever comes first; a job whose body
    alone is larger goes in a call of its own (conf/bounds.py)."""
    calls: list[Sequence[J]] = []
    start, size = 0, 0
    for i, job in enumerate(jobs):
        n = len(body(job))
        if i > start and (i - start == MAX_PUBLISH_JOBS or size + n > PUBLISH_CALL_BYTES):
            calls.append(jobs[start:i])
            start, size = i, 0
        size += n
    if start < len(jobs):
        calls.append(jobs[start:])
    return calls


class Workflows:
    """Workflow links and the dispatch of ends, as script calls (``engine.flow``); across
    queues, the engines of the others by name (:meth:`~.base.Core.other`)."""

    __slots__ = ("_engine", "_layout")

    def __init__(self, engine: Core) -> None:
        self._engine = engine
        self._layout = Layout(engine)

    def _of(self, name: str) -> Workflows:
        """The workflow verbs of this queue, or of another configured queue by name."""
        return self if name == self._engine.name else Workflows(self._engine.other(name))

    def link_parents(self, tag: str, parents: Sequence[Ref]) -> None:
        """Register waiting job ``tag`` with each parent (one ``wf_link`` each, in one
        round trip); parents already finished or dead are applied at once."""
        e = self._engine
        calls = [
            e.other(p.queue)
            ._shard_for(p.tag)
            .wf_link(p.tag, json.dumps([e.name, tag, i]), MAX_LINKS)
            for i, p in enumerate(parents, 1)
        ]
        states = e.run_all(calls)
        now = [
            Resolution(tag, i, "1" if state == "" else "0", "null" if state == "" else "", p.tag)
            for i, (p, state) in enumerate(zip(parents, states, strict=True), 1)
            if state != "linked"
        ]
        for i in range(0, len(now), RESOLVE_CHUNK):
            e.run(e._shard_for(tag).wf_resolve(now[i : i + RESOLVE_CHUNK]))

    def flow_calls(
        self, jobs: Sequence[FlowJob]
    ) -> list[tuple[Call[list[tuple[str, str]]], list[str]]]:
        """The ``wf_publish`` calls of jobs of this queue (per shard, cut by
        :func:`cut_calls`), each with the tags it writes."""
        e = self._engine
        self._layout.ensure()
        groups: dict[int, list[FlowJob]] = {}
        for fj in jobs:
            groups.setdefault(e._shard_for(fj.job.tag).index, []).append(fj)
        return [
            (e._shards[s].wf_publish(part), [fj.job.tag for fj in part])
            for s, group in sorted(groups.items())
            for part in cut_calls(group, _flow_body)
        ]

    # ----------------------------------------------------------------- dispatch

    def dispatch(self, tags: Sequence[str]) -> int:
        """Apply the outbox entries of jobs ``tags`` of this queue to their dependents,
        then of the dependents buried on the way (up to ``CASCADE_ROUNDS`` levels; the
        scanner's drain goes on from there). Returns the entries applied. Idempotent: any
        number of processes may dispatch the same entries."""
        work: dict[str, set[str]] = {self._engine.name: set(tags)}
        done = 0
        for _ in range(CASCADE_ROUNDS):
            nxt: dict[str, set[str]] = {}
            for name, batch in work.items():
                applied, cascade = self._of(name).dispatch_once(sorted(batch))
                done += applied
                for ref in cascade:
                    nxt.setdefault(ref.queue, set()).add(ref.tag)
            if not nxt:
                break
            work = nxt
        return done

    def settle_ends(self, tags: Sequence[str]) -> None:
        """After jobs ``tags`` of this queue ended outside a worker (cancelled, deleted):
        send their workflow ends on now, so that their tags, free again at once, carry no
        end of theirs to a new job (one round trip more when they were not workflow
        jobs); a failure is left to the scanner's drain."""
        with contextlib.suppress(ZQueueError):
            self.dispatch(tags)

    def read_outbox(self, tags: Sequence[str]) -> list[tuple[str, bytes, list[Kid]]]:
        """(tag, entry, dependents) of each of ``tags`` that has an outbox entry."""
        e = self._engine
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            for t in tags:
                k = e._keys_for(t)
                pipe.hget(k.wf_res, t)
                pipe.hget(k.wf(t), "kids")
            replies = pipe.execute()
        out = []
        for i, t in enumerate(tags):
            if replies[2 * i] is None:
                continue
            kids = kids_or_none(replies[2 * i + 1])
            if kids is None:  # its list of dependents is corrupt: find them from theirs
                kids = dependents_of(e.name, t, self.configured_engines())
            out.append((t, replies[2 * i], kids))
        return out

    def configured_engines(self) -> list[Core]:
        """The engine of every queue of the settings, as this process would open it (this
        one included, when it is not in the settings)."""
        e = self._engine
        names = [n for n in conf.get_config().queues if n != e.name]
        return [e, *(e.other(n) for n in names)]

    def dispatch_once(self, tags: Sequence[str]) -> tuple[int, list[Ref]]:
        """One level of :meth:`dispatch`: the entries applied and the buried dependents
        whose own entries are to be dispatched next. A dependent whose links are corrupt
        is skipped; an entry with a dependent in a queue this process does not know is
        applied to the others and kept (not cleared) for a process that knows it."""
        e = self._engine
        entries = self.read_outbox(tags)
        if not entries:
            return 0, []
        groups: dict[tuple[str, int], list[Resolution]] = {}
        kept: set[str] = set()  # entries with a dependent in a queue not configured here
        for tag, entry, kids in entries:
            end = entry[:1].decode("ascii", "replace")
            # succeeded: the result; failed: the reason (dead, cancelled, deleted, expired)
            result = entry[1:].decode("utf-8", "replace") if end in ("1", "0") else ""
            for kid in kids:
                if not kid.tag or not 1 <= kid.place <= MAX_LINKS:
                    continue  # corrupt links: nothing to apply (not a poison entry)
                try:
                    owner = e.other(kid.queue)
                except (UnknownQueue, InvalidArgument):
                    # not configured in this process (a rolling deploy, a queue removed):
                    # the entry stays for a process that knows it; the others go on
                    kept.add(tag)
                    continue
                shard = owner._shard_for(kid.tag)
                groups.setdefault((kid.queue, shard.index), []).append(
                    Resolution(kid.tag, kid.place, end, result, tag)
                )
        calls: list[Call[Resolved]] = []
        owners: list[str] = []
        for (name, index), group in groups.items():
            shard = e.other(name)._shards[index]
            for i in range(0, len(group), RESOLVE_CHUNK):
                calls.append(shard.wf_resolve(group[i : i + RESOLVE_CHUNK]))
                owners.append(name)
        resolved = e.run_all(calls) if calls else []
        clear = [e._shard_for(t).wf_clear(t, x) for t, x, _ in entries if t not in kept]
        if clear:
            e.run_all(clear)
        cascade = [Ref(o, t) for o, r in zip(owners, resolved, strict=True) for t in r.cascade]
        return len(entries) - len(kept), cascade

    def drain(self, limit: int = RESOLVE_CHUNK) -> int:
        """The scanner's part: dispatch up to ``limit`` outbox entries of each shard (what
        a worker did not dispatch, or a crash interrupted). Returns how many."""
        e = self._engine
        total = 0
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            for s in e._shards:
                pipe.zrange(s.keys.wf_out, 0, limit - 1)
            found = pipe.execute()
        tags = sorted({t.decode("utf-8") for ts in found for t in ts})
        if tags:
            total = self.dispatch(tags)
        return total


#: the old name of the engine type the workflow verbs took: the core (which resolves the
#: other queues by name, :meth:`~.base.Core.other`); for the type hints that still use it
Flow = Core
