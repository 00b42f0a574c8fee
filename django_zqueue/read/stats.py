"""The stats hash and the workers hash of a queue, decoded in one place.

The stats hash (``{p:q}:stats``) holds the lifetime counters (``enqueued``, ``acked``,
``run_ms``, ...) and a 64-slot ring of per-minute figures: slot ``i`` holds the minute it
counts (``m<i>``) and one field per series (``e<i>``, ``a<i>``, ...). A slot whose minute
is not the one asked for is stale (64 minutes old or more) and counts as zero. A slot's
depth (``r<i>``) is sampled (by a scan and by the publish that begins a minute), not
counted: a minute with no sample has none, a gap on a chart, never a zero. Jobs of the
lean publish (``lua/publish_lean.lua``) wait in ``en`` until the next scan moves them into
``enqueued`` and its minute; a reading adds them to both meanwhile.

The workers hash (``{p:q}:workers``) maps a worker id to its registration, JSON
``{threads, seen, host, pid}``; a registration not seen lately is a dead worker's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ..engine.records import from_ms, text
from ..engine.rollup import RINGS as ROLL_RINGS
from .source import Readable

#: the per-minute series of the stats ring: field prefix -> name
SERIES = {"e": "enqueued", "a": "acked", "f": "failed", "d": "dead", "t": "run_ms", "r": "ready"}
#: a worker registration older than this no longer counts (``live_threads``' default)
WORKER_WITHIN_MS = 30_000
#: the ring's slots
RING = 64
#: the field of jobs published since the last scan, not yet in ``enqueued`` and the ring
PENDING = "en"


def decode_stats(raw: Mapping[bytes | str, bytes | str]) -> dict[str, int]:
    """A stats hash (lifetime counters and the minute ring) as ints; a field whose value
    is not an integer is left out."""
    out: dict[str, int] = {}
    for k, v in raw.items():
        try:
            out[text(k)] = int(v)
        except ValueError:
            continue
    return out


def _lifetime(fields: Mapping[str, int]) -> dict[str, int]:
    """The fields of a decoded stats hash that are not the ring's, as stored."""
    return {name: v for name, v in fields.items() if not name[-1:].isdigit()}


def counters(fields: Mapping[str, int]) -> dict[str, int]:
    """The lifetime counters of a decoded stats hash (the ring's fields left out; jobs
    published since the last scan counted in ``enqueued``)."""
    out = _lifetime(fields)
    pending = out.pop(PENDING, 0)
    if pending:
        out["enqueued"] = out.get("enqueued", 0) + pending
    return out


def merge_stats(parts: Sequence[Mapping[str, int]], ring: int = RING) -> dict[str, int]:
    """Decoded stats hashes of several shards as one: lifetime counters summed field by
    field, and each slot of the minute ring summed over the shards whose slot holds the
    newest minute; a minute's depth only when every shard sampled it (a partial sum
    would draw a queue emptier than it is). One shard's hash is returned as it is."""
    if len(parts) == 1:
        return dict(parts[0])
    fields: dict[str, int] = {}
    for part in parts:
        for name, v in _lifetime(part).items():
            fields[name] = fields.get(name, 0) + v
    for slot in range(ring):
        owners = [part for part in parts if f"m{slot}" in part]
        if not owners:
            continue
        minute = max(part[f"m{slot}"] for part in owners)
        fields[f"m{slot}"] = minute
        for part in owners:
            if part[f"m{slot}"] != minute:
                continue
            for short in SERIES:
                key = f"{short}{slot}"
                if key in part:
                    fields[key] = fields.get(key, 0) + part[key]
        if any(part.get(f"m{slot}") != minute or f"r{slot}" not in part for part in parts):
            fields.pop(f"r{slot}", None)  # a shard took no sample: the sum would be too low
    return fields


def minute_rows(
    fields: Mapping[str, int], now_minute: int, last: int, ready_now: int | None = None
) -> list[dict[str, int]]:
    """Rows of :meth:`Queue.minutes` from the decoded stats hash (the 64-slot ring);
    ``ready_now``, when given, is the current minute's depth (the live ZCARD)."""
    out = []
    for minute in range(now_minute - last + 1, now_minute + 1):
        slot = minute % RING
        live = fields.get(f"m{slot}") == minute
        row = {"minute": minute}
        for short, name in SERIES.items():
            row[name] = fields.get(f"{short}{slot}", 0) if live else 0
        if not live or f"r{slot}" not in fields:
            row["ready"] = -1
        out.append(row)
    if ready_now is not None and out:
        out[-1]["ready"] = ready_now
    pending = fields.get(PENDING, 0)
    if pending and out and out[-1]["minute"] == now_minute:  # not yet in the ring
        out[-1]["enqueued"] += pending
    return out


@dataclass(frozen=True, slots=True)
class Minute:
    """One minute of the stats ring (a row of :meth:`Queue.minutes`)."""

    minute: int  # minutes since the epoch, Redis time
    enqueued: int
    acked: int
    failed: int
    dead: int
    run_ms: int
    ready: int  # depth sampled in that minute (-1: none taken); the current minute: now
    #: False: a bucket of a roll-up ring no roll-up wrote (a gap, its counts unknown)
    live: bool = True

    @property
    def start(self) -> datetime:
        return from_ms(self.minute * 60_000)


def minutes(
    fields: Mapping[str, int], now_ms: int, last: int = 60, ready_now: int | None = None
) -> list[Minute]:
    """The last ``last`` minutes, oldest first, from the decoded stats hash (the current
    minute's depth is ``ready_now`` when given)."""
    rows = minute_rows(fields, now_ms // 60_000, last, ready_now)
    return [Minute(**row) for row in rows]  # type: ignore[arg-type]


def local_ms() -> int:
    """This host's clock in ms: worker registrations carry their host's clock."""
    return int(time.time() * 1000)


def live_thread_count(workers: Mapping[bytes | str, bytes | str], cutoff_ms: float) -> int:
    """Threads of the worker registrations (the workers hash) seen since ``cutoff_ms``;
    a registration that is not a JSON object with numbers is left out."""
    total = 0
    for value in workers.values():
        try:
            entry = json.loads(value)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        seen, threads = entry.get("seen", 0), entry.get("threads", 1)
        if isinstance(seen, int | float) and isinstance(threads, int) and seen >= cutoff_ms:
            total += threads
    return total


def live_threads_now(workers: Mapping[bytes | str, bytes | str]) -> int:
    """Threads of the registrations seen in the last 30 s, by this host's clock (as
    :meth:`Queue.live_threads`)."""
    return live_thread_count(workers, local_ms() - WORKER_WITHIN_MS)


def mean_run_ms(acked: int, run_ms: int) -> float | None:
    """The mean reported run time of the acked jobs; None before any was acked."""
    return run_ms / acked if acked else None


def eta_seconds(rank: int, mean_ms: float | None, workers: int) -> float | None:
    """Seconds until the job at ``rank`` has run: ``(rank + 1) x mean run time / live
    worker threads`` (at least one), as :meth:`Job.eta` estimates it."""
    if mean_ms is None:
        return None
    return (rank + 1) * mean_ms / 1000 / max(1, workers)


def task_stat_slots(q: Readable, first: int, last: int) -> list[dict[bytes, bytes]]:
    """The raw per-task statistics hashes of slots ``first`` to ``last`` (inclusive) of
    ``q`` (:mod:`django_zqueue.worker.taskstats` merges them): one round trip, one read a
    slot (:meth:`Reads.task_stat_slots <django_zqueue.engine.reads.Reads.task_stat_slots>`)."""
    return q.reads.task_stat_slots(first, last)


def buckets(
    fields: Mapping[str, int], now_ms: int, size: int, last: int, ready_now: int | None = None
) -> list[Minute]:
    """The last ``last`` buckets of ``size`` minutes (10 or 60), oldest first, from a
    decoded roll-up ring; each row's ``minute`` is its bucket's first minute. A bucket no
    roll-up wrote is not ``live`` (a gap); the current bucket's depth is ``ready_now``
    when given."""
    ring = ROLL_RINGS[size]
    now = now_ms // 60_000 // size
    out = []
    for bucket in range(now - last + 1, now + 1):
        slot = bucket % ring
        live = fields.get(f"m{slot}") == bucket
        row = {
            name: fields.get(f"{short}{slot}", 0) if live else 0 for short, name in SERIES.items()
        }
        if not live or f"r{slot}" not in fields:
            row["ready"] = -1
        out.append(Minute(minute=bucket * size, live=live, **row))
    if ready_now is not None and out:
        out[-1] = replace(out[-1], ready=ready_now)
    return out
