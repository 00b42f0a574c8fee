"""Per-group figures of a queue (docs/fairness.md#watching-groups): jobs ready, set
aside by their group's limits (waiting in ``delayed`` until the group is under them) and
in flight per group key, and starts per group in this minute and the one before.

Bounded: a queue may hold any number of groups, so the counts are taken over the first
``sample`` jobs in line, in flight and set aside of each shard (exact when a state holds
no more than that; :attr:`GroupFigures.exact` says which), and the starts are read only
for the groups found there. Four round trips (two listings, Redis time, the starts),
O(sample) records read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.records import Record
from ..exceptions import InvalidArgument

if TYPE_CHECKING:
    from .source import Readable

#: most jobs of one state read per shard
MAX_SAMPLE = 5000
#: the group of jobs published without one
NO_GROUP = ""


@dataclass(frozen=True, slots=True)
class GroupRow:
    """One group's figures: ``ready``, ``inflight`` and ``set_aside`` (waiting for the
    group to be under its limits) among the jobs read, ``started`` in the current minute
    of Redis time and ``started_before`` in the minute before (counted by claims of a
    queue with ``fairness="groups"``; 0 in a fifo queue)."""

    group: str
    ready: int
    inflight: int
    started: int
    started_before: int
    set_aside: int = 0

    @property
    def waiting(self) -> int:
        """Jobs of the group not started: in line and set aside."""
        return self.ready + self.set_aside


@dataclass(frozen=True, slots=True)
class GroupFigures:
    """The biggest groups first (by waiting, then in flight, then name), at most
    ``top``; ``exact``: every ready, set-aside and in-flight job was read (no state held more than
    ``sample`` jobs in a shard), so the counts are the queue's own; otherwise they are
    those of the head of the line and the oldest leases."""

    rows: list[GroupRow]
    exact: bool
    groups_seen: int  # distinct groups among the jobs read


def group_figures(queue: Readable, top: int = 20, sample: int = 1000) -> GroupFigures:
    """Per-group counts of ``queue`` (see the module docstring)."""
    if not 1 <= top <= 1000 or not 1 <= sample <= MAX_SAMPLE:
        raise InvalidArgument(f"top must be in [1, 1000] and sample in [1, {MAX_SAMPLE}]")
    got = queue.reads.group_sample(sample)
    ready = _by_group(got.ready)
    inflight = _by_group(got.inflight)
    aside = Counter(got.set_aside)
    names = sorted(
        set(ready) | set(inflight) | set(aside),
        key=lambda g: (-(ready[g] + aside[g]), -inflight[g], g),
    )
    chosen = names[:top]
    started = queue.reads.group_starts(chosen)
    rows = [
        GroupRow(g, ready[g], inflight[g], *started.get(g, (0, 0)), set_aside=aside[g])
        for g in chosen
    ]
    return GroupFigures(rows, got.exact, len(names))


def _by_group(records: list[Any]) -> Counter[str]:
    """Jobs per group of the records read (as stored; one not readable is left out)."""
    counter: Counter[str] = Counter()
    for raw in records:
        record = Record.decode(raw)
        if record is not None:
            counter[record.group or NO_GROUP] += 1
    return counter
