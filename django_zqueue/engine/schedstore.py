"""The periodic schedules of a queue as stored in Redis, read and written here only.

Three keys of the queue's first partition (docs/architecture.md): ``sched`` (ZSET,
schedule name -> next tick in ms; a paused schedule is not in it), ``sched_defs`` (HASH,
name -> JSON definition with a ``digest`` of its values, ``paused`` and, for a schedule
added at run time, ``"source": "runtime"``) and ``sched_last`` (HASH, name -> ``"<tick>
<job tag>"`` of its last firing). Definitions are dicts here; ``schedules`` gives them
their meaning.

Changes made by operators go through ``sched_put.lua``: a compare-and-set on the stored
definition's digest, so two operators (or an operator and a deploy) cannot overwrite one
another unseen, and nothing is written when the check fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .keys import QueueKeys
from .redis.connection import server_time_ms, unavailable_as_error
from .scripts.calls import Call

if TYPE_CHECKING:
    from . import Engine
    from .records import NewJob


class QueueBase(Protocol):
    """What the schedules' store uses of a queue: its engine (client and schedule keys)."""

    @property
    def engine(self) -> Engine: ...


Definition = dict[str, Any]
#: how ``put`` sets the next tick: see ``sched_put.lua``
TickMode = Literal["set", "keep", "keep_due"]
#: ``put``'s ``expect`` for "the schedule must not exist yet"
ABSENT = ""
#: ``put``'s ``expect`` for "whatever is stored"
ANY = "*"


@dataclass(frozen=True, slots=True)
class Stored:
    """One schedule as stored: its definition, next tick and last firing."""

    name: str
    definition: Definition
    next_ms: int | None  # None: paused (out of the due set)
    last_tick_ms: int | None  # the tick of its last firing (in the job's tag)
    last_job: str | None  # the tag of the last job it fired

    @property
    def source(self) -> Literal["code", "runtime"]:
        return "runtime" if self.definition.get("source") == "runtime" else "code"

    @property
    def paused(self) -> bool:
        return bool(self.definition.get("paused"))


def _decode(raw: Any) -> Definition | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def now_ms(q: QueueBase) -> int:
    """Redis time, ms, on the node of the queue's schedules (the scripts' clock)."""
    with unavailable_as_error():
        return server_time_ms(q.engine._client, q.engine._sched_keys.sched)


def definitions(q: QueueBase) -> dict[str, Definition]:
    """Every stored definition of the queue (one ``HGETALL``), unreadable ones left out."""
    with unavailable_as_error(keys=[q.engine._sched_keys.sched_defs]):
        raw: Any = q.engine._client.hgetall(q.engine._sched_keys.sched_defs)
    found = {_text(k): _decode(v) for k, v in raw.items()}
    return {k: v for k, v in found.items() if v is not None}


def definitions_of(q: QueueBase, names: Sequence[str]) -> dict[str, Definition]:
    """The stored definitions of ``names`` (one ``HMGET``); absent ones left out."""
    if not names:
        return {}
    with unavailable_as_error(keys=[q.engine._sched_keys.sched_defs]):
        raw: Any = q.engine._client.hmget(q.engine._sched_keys.sched_defs, list(names))
    found = {n: _decode(v) for n, v in zip(names, raw, strict=True)}
    return {k: v for k, v in found.items() if v is not None}


def due(q: QueueBase, now: int, limit: int) -> list[tuple[str, int]]:
    """(name, tick) of the schedules due at ``now``, earliest first, at most ``limit``."""
    with unavailable_as_error(keys=[q.engine._sched_keys.sched]):
        raw: Any = q.engine._client.zrangebyscore(
            q.engine._sched_keys.sched, "-inf", now, start=0, num=limit, withscores=True
        )
    return [(_text(name), int(score)) for name, score in raw]


def stored(q: QueueBase, names: Iterable[str] | None = None) -> list[Stored]:
    """The schedules of the queue (or those of ``names`` that exist), sorted by name."""
    defs = definitions(q) if names is None else definitions_of(q, list(names))
    ordered = sorted(defs)
    if not ordered:
        return []
    with unavailable_as_error():
        pipe = q.engine._client.pipeline(transaction=False)
        for name in ordered:
            pipe.zscore(q.engine._sched_keys.sched, name)
            pipe.hget(q.engine._sched_keys.sched_last, name)
        replies = pipe.execute()
    out = []
    for i, name in enumerate(ordered):
        nxt, last = replies[2 * i], replies[2 * i + 1]
        parts = _text(last).split(" ", 1) if last else []
        job = parts[1] if len(parts) == 2 else None  # "<tick> <job tag>"; else unreadable
        tick = job.rsplit(":", 1)[-1] if job else None
        out.append(
            Stored(
                name=name,
                definition=defs[name],
                next_ms=int(nxt) if nxt is not None else None,
                last_tick_ms=int(tick) if tick and tick.isdigit() else None,
                last_job=job,
            )
        )
    return out


def put(
    q: QueueBase,
    name: str,
    definition: Mapping[str, Any] | None,
    *,
    expect: str,
    next_ms: int | None = None,
    mode: TickMode = "set",
) -> bool:
    """Store ``definition`` (None: remove the schedule) if the stored one's digest is
    ``expect`` (:data:`ABSENT`: none may be stored; :data:`ANY`: whatever is). The next
    tick: ``next_ms`` (None: paused) as ``mode`` says. False: the check failed, nothing
    was written."""
    text = "" if definition is None else json.dumps(dict(definition))
    return q.engine.run(put_call(q.engine._sched_keys, name, expect, text, next_ms, mode))


def fire(
    q: QueueBase,
    name: str,
    tick: int,
    next_tick: int | None,
    job: NewJob | None,
    digest: str | None = None,
) -> bool:
    """Fire one tick of periodic schedule ``name`` exactly once (``fire.lua``): enqueue
    ``job`` (None: only move on) if the schedule's next tick is still ``tick`` (and, with
    ``digest``, its stored definition still the one of that digest), and move it to
    ``next_tick`` (None: out of the due set). False: already handled, or stale."""
    return q.engine.run(q.engine._shards[0].fire(name, tick, next_tick, job, digest))


def put_call(
    k: QueueKeys, name: str, expect: str, definition: str, next_ms: int | None, mode: TickMode
) -> Call[bool]:
    """The ``sched_put.lua`` call of :func:`put` (``definition``: JSON, '' to remove)."""
    args = (name, expect, definition, "" if next_ms is None else next_ms, mode)
    return Call("sched_put", (k.sched, k.sched_defs, k.sched_last), args, _done)


def _done(reply: Any) -> bool:
    return int(reply) == 1


def sync(
    q: QueueBase,
    remove: Iterable[str],
    write: Iterable[tuple[str, Definition, int | None]],
) -> None:
    """A deploy's changes, in one transaction: ``remove`` these schedules; ``write``
    (name, definition, next tick or None to leave the tick as it is)."""
    k = q.engine._sched_keys
    with unavailable_as_error():
        pipe = q.engine._client.pipeline(transaction=True)
        for name in remove:
            pipe.hdel(k.sched_defs, name)
            pipe.zrem(k.sched, name)
            pipe.hdel(k.sched_last, name)
        for name, definition, nxt in write:
            pipe.hset(k.sched_defs, name, json.dumps(definition))
            if nxt is not None:
                pipe.zadd(k.sched, {name: nxt})
        pipe.execute()
