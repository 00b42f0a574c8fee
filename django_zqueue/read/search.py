"""Finding jobs by their arguments (``queue.read.search``): the jobs of one state whose
body (its JSON arguments, the task name among them) or id holds a text, however deep in
the queue.

The text is a plain substring of the bytes (UTF-8), case-sensitive; no pattern. Each
step is one ``search.lua`` call on one shard: it looks at most :data:`STEP` jobs of the
state's sorted set, in the set's order (ready: rank; delayed: run-at; leased: lease
deadline; dead: time of death, oldest first; waiting: oldest wait first), from a cursor
(a score and an id, as ``range_after.lua``: jobs taken or added meanwhile neither make
the walk skip nor repeat a job still there). One :func:`search` call runs steps until
``limit`` matches, the end of the state, :data:`MAX_STEPS` steps or :data:`BUDGET_S`
seconds, whichever comes first; its result's ``cursor`` continues the walk where it
stopped. A partitioned queue is walked one shard after another, in shard order
(``#0`` first): matches come in that order, not in the queue's global order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engine.reads import SET_OF, check_state
from ..exceptions import InvalidArgument

if TYPE_CHECKING:
    from .source import Readable

#: jobs one step (one ``search.lua`` call) looks at, at most
STEP = 1000
#: steps of one :func:`search` call, at most (a million jobs looked at): on most
#: machines the time budget, :data:`BUDGET_S`, ends a call first
MAX_STEPS = 1000
#: seconds one :func:`search` call may spend before it returns its cursor
BUDGET_S = 1.0
#: most matches one call returns; longest text (bytes)
MAX_MATCHES = 1000
MAX_TEXT = 1000


@dataclass(frozen=True, slots=True)
class SearchMatch:
    """A job found: its ``tag``, ``shard`` (index), ``rank`` in its shard's sorted set
    of ``state`` when it was looked at, and its ``score`` there."""

    tag: str
    state: str
    shard: int
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The matches of one :func:`search` call, in walk order; ``done`` when the walk
    reached the end of the state (``cursor`` is then None), else ``cursor`` continues it
    (pass it back with the same text and state). ``looked``: jobs looked at."""

    matches: list[SearchMatch]
    cursor: str | None
    done: bool
    looked: int
    steps: int


def encode_cursor(shard: int, after: tuple[str, str] | None) -> str:
    """A cursor as text (for a URL): ``<shard>`` or ``<shard>:<score>:<id>``."""
    if after is None:
        return str(shard)
    return f"{shard}:{after[0]}:{after[1]}"


def decode_cursor(cursor: str, shards: int) -> tuple[int, tuple[str, str] | None]:
    """The shard and (score text, id) of a cursor; InvalidArgument when it is not one."""
    head, sep, rest = cursor.partition(":")
    try:
        shard = int(head)
        if not 0 <= shard < shards:
            raise ValueError(shard)
        if not sep:
            return shard, None
        score, sep, tag = rest.partition(":")
        if not sep or float(score) != float(score):  # NaN
            raise ValueError(score)
    except ValueError as exc:
        raise InvalidArgument(f"not a search cursor: {cursor!r}") from exc
    return shard, (score, tag)


def search(
    queue: Readable,
    text: str,
    state: str = "ready",
    limit: int = 50,
    cursor: str | None = None,
    *,
    max_steps: int = MAX_STEPS,
    budget_s: float = BUDGET_S,
) -> SearchResult:
    """The jobs of ``state`` (ready, delayed, leased or inflight, dead, waiting) whose body
    or id holds ``text`` (see the module). At most ``limit`` matches (1..1000), at most
    ``max_steps`` steps of :data:`STEP` jobs and about ``budget_s`` seconds (at least one
    step runs); the result's cursor continues the walk."""
    needle = text.encode("utf-8")
    if not 1 <= len(needle) <= MAX_TEXT:
        raise InvalidArgument(f"search needs a text of 1 to {MAX_TEXT} bytes")
    if not 1 <= limit <= MAX_MATCHES:
        raise InvalidArgument(f"limit must be in [1, {MAX_MATCHES}], got {limit}")
    if max_steps < 1:
        raise InvalidArgument("max_steps must be at least 1")
    name = check_state(state, waiting=True)
    set_name = SET_OF.get(name, name)
    shards = queue.reads.partitions
    shard, after = (0, None) if cursor is None else decode_cursor(cursor, shards)
    matches: list[SearchMatch] = []
    looked = steps = 0
    end = time.monotonic() + budget_s
    while True:
        want = limit - len(matches)
        step = queue.reads.search_step(shard, set_name, needle, after, STEP, want)
        steps += 1
        looked += step.looked
        matches += [
            SearchMatch(tag, name, shard, rank, float(score)) for tag, score, rank in step.matches
        ]
        if step.last is not None:
            after = step.last
        if not step.more:  # this shard's end: the next one from its start
            if shard + 1 == shards:
                return SearchResult(matches, None, True, looked, steps)
            shard, after = shard + 1, None
        if len(matches) >= limit or steps >= max_steps or time.monotonic() >= end:
            return SearchResult(matches, encode_cursor(shard, after), False, looked, steps)
