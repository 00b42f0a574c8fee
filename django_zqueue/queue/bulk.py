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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..engine.control import BulkOutcome
from ..exceptions import InvalidArgument
from ..read.jobs import ListedJob
from .control import CANCELLED_TTL, Control
from .flow import Flows

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
Match = Callable[[ListedJob], bool]


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
    """Actions on all the jobs of a state that match (the Redis side:
    ``engine.control``'s bulk verbs)."""

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
        for shard in range(self.engine.control.shard_count):
            room = None if most is None else most - total.acted
            if total.more or room == 0:
                return BulkResult(total.done, total.left, total.refused, True)
            total += self._walk(shard, action, state, match, room)
        return total

    def _walk(
        self, shard: int, action: str, state: str, match: Match | None, room: int | None
    ) -> BulkResult:
        """One partition's part of :meth:`act_on_all`: at most ``room`` jobs acted on."""
        control = self.engine.control
        top = control.state_top(shard, state)
        if top is None:
            return BulkResult()
        cursor: tuple[float, str] | None = None
        seen: set[str] = set()
        result = BulkResult()
        while True:
            entries = control.range_after(shard, state, cursor, top, BULK_CHUNK)
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
        shard: int,
        state: str,
        entries: Sequence[tuple[str, float]],
        tags: list[str],
        match: Match,
    ) -> list[str]:
        """The tags ``match`` keeps: one round trip for their records and bodies (and
        errors)."""
        listed = self.engine.control.listed(shard, state, entries, tags)
        return [
            e.tag
            for e in listed
            if match(
                ListedJob(
                    tag=e.tag, score=e.score, shard=e.shard, record=None, body=e.body, error=e.error
                )
            )
        ]

    def _act(self, shard: int, action: str, state: str, tags: list[str]) -> BulkResult:
        """One round trip: ``action`` on each of ``tags``, each checking its state."""
        if not tags:
            return BulkResult()
        outcome = self.engine.control.act(shard, action, state, tags, int(CANCELLED_TTL * 1000))
        return self._settle(action, tags, outcome)

    def _settle(self, action: str, tags: list[str], outcome: BulkOutcome) -> BulkResult:
        """Count the outcome; tell workflows about the jobs that ended or came back."""
        done, refused = outcome.done, outcome.refused
        if action in ("delete", "cancel") and done:
            self.engine.flow.settle_ends(done)
        if outcome.revived:
            self.dispatch(outcome.revived)
        return BulkResult(len(done), len(tags) - len(done) - refused, refused)
