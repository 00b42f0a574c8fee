"""The queue-core side of durable tasks (docs/durable.md): the script calls of
``steps.lua`` (a run's one read of its records), ``step.lua`` (record a step, fenced by
the delivery token), ``park.lua`` (end a run waiting for a time or an event, no attempt
used), ``signal.lua`` (deliver an event) and ``parked.lua`` (what a delayed job waits
for), and :class:`Durable`, the ``signal`` and ``parked`` methods of a queue.

Every record of a job lives in one hash, ``{p:q}:steps:<id>`` (:meth:`QueueKeys.steps`):
``s:<name>`` a step's JSON result, ``z:<name>`` a sleep's wake time, ``w:<name>`` a wait's
deadline, ``g:<name>`` an event's payload.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..conf.bounds import MAX_DELAY
from ..engine.records import Message, from_ms, text
from ..engine.scripts import Call
from ..engine.scripts.replies import ParkReply, SignalReply, StepReply
from ..exceptions import InvalidArgument, SignalRefused, StepError
from .base import QueueBase

if TYPE_CHECKING:
    from ..engine.shard import Shard

#: most records (steps, sleeps, waits, events) one job may hold
MAX_STEPS = 1000
#: longest JSON result of one step, or payload of one event, in bytes
MAX_STEP_BYTES = 256 * 1024
#: longest name of a step, sleep or event, in characters
MAX_NAME = 200
#: a job's records outlive its last run start by the dead letters' TTL and this much
KEEP_MARGIN_MS = 86_400_000


def keep_ms(q: QueueBase) -> int:
    """How long a job's records are kept after its last run (or its wake time): the dead
    letters' TTL and a day, so a job requeued from the dead letters still finds them."""
    return min(q.engine.policy.dead_ttl_ms + KEEP_MARGIN_MS, MAX_DELAY * 1000)


def check_name(name: Any, what: str = "step") -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME:
        raise StepError(f"a {what} name must be a str of 1 to {MAX_NAME} characters, got {name!r}")
    return name


def encode(value: Any, what: str) -> str:
    """``value`` as the JSON kept for it; StepError when it is not JSON or too big."""
    try:
        data = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StepError(f"{what} is not JSON: {exc}") from exc
    size = len(data.encode("utf-8"))
    if size > MAX_STEP_BYTES:
        raise StepError(
            f"{what} is {size} bytes as JSON, more than the {MAX_STEP_BYTES} allowed: "
            "keep a reference (a primary key, a URL) instead"
        )
    return data


@dataclass(frozen=True, slots=True)
class Records:
    """What ``steps.lua`` read at the start of a run: Redis time, whether this delivery
    holds the lease, and every record by field."""

    now_ms: int
    leased: bool
    fields: dict[str, str]


def _records(reply: Any) -> Records:
    pairs = [text(x) for x in reply[2:]]
    fields = dict(zip(pairs[0::2], pairs[1::2], strict=True))
    fields.pop("@e", None)  # whose records they are (lua/_durable_job.lua)
    return Records(int(reply[0]), int(reply[1]) == 1, fields)


def _park(reply: Any) -> tuple[ParkReply, str]:
    code = ParkReply(int(reply[0]))
    return code, (text(reply[1]) if len(reply) > 1 else "")


def _parked(reply: Any) -> tuple[str, int] | None:
    return (text(reply[0]), int(float(reply[1]))) if reply else None


def steps_call(shard: Shard, msg: Message, keep: int) -> Call[Records]:
    k = shard.keys
    keys = (k.leased, k.meta, k.steps(msg.tag))
    return Call("steps", keys, (msg.tag, msg.token, keep), _records)


def records_call(shard: Shard, tag: str) -> Call[Records]:
    """``steps.lua`` read only: job ``tag``'s records, whatever its state."""
    k = shard.keys
    return Call("steps", (k.leased, k.meta, k.steps(tag)), (tag, "", 1), _records)


def step_call(shard: Shard, msg: Message, field: str, value: str, keep: int) -> Call[StepReply]:
    k = shard.keys
    keys = (k.leased, k.meta, k.steps(msg.tag), k.ctr)
    args = (msg.tag, msg.token, field, value, MAX_STEPS, MAX_STEP_BYTES, keep)
    return Call("step", keys, args, lambda r: StepReply(int(r)))


def park_call(
    shard: Shard, msg: Message, field: str, ms: int, keep: int
) -> Call[tuple[ParkReply, str]]:
    k = shard.keys
    keys = (k.leased, k.delayed, k.meta, k.steps(msg.tag), k.progress, k.notify, k.ctr, k.stats)
    args = (msg.tag, msg.token, field, ms, keep, MAX_STEPS, shard.policy.notify_cap)
    return Call("park", keys, args, _park)


def signal_call(shard: Shard, tag: str, name: str, payload: str, keep: int) -> Call[SignalReply]:
    k = shard.keys
    sets = (k.ready, k.delayed, k.leased, k.dead, k.wait)
    keys = (*sets, k.meta, k.steps(tag), k.notify, k.ctr, k.stats)
    args = (tag, name, payload, MAX_STEP_BYTES, keep, MAX_STEPS, shard.policy.notify_cap)
    return Call("signal", keys, args, lambda r: SignalReply(int(r)))


def parked_call(shard: Shard, tag: str) -> Call[tuple[str, int] | None]:
    k = shard.keys
    return Call("parked", (k.delayed, k.meta), (tag,), _parked)


@dataclass(frozen=True, slots=True)
class DurableRecord:
    """One record of a job, as the admin's job page lists it: ``kind`` step, sleep, wait
    or event; ``value`` a step's result or an event's payload (JSON text), else None;
    ``at`` a sleep's wake time or a wait's timeout, else None."""

    kind: str
    name: str
    value: str | None
    at: datetime | None


KINDS = {"s": "step", "z": "sleep", "w": "wait", "g": "event"}


def listed(records: Records) -> list[DurableRecord]:
    """A job's records, steps first, in name order within each kind."""
    out = []
    for key, value in records.fields.items():
        kind = KINDS.get(key[:1])
        if kind is None or key[1:2] != ":":
            continue
        timed = kind in ("sleep", "wait")
        at = from_ms(int(value)) if timed and value.isdigit() else None
        out.append(DurableRecord(kind, key[2:], None if timed else value, at))
    order = list(KINDS.values())
    return sorted(out, key=lambda r: (order.index(r.kind), r.name))


@dataclass(frozen=True, slots=True)
class ParkedFor:
    """What a parked job waits for: ``kind`` "sleep" (until ``until``) or "event" (named
    ``name``, until ``until``, its timeout)."""

    kind: str
    name: str
    until: datetime

    @property
    def status(self) -> str:
        return "sleeping" if self.kind == "sleep" else "waiting_for_event"


def parked_for(reply: tuple[str, int] | None) -> ParkedFor | None:
    if reply is None:
        return None
    field, wake = reply
    return ParkedFor("sleep" if field.startswith("z:") else "event", field[2:], from_ms(wake))


def refused(reply: SignalReply, queue: str, tag: str, name: str) -> None:
    """Raise SignalRefused for a signal ``signal.lua`` refused; nothing for a delivery."""
    if reply is SignalReply.NO_JOB:
        raise SignalRefused(f"signal {name!r}: no job {tag!r} in queue {queue!r} (gone or ended)")
    if reply is SignalReply.ALREADY:
        raise SignalRefused(f"signal {name!r} was already delivered to job {tag!r}")
    if reply is SignalReply.TIMED_OUT:
        raise SignalRefused(f"job {tag!r} stopped waiting for {name!r}: its wait timed out")


def signal_args(tag: Any, name: Any, payload: Any) -> tuple[str, str, str]:
    if not isinstance(tag, str) or not tag:
        raise InvalidArgument(f"tag must be a non-empty str, got {tag!r}")
    return tag, check_name(name, "signal"), encode(payload, f"payload of signal {name!r}")


class Durable(QueueBase):
    """A queue's durable side: deliver an event to a job, ask what a job is parked for."""

    def signal(self, tag: str, name: str, payload: Any = None) -> bool:
        """Deliver event ``name`` with ``payload`` (JSON) to job ``tag``: a job parked in
        ``durable.wait_for(name)`` runs again at once, a job not there yet finds it when
        it gets there. Returns True when the job was woken, False when the event is kept
        for it. ``SignalRefused`` when there is no such job (or it ended), the event was
        delivered already, or the job's wait for it timed out: nothing written."""
        tag, name, data = signal_args(tag, name, payload)
        shard = self.engine.shard_for(tag)
        reply = self.engine.run(signal_call(shard, tag, name, data, keep_ms(self)))
        refused(reply, self.name, tag, name)
        return reply is SignalReply.WOKEN


def durable_records(q: QueueBase, tag: str) -> list[DurableRecord]:
    """Job ``tag``'s durable records (steps, sleeps, waits, events), for operators."""
    return listed(q.engine.run(records_call(q.engine.shard_for(tag), tag)))


def parked(q: QueueBase, tag: str) -> ParkedFor | None:
    """What job ``tag`` is parked for (a durable sleep or wait), None if it is not."""
    return parked_for(q.engine.run(parked_call(q.engine.shard_for(tag), tag)))
