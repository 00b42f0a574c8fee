"""The queue-core side of durable tasks (docs/durable.md): checking names and payloads,
listing a job's records for operators, and :class:`Durable`, the ``signal`` method of a
queue. The script calls (``steps.lua``, ``step.lua``, ``park.lua``, ``signal.lua``,
``parked.lua``) are the engine's (:mod:`django_zqueue.engine.durable`, ``engine.durable``);
their names are also importable from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..engine.durable import (
    KEEP_MARGIN_MS,
    MAX_STEP_BYTES,
    MAX_STEPS,
    ParkedFor,
    Records,
    park_call,
    parked_call,
    parked_for,
    records_call,
    signal_call,
    step_call,
    steps_call,
)
from ..engine.records import from_ms
from ..engine.scripts.replies import SignalReply
from ..exceptions import InvalidArgument, SignalRefused, StepError
from .base import QueueBase

__all__ = [
    "KEEP_MARGIN_MS",
    "MAX_NAME",
    "MAX_STEPS",
    "MAX_STEP_BYTES",
    "Durable",
    "DurableRecord",
    "ParkedFor",
    "Records",
    "check_name",
    "durable_records",
    "encode",
    "keep_ms",
    "listed",
    "park_call",
    "parked",
    "parked_call",
    "parked_for",
    "records_call",
    "refused",
    "signal_args",
    "signal_call",
    "step_call",
    "steps_call",
]

#: longest name of a step, sleep or event, in characters
MAX_NAME = 200


def keep_ms(q: QueueBase) -> int:
    """How long a job's records are kept after its last run (or its wake time): the dead
    letters' TTL and a day, so a job requeued from the dead letters still finds them."""
    return q.engine.durable.keep_ms()


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
class DurableRecord:
    """One record of a job, as the admin's job page lists it: ``kind`` step, sleep, wait
    or event; ``value`` a step's result or an event's payload (JSON text), else None;
    ``at`` a sleep's wake time or a wait's timeout, else None."""

    kind: str
    name: str
    value: str | None
    at: datetime | None


KINDS = {"s": "step", "i": "cursor", "z": "sleep", "w": "wait", "g": "event"}


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
        reply = self.engine.durable.signal(tag, name, data)
        refused(reply, self.name, tag, name)
        return reply is SignalReply.WOKEN


def durable_records(q: QueueBase, tag: str) -> list[DurableRecord]:
    """Job ``tag``'s durable records (steps, sleeps, waits, events), for operators."""
    return listed(q.engine.durable.records(tag))


def parked(q: QueueBase, tag: str) -> ParkedFor | None:
    """What job ``tag`` is parked for (a durable sleep or wait), None if it is not."""
    return q.engine.durable.parked(tag)
