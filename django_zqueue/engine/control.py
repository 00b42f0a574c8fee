"""The engine's control verbs (``engine.control``): what an operator does to one job or
to the whole queue, as named verbs with typed values. :mod:`django_zqueue.queue.control`,
:mod:`~django_zqueue.queue.core` and :mod:`~django_zqueue.queue.bulk` validate the input
and shape the answers; they hold no client, send no command and know no key.

One job: cancel (``cancel.lua``), its cancel record, run now (``run_now.lua``), a new
priority (``set_priority.lua``), delete (``delete.lua``), requeue a dead letter
(``requeue_dead.lua``). The whole queue: pause, resume, whether paused (one small key per
shard, which ``claim.lua`` reads), purge the dead letters, one housekeeping step
(``scan.lua``): the removal and housekeeping of ``queue/core.py`` are control of the
queue too, hence here. A bulk action walks one shard's set of a state from a cursor
(:meth:`Control.state_top`, :meth:`Control.range_after`, :meth:`Control.listed`) and acts
on a chunk of jobs in one round trip (:meth:`Control.act`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..events import kv, log
from .flow import Workflows
from .records import ScanResult, decode_json, from_ms
from .records.attempts import last_error
from .records.codec import split_record
from .redis.connection import unavailable_as_error
from .scripts.replies import CancelReply, DeleteReply, MoveReply, RequeueReply

if TYPE_CHECKING:
    from .flow import Flow
    from .scripts import Call

__all__ = ["BULK_DONE", "BulkEntry", "BulkOutcome", "CancelledJob", "Control", "read_cancelled"]

#: the sorted set of a state, by its name in QueueKeys
_SET = {"waiting": "wait"}
#: the replies that mean "done", by bulk action (each action's own reply type)
BULK_DONE: dict[str, frozenset[Any]] = {
    "requeue": frozenset({RequeueReply.REQUEUED, RequeueReply.REQUEUED_FLOW}),
    "retry_now": frozenset({RequeueReply.REQUEUED, RequeueReply.REQUEUED_FLOW}),
    "delete": frozenset({DeleteReply.DELETED}),
    "cancel": frozenset({CancelReply.WAITING, CancelReply.RUNNING}),
    "run_now": frozenset({MoveReply.MOVED}),
}


@dataclass(frozen=True, slots=True)
class CancelledJob:
    """The record a cancel keeps (the terminal state ``cancelled``) for its TTL."""

    tag: str
    cancelled_at_ms: int
    was: str  # ready, delayed, waiting (for its parents) or leased (running)
    attempts: int  # deliveries before the cancel
    consumer: str | None  # the consumer that ran it, for a running job

    @property
    def cancelled_at(self) -> datetime:
        return from_ms(self.cancelled_at_ms)


def read_cancelled(tag: str, raw: bytes | str | None) -> CancelledJob | None:
    """The cancel record of ``tag`` as Redis holds it; None when absent, or not a record
    this version wrote (read as absent)."""
    if raw is None:
        return None
    try:
        rec = json.loads(raw)
        return CancelledJob(
            tag,
            int(rec["at"]),
            str(rec["was"]),
            int(rec.get("a", 0)),
            None if rec.get("c") is None else str(rec["c"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


@dataclass(frozen=True, slots=True)
class BulkEntry:
    """One job of a bulk action's chunk, as a ``match`` sees it: its body (decoded JSON,
    None when unreadable) and, for a dead job, its last error."""

    tag: str
    score: float
    shard: int
    body: Any
    error: str | None


@dataclass(frozen=True, slots=True)
class BulkOutcome:
    """What a bulk action did to one chunk: the tags done, how many were refused (still
    in the state, a corrupt record), and the workflow jobs requeued (their dependents
    wait again)."""

    done: list[str]
    refused: int
    revived: list[str]


class Control:
    """The control verbs of one queue's engine (``engine.control``). Connection errors
    become ``QueueUnavailable``."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Flow) -> None:
        self._engine = engine

    # ----------------------------------------------------------------- one job

    def cancel(self, tag: str, ttl_ms: int) -> CancelReply:
        """Cancel job ``tag`` (waiting or running), its record kept ``ttl_ms``; when it was
        cancelled, its workflow dependents are told at once (one more round trip)."""
        e = self._engine
        reply = e.run(e._shard_for(tag).cancel(tag, ttl_ms))
        if reply in (CancelReply.WAITING, CancelReply.RUNNING):
            Workflows(e).settle_ends([tag])
        return reply

    def cancelled(self, tag: str) -> CancelledJob | None:
        """The cancel record of job ``tag`` while it is kept; None otherwise."""
        e = self._engine
        with unavailable_as_error():
            raw = e._client.get(e._keys_for(tag).cancelled(tag))
        return read_cancelled(tag, raw)

    def run_now(self, tag: str) -> bool:
        """Move waiting job ``tag`` to the front of the line (on a partitioned queue ahead
        of the other partitions' heads, read first: one more round trip). False when it
        is not waiting in line."""
        e = self._engine
        shard = e._shard_for(tag)
        below = e._front_of_others(shard)
        return e.run(shard.run_now(tag, below)) is MoveReply.MOVED

    def set_priority(self, tag: str, priority: int) -> bool:
        """Give waiting job ``tag`` priority ``priority``. False when it is not waiting in
        line."""
        e = self._engine
        return e.run(e._shard_for(tag).set_priority(tag, priority)) is MoveReply.MOVED

    def delete(self, tag: str) -> bool:
        """Remove job ``tag`` (ready, delayed, waiting or dead) with its record; when it
        was, its workflow dependents are told at once (one more round trip)."""
        e = self._engine
        deleted = e.run(e._shard_for(tag).delete(tag, False)) is DeleteReply.DELETED
        if deleted:
            Workflows(e).settle_ends([tag])
        return deleted

    def requeue_dead(self, tag: str, front: bool = False) -> bool:
        """Put dead job ``tag`` back in line (``front``: at the front of the whole queue,
        ahead of the other partitions' heads read first); a workflow job's buried
        dependents wait again (dispatched at once). False when it is not dead."""
        e = self._engine
        shard = e._shard_for(tag)
        if front:
            call = shard.requeue_dead(tag, True, e._front_of_others(shard))
        else:
            call = shard.requeue_dead(tag)
        done = e.run(call)
        if done is RequeueReply.REQUEUED_FLOW:
            Workflows(e).dispatch([tag])
        return done in (RequeueReply.REQUEUED, RequeueReply.REQUEUED_FLOW)

    # ----------------------------------------------------------------- the whole queue

    def purge_dead(self, limit: int) -> int:
        """Delete every dead letter, ``limit`` a script call, shard after shard."""
        e = self._engine
        total = 0
        for shard in e._shards:
            while True:
                n = e.run(shard.purge_dead(limit))
                total += n
                if n < limit:
                    break
        return total

    def scan(self, limit: int) -> ScanResult:
        """One housekeeping step of every shard (at most ``limit`` jobs per kind each), in
        one round trip."""
        e = self._engine
        return ScanResult.total(e.run_all([s.scan(limit) for s in e._shards]))

    def pause(self) -> None:
        """Set every shard's pause key, in one round trip."""
        e = self._engine
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            for s in e._shards:
                pipe.set(s.keys.paused, "1")
            pipe.execute()

    def resume(self) -> None:
        """Delete every shard's pause key and wake its workers, in one round trip. Raises
        when a pause key could not be deleted; a refused wake-up is only logged
        (``resume_wake_failed``)."""
        e = self._engine
        n = len(e._shards)
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            for s in e._shards:
                pipe.delete(s.keys.paused)
            for s in e._shards:
                pipe.lpush(s.keys.notify, "1")
                pipe.ltrim(s.keys.notify, 0, e.policy.notify_cap - 1)
            replies = pipe.execute(raise_on_error=False)
            failed = next((r for r in replies[:n] if isinstance(r, Exception)), None)
            if failed is not None:
                raise failed
        woken = next((r for r in replies[n:] if isinstance(r, Exception)), None)
        if woken is not None:
            log.warning(kv(event="resume_wake_failed", queue=e.name, error=str(woken)[:200]))

    def is_paused(self) -> bool:
        """Whether any shard is paused (one round trip)."""
        e = self._engine
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            for s in e._shards:
                pipe.exists(s.keys.paused)
            return any(int(n) for n in pipe.execute())

    # ----------------------------------------------------------------- bulk actions

    @property
    def shard_count(self) -> int:
        """How many shards a bulk action walks, one after the other (indexes from 0)."""
        return len(self._engine._shards)

    def state_top(self, shard: int, state: str) -> float | None:
        """The highest score in shard ``shard``'s set of ``state`` (None: empty)."""
        e = self._engine
        with unavailable_as_error():
            last = e._client.zrange(self._set(shard, state), -1, -1, withscores=True)
        return float(last[0][1]) if last else None

    def range_after(
        self, shard: int, state: str, after: tuple[float, str] | None, top: float, limit: int
    ) -> list[tuple[str, float]]:
        """At most ``limit`` (tag, score) of shard ``shard``'s set of ``state`` after the
        cursor ``after`` (score, tag; None: from the start), of score <= ``top``
        (``range_after.lua``)."""
        e = self._engine
        return e.run(e._shards[shard].range_after(self._set(shard, state), after, top, limit))

    def listed(
        self, shard: int, state: str, entries: Sequence[tuple[str, float]], tags: Sequence[str]
    ) -> list[BulkEntry]:
        """``tags`` (of ``entries``, with their scores) as a ``match`` sees them, in one
        round trip: their records and bodies (and errors); a record of the JSON layout
        has its body in the body hash."""
        if not tags:
            return []
        k = self._engine._shards[shard].keys
        with unavailable_as_error():
            pipe = self._engine._client.pipeline(transaction=False)
            pipe.hmget(k.meta, tags)
            pipe.hmget(k.body, tags)
            if state == "dead":
                pipe.hmget(k.errors, tags)
            replies = pipe.execute()
        records, apart = replies[0], replies[1]
        errors = replies[2] if state == "dead" else [None] * len(tags)
        score = dict(entries)
        listed = []
        for tag, raw, body, error in zip(tags, records, apart, errors, strict=True):
            if raw:
                with contextlib.suppress(ValueError):  # unreadable: matched on nothing
                    body = split_record(raw)[1] or body
            listed.append(BulkEntry(tag, score[tag], shard, decode_json(body), last_error(error)))
        return listed

    def act(
        self, shard: int, action: str, state: str, tags: Sequence[str], ttl_ms: int
    ) -> BulkOutcome:
        """One round trip: ``action`` (a key of :data:`BULK_DONE`) on each of ``tags`` of
        shard ``shard``, each script checking that its job is still in ``state``
        (``cancel``: its record kept ``ttl_ms``). The ends are not told here."""
        if not tags:
            return BulkOutcome([], 0, [])
        e = self._engine
        s = e._shards[shard]
        calls: list[Call[Any]]
        if action in ("requeue", "retry_now"):
            front = action == "retry_now"
            below = e._front_of_others(s) if front else None
            calls = [s.requeue_dead(t, front, below) for t in tags]
        elif action == "delete":
            calls = [s.delete(t, False, "dead") for t in tags]
        elif action == "cancel":
            calls = [s.cancel(t, ttl_ms, state) for t in tags]
        else:
            below = e._front_of_others(s)
            calls = [s.run_now(t, below) for t in tags]
        replies = e.run_all(calls)
        pairs = list(zip(tags, replies, strict=True))
        return BulkOutcome(
            [t for t, r in pairs if r in BULK_DONE[action]],
            sum(1 for r in replies if r is RequeueReply.CORRUPT),
            [t for t, r in pairs if r is RequeueReply.REQUEUED_FLOW],
        )

    def _set(self, shard: int, state: str) -> str:
        key: str = getattr(self._engine._shards[shard].keys, _SET.get(state, state))
        return key
