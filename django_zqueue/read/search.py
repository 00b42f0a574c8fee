"""Finding jobs by their arguments (``queue.read.search``): the jobs of one state whose
body (its JSON arguments, the task name among them) or id holds a text, however deep in
the queue, the finished jobs included (``succeeded``, ``cancelled``, ``expired``).

The text is searched as people type it (:func:`parse`), case-sensitive:

- a substring of the body's bytes (UTF-8) or of the id, whatever the spacing JSON puts
  around ``: , [ ] { }``: ``"user_id": 4242`` (as the job page prints it) and
  ``"user_id":4242`` (as it is stored) find the same jobs;
- a field form, ``user_id:4242``, ``args.0:abc``, ``kwargs.user.id:7``, also finds the
  jobs whose body has that value at that path (looked up in the body, then in its
  ``kwargs``; a number indexes a list from 0; a number compares numerically, a string
  with or without its quotes, ``true``/``false``/``null`` by their JSON text).

Each
step is one ``search.lua`` call on one shard: it looks at most :data:`STEP` jobs of the
state's sorted set, in the set's order (ready: rank; delayed: run-at; leased: lease
deadline; dead, succeeded, cancelled, expired: when it ended, oldest first; waiting:
oldest wait first), from a cursor
(a score and an id, as ``range_after.lua``: jobs taken or added meanwhile neither make
the walk skip nor repeat a job still there). One :func:`search` call runs steps until
``limit`` matches, the end of the state, :data:`MAX_STEPS` steps or :data:`BUDGET_S`
seconds, whichever comes first; its result's ``cursor`` continues the walk where it
stopped. A partitioned queue is walked one shard after another, in shard order
(``#0`` first): matches come in that order, not in the queue's global order.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..conf.bounds import MAX_FIELD_PATH_BYTES, MAX_FIELD_PATH_PARTS
from ..engine.reads import SET_OF, check_state
from ..engine.reads.finished import ENDED_SET
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
#: the ended states one may search besides the live ones (dead is one of those)
ENDED_STATES = ("succeeded", "cancelled", "expired")
#: JSON's structural characters: the spacing around them may vary
STRUCTURAL = frozenset(":,[]{}")
#: Lua's pattern: whatever whitespace
_FLEX = "%s*"
#: a field form: a path of names (or list indexes) then ``:`` and a value
_FIELD = re.compile(
    rf"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+){{0,{MAX_FIELD_PATH_PARTS - 1}}}):\s*(\S.*)", re.S
)


@dataclass(frozen=True, slots=True)
class Query:
    """A search text as :func:`search` sends it: ``needle`` (bytes; a Lua pattern when
    ``pattern``) and the ``field`` form's (path, value), if the text is one."""

    needle: bytes
    pattern: bool
    field: tuple[str, str] | None


def _lua_escape(c: str) -> str:
    return c if c.isalnum() or c == " " or ord(c) > 127 else "%" + c


def spacing_pattern(text: str) -> str | None:
    """A Lua pattern that finds ``text`` whatever whitespace stands around its ``: , [ ]
    { }`` (none, one space, a newline and indentation); None when it has none of them
    (a plain substring does) or holds a NUL. Two flexible gaps never touch, so the
    pattern does not backtrack more than the length of a run of whitespace."""
    if "\0" in text or not STRUCTURAL.intersection(text):
        return None
    compact = re.sub(r"\s*([:,\[\]{}])\s*", r"\1", text.strip())
    parts: list[str] = []
    for c in compact:
        if c in STRUCTURAL:
            if parts and parts[-1] != _FLEX:
                parts.append(_FLEX)
            parts += [_lua_escape(c), _FLEX]
        else:
            parts.append(_lua_escape(c))
    while parts and parts[-1] == _FLEX:
        parts.pop()
    return "".join(parts)


def field_of(text: str) -> tuple[str, str] | None:
    """The (path, value) of a field form (``user_id:4242``, ``args.0:"abc"``); None when
    ``text`` is not one. A value in double quotes loses them."""
    m = _FIELD.fullmatch(text.strip())
    if m is None or len(m[1]) > MAX_FIELD_PATH_BYTES:
        return None
    value = m[2].strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return m[1], value


def parse(text: str) -> Query:
    """How :func:`search` looks for ``text`` (see the module); InvalidArgument for a text
    of no bytes or more than :data:`MAX_TEXT`."""
    raw = text.encode("utf-8")
    if not 1 <= len(raw) <= MAX_TEXT:
        raise InvalidArgument(f"search needs a text of 1 to {MAX_TEXT} bytes")
    pattern = spacing_pattern(text)
    needle = raw if pattern is None else pattern.encode("utf-8")
    return Query(needle, pattern is not None, field_of(text))


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
    """The jobs of ``state`` (ready, delayed, leased or inflight, dead, waiting; succeeded,
    cancelled, expired) whose body or id holds ``text`` (see the module). At most
    ``limit`` matches (1..1000), at most ``max_steps`` steps of :data:`STEP` jobs and
    about ``budget_s`` seconds (at least one step runs); the result's cursor continues
    the walk."""
    query = parse(text)
    if not 1 <= limit <= MAX_MATCHES:
        raise InvalidArgument(f"limit must be in [1, {MAX_MATCHES}], got {limit}")
    if max_steps < 1:
        raise InvalidArgument("max_steps must be at least 1")
    if state in ENDED_STATES:
        name, set_name = state, ENDED_SET[state]
    else:
        name = check_state(state, waiting=True)
        set_name = SET_OF.get(name, name)
    shards = queue.reads.partitions
    shard, after = (0, None) if cursor is None else decode_cursor(cursor, shards)
    matches: list[SearchMatch] = []
    looked = steps = 0
    end = time.monotonic() + budget_s
    while True:
        want = limit - len(matches)
        step = queue.reads.search_step(
            shard,
            set_name,
            query.needle,
            after,
            STEP,
            want,
            pattern=query.pattern,
            field=query.field,
        )
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
