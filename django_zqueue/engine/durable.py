"""The engine's part of durable tasks (``engine.durable``, docs/durable.md): the script
calls of ``steps.lua`` (a run's one read of its records), ``step.lua`` (record a step,
fenced by the delivery token), ``park.lua`` (end a run waiting for a time or an event,
no attempt used), ``signal.lua`` (deliver an event) and ``parked.lua`` (what a delayed
job waits for), as typed verbs of :class:`Durable`.

Every record of a job lives in one hash, ``{p:q}:steps:<id>`` (:meth:`QueueKeys.steps`):
``s:<name>`` a step's JSON result, ``z:<name>`` a sleep's wake time, ``w:<name>`` a wait's
deadline, ``g:<name>`` an event's payload.

Each verb is one script call (one round trip); the ``*_call`` verbs give the call itself,
for a caller that sends it its own way (the asyncio client) or batches several.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..conf.bounds import MAX_DELAY
from .records import Message, from_ms, text
from .scripts import Call
from .scripts.replies import ParkReply, SignalReply, StepReply

if TYPE_CHECKING:
    from .base import EngineBase
    from .shard import Shard

#: most records (steps, sleeps, waits, events) one job may hold
MAX_STEPS = 1000
#: longest JSON result of one step, or payload of one event, in bytes
MAX_STEP_BYTES = 256 * 1024
#: a job's records outlive its last run start by the dead letters' TTL and this much
KEEP_MARGIN_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class Records:
    """What ``steps.lua`` read at the start of a run: Redis time, whether this delivery
    holds the lease, and every record by field."""

    now_ms: int
    leased: bool
    fields: dict[str, str]


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
    """What ``parked.lua``'s reply says a job is parked for (None: it is not)."""
    if reply is None:
        return None
    field, wake = reply
    return ParkedFor("sleep" if field.startswith("z:") else "event", field[2:], from_ms(wake))


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


def step_call(
    shard: Shard, msg: Message, field: str, value: str, keep: int, replace: bool = False
) -> Call[StepReply]:
    k = shard.keys
    keys = (k.leased, k.meta, k.steps(msg.tag), k.ctr)
    args: tuple[str | int, ...] = (
        msg.tag,
        msg.token,
        field,
        value,
        MAX_STEPS,
        MAX_STEP_BYTES,
        keep,
    )
    if replace:  # an iteration's cursor: the value replaces the one recorded
        args = (*args, "1")
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


class Durable:
    """The durable-task verbs of one queue's engine (``engine.durable``). A field is a
    record's name with its kind (``s:<step>``, ``z:<sleep>``, ``w:<wait>``); values are
    the JSON text kept. Connection errors become ``QueueUnavailable``."""

    __slots__ = ("_engine",)

    def __init__(self, engine: EngineBase) -> None:
        self._engine = engine

    def keep_ms(self) -> int:
        """How long a job's records are kept after its last run (or its wake time): the
        dead letters' TTL and a day, so a job requeued from the dead letters still finds
        them."""
        return min(self._engine.policy.dead_ttl_ms + KEEP_MARGIN_MS, MAX_DELAY * 1000)

    # ---------------------------------------------------------------- the calls

    def run_call(self, msg: Message) -> Call[Records]:
        """The call of a run's one read of delivery ``msg``'s records (fenced: ``leased``
        says whether ``msg`` still holds the lease)."""
        return steps_call(self._engine._shard_for(msg.tag), msg, self.keep_ms())

    def step_call(
        self, msg: Message, field: str, value: str, replace: bool = False
    ) -> Call[StepReply]:
        """The call that records ``value`` (JSON) as ``field`` for delivery ``msg``
        (``replace``: over the value recorded, as an iteration's cursor moves)."""
        shard = self._engine._shard_for(msg.tag)
        return step_call(shard, msg, field, value, self.keep_ms(), replace)

    def park_call(self, msg: Message, field: str, ms: int) -> Call[tuple[ParkReply, str]]:
        """The call that ends delivery ``msg``'s run, parked on ``field`` (a sleep or a
        wait of ``ms``): its reply code and the wake time, deadline or event payload."""
        return park_call(self._engine._shard_for(msg.tag), msg, field, ms, self.keep_ms())

    def signal_call(self, tag: str, name: str, payload: str) -> Call[SignalReply]:
        """The call that delivers event ``name`` (``payload``: JSON) to job ``tag``."""
        return signal_call(self._engine._shard_for(tag), tag, name, payload, self.keep_ms())

    # ---------------------------------------------------------------- the verbs

    def run_records(self, msg: Message) -> Records:
        """A run's one read of delivery ``msg``'s records."""
        return self._engine.run(self.run_call(msg))

    def step(self, msg: Message, field: str, value: str, replace: bool = False) -> StepReply:
        """Record ``value`` as ``field`` for delivery ``msg`` (``STALE``: not recorded)."""
        return self._engine.run(self.step_call(msg, field, value, replace))

    def park(self, msg: Message, field: str, ms: int) -> tuple[ParkReply, str]:
        """End delivery ``msg``'s run parked on ``field`` (see :meth:`park_call`)."""
        return self._engine.run(self.park_call(msg, field, ms))

    def signal(self, tag: str, name: str, payload: str) -> SignalReply:
        """Deliver event ``name`` to job ``tag``: ``signal.lua``'s reply."""
        return self._engine.run(self.signal_call(tag, name, payload))

    def records(self, tag: str) -> Records:
        """Job ``tag``'s records, whatever its state (read only, not fenced)."""
        return self._engine.run(records_call(self._engine._shard_for(tag), tag))

    def parked(self, tag: str) -> ParkedFor | None:
        """What job ``tag`` is parked for (a durable sleep or wait), None if it is not."""
        return parked_for(self._engine.run(parked_call(self._engine._shard_for(tag), tag)))

    def parked_many(self, tags: Sequence[str]) -> dict[str, ParkedFor]:
        """What each job of ``tags`` that is parked waits for, in one round trip (none
        for no tags)."""
        if not tags:
            return {}
        e = self._engine
        batch = e.batch()
        pending = [(tag, batch.add(parked_call(e._shard_for(tag), tag))) for tag in tags]
        e.send(batch)
        out = {}
        for tag, p in pending:
            park = parked_for(p.result())
            if park is not None:
                out[tag] = park
        return out
