"""Sets of prepared jobs, of one or more queues on one Redis, published in one round trip
(:func:`publish_sets`): what a transaction's commit sends for the jobs enqueued in it.

Each set is what one caller prepared (one ``enqueue``): it succeeds or fails on its own,
as if it had been published alone with :meth:`Queue.publish_prepared`. To save script
calls, the sets that go to one shard share a ``publish`` call (up to 100 jobs and
``PUBLISH_CALL_BYTES`` of bodies, whole sets only); all calls go in one pipeline.
``publish.lua`` writes all of a call's jobs or none, so a call refused as a whole (a tag
in use, ``max_length`` reached) is sent again one call per set, in one more round trip:
each set then gets its own answer, and no job of the other sets is lost or written twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..conf.bounds import PUBLISH_CALL_BYTES
from ..engine import PUBLISH_CHUNK, cut_calls
from ..engine.records import NewJob
from ..engine.redis.connection import UNAVAILABLE_ERRORS
from ..engine.scripts import Call, Pending
from ..exceptions import DuplicateJob, QueueUnavailable

if TYPE_CHECKING:
    from ..engine import Engine
    from .core import Queue

#: a set's outcome: None (all its jobs written), or why nothing of it was
Outcome = BaseException | None
#: one publish call: its queue's engine and shard index, and the sets (indexes) whose jobs
#: it carries
_Planned = tuple["Engine", int, list[int]]


def publish_sets(sets: Sequence[tuple[Queue, Sequence[NewJob]]]) -> list[Outcome]:
    """Publish each ``(queue, jobs)`` set, in order; the outcome of each set.

    A set of one call (``cut_calls``: at most 100 jobs and ``PUBLISH_CALL_BYTES`` of
    bodies, or one job) of one shard joins the shared calls of one round trip; a
    larger set, or one spread over partitions, is sent alone by ``publish_prepared`` at
    its place in the order (the round trips it needs, its tags checked first). A set
    whose queue cannot check its partition layout fails with that error. A connection
    error fails every set of the round trip it broke (their jobs may or may not be
    written: Redis did not answer). Nothing is raised."""
    outcomes: list[Outcome] = [None] * len(sets)
    run: list[int] = []  # sets that share the next round trip
    for i, (queue, jobs) in enumerate(sets):
        try:
            queue.engine.layout.ensure()
        except Exception as exc:
            outcomes[i] = exc
            continue
        if _shard_of(queue, jobs) is not None:
            run.append(i)
            continue
        _send_shared(sets, run, outcomes)
        run = []
        try:
            queue.publish_prepared(jobs)
        except Exception as exc:
            outcomes[i] = exc
    _send_shared(sets, run, outcomes)
    return outcomes


def _body(job: NewJob) -> bytes:
    return job.body


def _shard_of(queue: Queue, jobs: Sequence[NewJob]) -> int | None:
    """The index of the one shard all of ``jobs`` go to, if they fit one call; else None."""
    if not jobs or len(jobs) > PUBLISH_CHUNK or len(cut_calls(jobs, _body)) > 1:
        return None
    sets = queue.engine.sets
    shard = sets.shard_index(jobs[0].tag)
    if any(sets.shard_index(j.tag) != shard for j in jobs[1:]):
        return None
    return shard


def _plan(sets: Sequence[tuple[Queue, Sequence[NewJob]]], run: list[int]) -> list[_Planned]:
    """The shared calls of the sets ``run``: per shard, whole sets in order, at most
    :data:`PUBLISH_CHUNK` jobs and ``PUBLISH_CALL_BYTES`` of bodies a call (a set that
    alone is larger has a call of its own)."""
    calls: list[_Planned] = []
    # (id(engine), shard index) -> its call being filled, its jobs and bytes of bodies
    open_call: dict[tuple[int, int], tuple[_Planned, int, int]] = {}
    for i in run:
        queue, jobs = sets[i]
        engine = queue.engine
        shard = engine.sets.shard_index(jobs[0].tag)
        size = sum(len(j.body) for j in jobs)
        current, count, held = open_call.get((id(engine), shard), (None, 0, 0))
        if current is None or count + len(jobs) > PUBLISH_CHUNK or held + size > PUBLISH_CALL_BYTES:
            current, count, held = (engine, shard, []), 0, 0
            calls.append(current)
        current[2].append(i)
        open_call[(id(engine), shard)] = (current, count + len(jobs), held + size)
    return calls


def _send_shared(
    sets: Sequence[tuple[Queue, Sequence[NewJob]]], run: list[int], outcomes: list[Outcome]
) -> None:
    """Send the sets ``run`` in one round trip; a call refused as a whole, carrying
    several sets, is sent again one call per set (one more round trip)."""
    if not run:
        return
    planned = _plan(sets, run)
    calls = [
        engine.sets.publish_call(shard, [j for i in members for j in sets[i][1]])
        for engine, shard, members in planned
    ]
    again: list[int] = []
    for (_, _, members), outcome in zip(planned, _send(sets[run[0]][0], calls), strict=True):
        if outcome is not None and len(members) > 1 and not _unavailable(outcome):
            again.extend(members)
        else:
            for i in members:
                outcomes[i] = outcome
    if again:
        alone = [_alone(sets[i][0], sets[i][1]) for i in again]
        for i, outcome in zip(again, _send(sets[again[0]][0], alone), strict=True):
            outcomes[i] = outcome


def _alone(queue: Queue, jobs: Sequence[NewJob]) -> Call[list[tuple[str, str]]]:
    """The publish call of one set (of one shard) alone."""
    sets = queue.engine.sets
    return sets.publish_call(sets.shard_index(jobs[0].tag), jobs)


def _send(queue: Queue, calls: list[Call[list[tuple[str, str]]]]) -> list[Outcome]:
    """Send publish ``calls`` in one round trip (one call: a plain EVALSHA), and the
    outcome of each (a failed round trip: its error, for every call). Every queue of a
    Django project shares one client, so one engine's pipeline carries the calls of all
    (on a Redis Cluster: one round trip per node, as redis-py's cluster pipeline sends)."""
    engine = queue.engine
    if len(calls) == 1:
        try:
            return [_clashes(engine.run(calls[0]))]
        except Exception as exc:
            return [exc]
    batch = engine.batch()
    pending = [batch.add(call) for call in calls]
    try:
        engine.send(batch)
    except Exception as exc:
        return [exc] * len(calls)
    return [_reply(p) for p in pending]


def _reply(pending: Pending[list[tuple[str, str]]]) -> Outcome:
    try:
        return _clashes(pending.result())
    except Exception as exc:
        return exc


def _clashes(found: list[tuple[str, str]]) -> Outcome:
    """A publish call's clashes as an outcome: None (written), or DuplicateJob."""
    if found:
        return DuplicateJob([t for t, _ in found], [s for _, s in found])
    return None


def _unavailable(outcome: BaseException) -> bool:
    """Redis did not answer (or not for this call): sending again now would not help."""
    return isinstance(outcome, (QueueUnavailable, UNAVAILABLE_ERRORS))
