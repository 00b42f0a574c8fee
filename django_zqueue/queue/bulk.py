"""Actions on every job of a state that matches: requeue (or retry now), delete, cancel,
run now, in bounded chunks that are safe while workers run.

Each partition's set is walked in its own order (score, then tag) from a cursor, the last
entry read, up to the highest score it held when the walk began (``range_after.lua``):
:data:`BULK_CHUNK` entries a round trip, then (with a ``match``) their bodies and errors
in a second, then one script call per job in a third. The cursor does not depend on
ranks, so jobs that workers claim, finish or add meanwhile shift nothing: no job that is
still in the state and after the cursor is skipped, and no job is acted on twice (the
tags already seen are remembered for the walk). Each job's script checks that it is
still in the state (``requeue_dead.lua``: dead; ``delete.lua`` and ``cancel.lua`` with
``only``; ``run_now.lua``: waiting in line); one that has left is counted in
:attr:`BulkResult.left`, not acted on. A job that enters the state while the walk runs is
acted on when its place is after the cursor and within the walk's range.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.records import decode_json
from ..engine.records.attempts import last_error
from ..engine.records.codec import split_record
from ..engine.redis.connection import unavailable_as_error
from ..engine.scripts.replies import CancelReply, DeleteReply, MoveReply, RequeueReply
from ..exceptions import InvalidArgument
from ..read.jobs import ListedJob
from .control import CANCELLED_TTL, Control
from .flow import Flows

if TYPE_CHECKING:
    from ..engine.scripts import Call
    from ..engine.shard import Shard

#: entries read, and jobs acted on, per round trip
BULK_CHUNK = 200
#: the actions, with the states each applies to
BULK_ACTIONS: dict[str, tuple[str, ...]] = {
    "requeue": ("dead",),
    "retry_now": ("dead",),
    "delete": ("dead",),
    "cancel": ("ready", "delayed", "waiting", "leased"),
    "run_now": ("ready", "delayed"),
}
#: the sorted set of a state, by its name in QueueKeys
_SET = {"waiting": "wait"}

Match = Callable[[ListedJob], bool]
#: the replies that mean "done", by action (each action's own reply type)
_DONE: dict[str, frozenset[Any]] = {
    "requeue": frozenset({RequeueReply.REQUEUED, RequeueReply.REQUEUED_FLOW}),
    "retry_now": frozenset({RequeueReply.REQUEUED, RequeueReply.REQUEUED_FLOW}),
    "delete": frozenset({DeleteReply.DELETED}),
    "cancel": frozenset({CancelReply.WAITING, CancelReply.RUNNING}),
    "run_now": frozenset({MoveReply.MOVED}),
}


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk action did."""

    done: int = 0  # jobs acted on
    left: int = 0  # matched when read, but had left the state when their turn came
    refused: int = 0  # still there, but the action could not be done (a corrupt record)
    more: bool = False  # stopped at ``most``: jobs of the state after these remain

    @property
    def acted(self) -> int:
        """Jobs whose turn came: done, left or refused."""
        return self.done + self.left + self.refused

    def __add__(self, other: BulkResult) -> BulkResult:
        return BulkResult(
            self.done + other.done,
            self.left + other.left,
            self.refused + other.refused,
            self.more or other.more,
        )


class Bulk(Flows, Control):
    """Actions on all the jobs of a state that match."""

    def requeue_dead_all(
        self, match: Match | None = None, *, front: bool = False, most: int | None = None
    ) -> BulkResult:
        """Requeue every dead letter (that ``match`` keeps), as :meth:`requeue_dead`;
        ``front=True``: each to the front of the line in turn (the last one acted on is
        claimed first)."""
        return self.act_on_all("retry_now" if front else "requeue", "dead", match, most=most)

    def act_on_all(
        self, action: str, state: str, match: Match | None = None, *, most: int | None = None
    ) -> BulkResult:
        """Run ``action`` (a key of :data:`BULK_ACTIONS`) on every job of ``state`` that
        ``match`` keeps (a :class:`~django_zqueue.read.ListedJob` with its body and, for
        dead jobs, its last error; None: every job), at most ``most`` of them (None: no
        limit), in chunks of :data:`BULK_CHUNK`."""
        if state not in BULK_ACTIONS.get(action, ()):
            raise InvalidArgument(f"no bulk action {action!r} on {state!r} jobs")
        if most is not None and most < 1:
            raise InvalidArgument("most must be at least 1")
        total = BulkResult()
        for shard in self.engine.shards:
            room = None if most is None else most - total.acted
            if total.more or room == 0:
                return BulkResult(total.done, total.left, total.refused, True)
            total += self._walk(shard, action, state, match, room)
        return total

    def _walk(
        self, shard: Shard, action: str, state: str, match: Match | None, room: int | None
    ) -> BulkResult:
        """One partition's part of :meth:`act_on_all`: at most ``room`` jobs acted on."""
        key = getattr(shard.keys, _SET.get(state, state))
        with unavailable_as_error():
            last = self.client.zrange(key, -1, -1, withscores=True)
        if not last:
            return BulkResult()
        top, cursor = float(last[0][1]), None
        seen: set[str] = set()
        result = BulkResult()
        while True:
            entries = self.engine.run(shard.range_after(key, cursor, top, BULK_CHUNK))
            if not entries:
                return result
            cursor = (entries[-1][1], entries[-1][0])
            tags = [t for t, _ in entries if t not in seen]
            seen.update(tags)
            if match is not None:
                tags = self._matching(shard, state, entries, tags, match)
            if room is not None and len(tags) > room - result.acted:
                tags = tags[: room - result.acted]
                return result + self._act(shard, action, state, tags) + BulkResult(more=True)
            result += self._act(shard, action, state, tags)
            if len(entries) < BULK_CHUNK:
                return result

    def _matching(
        self,
        shard: Shard,
        state: str,
        entries: Sequence[tuple[str, float]],
        tags: list[str],
        match: Match,
    ) -> list[str]:
        """The tags ``match`` keeps: one round trip for their records and bodies (and
        errors); a record of the JSON layout has its body in the body hash."""
        if not tags:
            return []
        k = shard.keys
        with unavailable_as_error():
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(k.meta, tags)
            pipe.hmget(k.body, tags)
            if state == "dead":
                pipe.hmget(k.errors, tags)
            replies = pipe.execute()
        records, apart = replies[0], replies[1]
        errors = replies[2] if state == "dead" else [None] * len(tags)
        score = dict(entries)
        kept = []
        for tag, raw, body, error in zip(tags, records, apart, errors, strict=True):
            if raw:
                with contextlib.suppress(ValueError):  # unreadable: matched on nothing
                    body = split_record(raw)[1] or body
            job = ListedJob(
                tag=tag,
                score=score[tag],
                shard=shard.index,
                record=None,
                body=decode_json(body),
                error=last_error(error),
            )
            if match(job):
                kept.append(tag)
        return kept

    def _act(self, shard: Shard, action: str, state: str, tags: list[str]) -> BulkResult:
        """One round trip: ``action`` on each of ``tags``, each checking its state."""
        if not tags:
            return BulkResult()
        calls: list[Call[Any]]
        if action in ("requeue", "retry_now"):
            front = action == "retry_now"
            below = self.engine.front_of_others(shard) if front else None
            calls = [shard.requeue_dead(t, front, below) for t in tags]
        elif action == "delete":
            calls = [shard.delete(t, False, "dead") for t in tags]
        elif action == "cancel":
            ms = int(CANCELLED_TTL * 1000)
            calls = [shard.cancel(t, ms, state) for t in tags]
        else:
            below = self.engine.front_of_others(shard)
            calls = [shard.run_now(t, below) for t in tags]
        replies = self.engine.run_all(calls)
        return self._settle(action, tags, replies)

    def _settle(self, action: str, tags: list[str], replies: list[Any]) -> BulkResult:
        """Count the replies; tell workflows about the jobs that ended or came back."""
        done = [t for t, r in zip(tags, replies, strict=True) if r in _DONE[action]]
        refused = sum(1 for r in replies if r is RequeueReply.CORRUPT)
        if action in ("delete", "cancel") and done:
            self.engine.settle_ends(done)
        revived = [t for t, r in zip(tags, replies, strict=True) if r is RequeueReply.REQUEUED_FLOW]
        if revived:
            self.dispatch(revived)
        return BulkResult(len(done), len(tags) - len(done) - refused, refused)
