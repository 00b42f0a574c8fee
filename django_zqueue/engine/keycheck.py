"""The engine's look at a queue's keys, for ``zqueue_doctor``: every fixed key of the
type it must have, the counters scripts read as integers, and records in no set
(orphans); each problem with its repair when one is safe (``--repair``), bound to the
engine's client. :mod:`django_zqueue.ops.doctor` reports these findings among its others.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from .keys import typed_keys
from .records.codec import read_fields
from .redis.connection import unavailable_as_error

if TYPE_CHECKING:
    from .base import EngineBase

Level = Literal["ok", "note", "warning", "error"]


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    topic: str
    message: str
    fix: str = ""  # what to do; empty when there is nothing to do

    def line(self) -> str:
        """One line: ``LEVEL    topic: message -> fix``."""
        label = self.level if self.level in ("ok", "note") else self.level.upper()
        return f"{label:<8} {self.topic}: {self.message}" + (f" -> {self.fix}" if self.fix else "")


#: keys whose wrong-typed value can be deleted: signals, counters, caches that are
#: rebuilt (a worker re-registers within 10 s, a token bucket refills), never a job
DELETABLE = {
    "notify": "wake-up tokens only: idle workers look again within a second",
    "workers": "workers register again within 10 s",
    "wctl": "the quiet and stop orders not yet read by their workers are forgotten",
    "rate": "the qps token bucket starts full again",
    "stats": "the lifetime counters start again from 0",
    "progress": "running jobs report their progress again",
    "gstarts": "fair queues: this minute's starts per group start again",
    "gstarts_prev": "fair queues: the last minute's starts per group are forgotten",
    "grate": "fair queues: each group's qps bucket starts full again",
    "proto": "a worker's start or manage.py zqueue_protocol writes it again",
    "finished": "the history of finished jobs forgets its succeeded jobs",
    "cancels": "the history of finished jobs forgets its cancelled jobs",
    "history": "the history of finished jobs starts again, empty",
}
#: ctr fields a script reads as an integer, and how a bad value is repaired (None: not)
CTR_FIELDS: dict[str, str | None] = {
    "tok": "set above every lease token in use (read from the job records)",
    "clock": "removed: the aging clock goes on from Redis TIME",
    "dclock": "removed: the dead-letter clock goes on from Redis TIME",
    "gmin": "removed: the fair queue's minute starts again",
    "seq": None,
}
#: why a bad ``ctr.seq`` is not repaired
SEQ_NOT_REPAIRED = (
    "not repaired: the sequence orders the line in strict mode, and a value below one in "
    "use would put new jobs ahead of older ones; set it by hand (HSET) above the largest "
    "sequence in the ready scores"
)


@dataclass(frozen=True, slots=True)
class Repair:
    """What ``zqueue_doctor --repair`` does for a problem: ``what``, by ``apply(client)``
    (which writes only when the value is still the bad one it saw, and says whether it
    wrote); :meth:`run` applies it with the client of the queue it was found in (``on``)."""

    key: str
    what: str
    apply: Callable[[Any], bool]
    on: Any = None

    def run(self) -> bool:
        """Apply the repair with the client of the queue it was found in; False when it
        wrote nothing (the value is no longer the bad one it saw)."""
        with unavailable_as_error():
            return self.apply(self.on)


@dataclass(frozen=True, slots=True)
class KeyProblem:
    finding: Finding
    repair: Repair | None  # None: not safe to repair (the finding says why)


#: an integer as Redis' HINCRBY reads one (no sign but '-', no spaces, 64 bits)
INT = re.compile(rb"-?[0-9]{1,19}")


def _is_int(raw: bytes) -> bool:
    return bool(INT.fullmatch(raw)) and -(2**63) <= int(raw) < 2**63


def _shown(raw: bytes) -> str:
    return repr(raw[:40].decode("utf-8", "replace"))


def key_problems(q: EngineBase) -> list[KeyProblem]:
    """Every fixed key of ``q`` (each partition's) whose type is not the one it must have,
    and every field of ``ctr`` and ``stats`` that is not the integer a script reads;
    each with its repair when one is safe. Two round trips per partition."""
    out: list[KeyProblem] = []
    with unavailable_as_error():
        for k in q._part_keys:
            fixed = typed_keys(k)
            pipe = q._client.pipeline(transaction=False)
            for _, key, _ in fixed:
                pipe.type(key)
            types = [t.decode() if isinstance(t, bytes) else str(t) for t in pipe.execute()]
            wrong = {
                f for (f, _, kind), t in zip(fixed, types, strict=True) if t not in (kind, "none")
            }
            for (field, key, kind), found in zip(fixed, types, strict=True):
                if field in wrong:
                    out.append(_wrong_type(q, field, key, kind, found))
            if "ctr" not in wrong:
                fields: dict[Any, Any] = q._client.hgetall(k.ctr)
                out += _ctr_problems(q, k.ctr, k.meta, fields)
                if q.policy.mode == "strict" and not ({"ready", "meta"} & wrong):
                    out += _seq_problems(q, k, fields.get(b"seq"))
            if "stats" not in wrong:
                out += _stats_problems(q, k.stats, q._client.hgetall(k.stats))
    return _bound(q, out)


def _bound(q: EngineBase, problems: list[KeyProblem]) -> list[KeyProblem]:
    """``problems``, each repair bound to ``q``'s client (:meth:`Repair.run`)."""
    return [
        KeyProblem(p.finding, None if p.repair is None else replace(p.repair, on=q._client))
        for p in problems
    ]


def _wrong_type(q: EngineBase, field: str, key: str, kind: str, found: str) -> KeyProblem:
    message = (
        f"queue {q.name!r}: key {key} is a {found}, not a {kind}: every script that uses it "
        "fails (WRONGTYPE), so publish, claim or scan may stop"
    )
    if field in DELETABLE:
        repair = Repair(key, f"delete {key} ({DELETABLE[field]})", _delete_if(key, found))
        fix = f"python manage.py zqueue_doctor --repair --yes deletes it ({DELETABLE[field]})"
    elif field == "paused":
        repair = Repair(key, f"set {key} to '1' (the queue stays paused)", _pause_if(key, found))
        fix = (
            "python manage.py zqueue_doctor --repair --yes sets it to '1' (the queue stays "
            "paused: resume it if you meant to)"
        )
    else:
        repair = None
        fix = (
            "not repaired: it holds or indexes jobs; look at it (TYPE, DUMP), then RENAME it "
            "aside so the queue works again; jobs it held must be put back by hand"
        )
    return KeyProblem(Finding("error", "keys", message, fix), repair)


def _ctr_problems(q: EngineBase, ctr: str, meta: str, fields: dict[Any, Any]) -> list[KeyProblem]:
    out = []
    for name, how in CTR_FIELDS.items():
        raw = fields.get(name.encode())
        if raw is None or _is_int(raw):
            continue
        message = f"queue {q.name!r}: {ctr} field {name} is {_shown(raw)}, not an integer"
        if name == "tok":
            message += ": every claim fails"
        if how is None:
            out.append(KeyProblem(Finding("error", "keys", message, SEQ_NOT_REPAIRED), None))
            continue
        apply = _token_above_if(ctr, meta, raw) if name == "tok" else _hdel_if(ctr, name, raw)
        fix = f"python manage.py zqueue_doctor --repair --yes: {how}"
        out.append(
            KeyProblem(
                Finding("error", "keys", message, fix), Repair(ctr, f"{ctr} {name}: {how}", apply)
            )
        )
    return out


#: ready entries read, at most, for the largest sequence in use (per partition)
SEQ_SCAN = 20_000
#: strict mode: a ready score is ``seq - priority * PRIORITY_BAND`` (_priority_band.lua)
PRIORITY_BAND = 2**42


def _seq_problems(q: EngineBase, k: Any, raw: bytes | None) -> list[KeyProblem]:
    """Strict mode: ``ctr``'s ``seq`` (absent: 0) below the sequence of a job in the
    ready line, so new jobs would go ahead of older ones of their priority; repaired by
    setting it to the largest sequence in use (the next job's is one more)."""
    if raw is not None and not _is_int(raw):
        return []  # not an integer: named by _ctr_problems
    seq = int(raw) if raw is not None else 0
    top = _top_sequence(q._client, k, seq)
    if top is None:
        return []
    top_seq, tag = top
    now: Any = q._client.hget(k.ctr, "seq")  # jobs published since ctr was read took more
    if now is not None and _is_int(now) and int(now) >= top_seq:
        return []
    message = (
        f"queue {q.name!r}: {k.ctr} field seq is {seq}, below the sequence {top_seq} of the "
        f"ready job {tag}: new jobs would go ahead of older ones of their priority"
    )
    fix = f"python manage.py zqueue_doctor --repair --yes sets it to {top_seq}"
    repair = Repair(
        k.ctr,
        f"{k.ctr} seq: set to {top_seq}, the largest sequence in use",
        _seq_if(k.ctr, raw, top_seq),
    )
    return [KeyProblem(Finding("error", "keys", message, fix), repair)]


def _top_sequence(client: Any, k: Any, seq: int) -> tuple[int, str] | None:
    """(sequence, tag) of the ready job with the largest sequence above ``seq`` (None:
    none), among the first SEQ_SCAN entries; a job with a raw score (its record's ``s``)
    has none."""
    above: list[tuple[int, bytes]] = []
    for seen, (tag, score) in enumerate(client.zscan_iter(k.ready, count=1000), 1):
        n = int(score) % PRIORITY_BAND
        if n > seq:
            above.append((n, tag))
        if seen >= SEQ_SCAN:
            break
    above.sort(reverse=True)
    for at in range(0, len(above), 200):  # the largest first, till one is a sequence
        step = above[at : at + 200]
        records = client.hmget(k.meta, [tag for _, tag in step])
        for (n, tag), record in zip(step, records, strict=True):
            try:
                raw_score = record is not None and "s" in read_fields(record)
            except ValueError:
                continue  # unreadable: named where records are read
            if record is not None and not raw_score:
                return n, tag.decode("utf-8", "replace")
    return None


def _seq_if(ctr: str, bad: bytes | None, value: int) -> Callable[[Any], bool]:
    def apply(client: Any) -> bool:
        if client.hget(ctr, "seq") != bad:
            return False
        client.hset(ctr, "seq", value)
        return True

    return apply


def _stats_problems(q: EngineBase, stats: str, fields: dict[Any, Any]) -> list[KeyProblem]:
    out = []
    for name, raw in sorted(fields.items()):
        if _is_int(raw):
            continue
        field = name.decode("utf-8", "replace")
        message = (
            f"queue {q.name!r}: {stats} field {field} is {_shown(raw)}, not an integer: the "
            "scripts that count it fail"
        )
        fix = "python manage.py zqueue_doctor --repair --yes resets it to 0"
        repair = Repair(stats, f"{stats} {field}: reset to 0", _hset_if(stats, name, raw, b"0"))
        out.append(KeyProblem(Finding("error", "keys", message, fix), repair))
    return out


def _delete_if(key: str, found: str) -> Callable[[Any], bool]:
    def apply(client: Any) -> bool:
        if client.type(key).decode() != found:
            return False
        return bool(client.delete(key))

    return apply


def _pause_if(key: str, found: str) -> Callable[[Any], bool]:
    def apply(client: Any) -> bool:
        if client.type(key).decode() != found:
            return False
        client.set(key, "1")
        return True

    return apply


def _hset_if(key: str, field: bytes, bad: bytes, value: bytes) -> Callable[[Any], bool]:
    def apply(client: Any) -> bool:
        if client.hget(key, field) != bad:
            return False
        client.hset(key, field, value)
        return True

    return apply


def _hdel_if(key: str, field: str, bad: bytes) -> Callable[[Any], bool]:
    def apply(client: Any) -> bool:
        if client.hget(key, field) != bad:
            return False
        return bool(client.hdel(key, field))

    return apply


def max_token(client: Any, meta: str) -> int:
    """The largest lease token (``t``) in the job records of ``meta`` (0 for none)."""

    top = 0
    for _, raw in client.hscan_iter(meta, count=1000):
        try:
            t = read_fields(raw).get("t")
        except ValueError:
            continue
        if isinstance(t, int) and not isinstance(t, bool):
            top = max(top, t)
    return top


def _token_above_if(ctr: str, meta: str, bad: bytes) -> Callable[[Any], bool]:
    def apply(client: Any) -> bool:
        top = max_token(client, meta)
        if client.hget(ctr, "tok") != bad:
            return False
        client.hset(ctr, "tok", top + 1)
        return True

    return apply


# ------------------------------------------------------------------ orphan records

#: records of a queue's meta hash looked at for orphans, at most, per partition
ORPHAN_SCAN = 20_000


def orphan_problems(q: EngineBase) -> list[KeyProblem]:
    """Records in no set (an orphan: its set entry was removed by hand or by a bug, so no
    script will ever move it): one finding per partition that has any, with the repair
    that moves each into the dead letters (error ``orphan record``), where an operator can
    requeue or delete it. Reads at most ORPHAN_SCAN records per partition."""
    out: list[KeyProblem] = []
    for k in q._part_keys:
        sets = (k.ready, k.delayed, k.leased, k.dead, k.wait, k.expired)
        with unavailable_as_error():
            if any(q._client.type(key) not in (b"zset", b"none") for key in sets) or (
                q._client.type(k.meta) != b"hash"
            ):
                continue  # a key of the wrong type: named by key_problems, repaired first
            ids: list[bytes] = []
            for tag, _ in q._client.hscan_iter(k.meta, count=1000):
                ids.append(tag)
                if len(ids) >= ORPHAN_SCAN:
                    break
            pipe = q._client.pipeline(transaction=False)
            for tag in ids:
                for key in sets:
                    pipe.zscore(key, tag)
            found = pipe.execute() if ids else []
        width = len(sets)
        maybe = [
            tag
            for i, tag in enumerate(ids)
            if all(score is None for score in found[i * width : (i + 1) * width])
        ]
        orphans = still_orphans(q._client, k, maybe)
        if not orphans:
            continue
        shown = ", ".join(t.decode("utf-8", "replace") for t in orphans[:5])
        message = (
            f"queue {q.name!r}: {len(orphans)} job record(s) in no set ({shown}"
            f"{', ...' if len(orphans) > 5 else ''}): nothing will ever run or remove them"
        )
        fix = (
            "python manage.py zqueue_doctor --repair --yes moves them to the dead letters "
            "(requeue or delete them there)"
        )
        repair = Repair(k.meta, f"{len(orphans)} orphan record(s) to {k.dead}", _bury(k, orphans))
        out.append(KeyProblem(Finding("error", "keys", message, fix), repair))
    return _bound(q, out)


#: records re-checked in one transaction (``still_orphans``)
RECHECK_STEP = 200


def _sets(k: Any) -> tuple[str, ...]:
    """The sets a job is in, one at a time (a record in none of them is an orphan)."""
    return (k.ready, k.delayed, k.leased, k.dead, k.wait, k.expired)


def still_orphans(client: Any, k: Any, tags: list[bytes]) -> list[bytes]:
    """Those of ``tags`` whose record exists and is in no set, each read at one instant
    (``MULTI``/``EXEC``: a script moves a job from set to set, or ends it, between the
    reads of a plain pipeline, which would make a live job look orphaned)."""
    out: list[bytes] = []
    sets = _sets(k)
    for at in range(0, len(tags), RECHECK_STEP):
        step = tags[at : at + RECHECK_STEP]
        with unavailable_as_error():
            pipe = client.pipeline(transaction=True)
            for tag in step:
                pipe.hexists(k.meta, tag)
                for key in sets:
                    pipe.zscore(key, tag)
            replies = pipe.execute()
        width = 1 + len(sets)
        for i, tag in enumerate(step):
            exists, *scores = replies[i * width : (i + 1) * width]
            if exists and all(score is None for score in scores):
                out.append(tag)
    return out


def _bury(k: Any, orphans: list[bytes]) -> Callable[[Any], bool]:
    def apply(client: Any) -> bool:
        now = time.time() * 1000
        buried = 0
        for tag in still_orphans(client, k, orphans):
            client.hset(k.errors, tag, "orphan record: in no set (zqueue_doctor --repair)")
            buried += client.zadd(k.dead, {tag: now}, nx=True)
        return buried > 0

    return apply
