"""A job's options as one value: :class:`JobSpec`, validated in one place
(:meth:`JobSpec.build`), and encoded once into the one script argument a job travels in
(:func:`pack_job`).

The argument is a MessagePack map (read in Lua with ``cmsgpack.unpack`` by the
``job_spec`` helper, ``lua/_new_job.lua``) whose keys are the names below: ``id`` and
``body`` of the job, then the options it sets (an option left at its default is left
out), then, for a workflow job, ``need``, ``kids`` and ``parents``. Each name is also the
field's name in :class:`JobSpec` and in :data:`~django_zqueue.conf.bounds.JOB_BOUNDS`, where its
bounds are; docs/architecture.md ("The job spec") lists them. A new option is a field
here, its check in :meth:`JobSpec.build`, its field in :class:`JobOptions` (the options as
a caller gives them, one value above the spec, checked once when made), its bound in
``bounds.py``, the line of ``read_job`` that reads it, and its docs.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from ...conf import bounds
from ...conf.fairness import group_problem
from ...exceptions import InvalidArgument
from . import validate


def _str(data: bytes) -> bytes:
    """A MessagePack str of ``data`` (Lua reads str and bin alike)."""
    n = len(data)
    if n < 32:
        return bytes((0xA0 | n,)) + data
    if n < 256:
        return b"\xd9" + bytes((n,)) + data
    if n < 65536:
        return b"\xda" + n.to_bytes(2, "big") + data
    return b"\xdb" + n.to_bytes(4, "big") + data


_DOUBLE = struct.Struct(">d")


def pack_value(value: object) -> bytes:
    """One value of a job spec as MessagePack: str, bytes, int (within 64 bits) or float;
    or a list of them (a column of ``ack_many``'s jobs)."""
    if isinstance(value, bool):
        return b"\xc3" if value else b"\xc2"
    if isinstance(value, int):
        if 0 <= value < 128:
            return bytes((value,))
        if -32 <= value < 0:
            return bytes((value & 0xFF,))
        return b"\xd3" + value.to_bytes(8, "big", signed=True)
    if isinstance(value, float):
        return b"\xcb" + _DOUBLE.pack(value)
    if isinstance(value, str):
        return _str(value.encode("utf-8"))
    if isinstance(value, bytes):
        return _str(value)
    if isinstance(value, list):
        return _array_header(len(value)) + b"".join(pack_value(x) for x in value)
    raise TypeError(f"a job spec holds str, bytes, int and float, not {type(value).__name__}")


def _array_header(n: int) -> bytes:
    return bytes((0x90 | n,)) if n < 16 else b"\xdc" + n.to_bytes(2, "big")


def _int(value: int) -> bytes:
    if 0 <= value < 128:
        return bytes((value,))
    if -32 <= value < 0:
        return bytes((value & 0xFF,))
    return b"\xd3" + value.to_bytes(8, "big", signed=True)


def pack_texts(values: Sequence[str]) -> bytes:
    """A MessagePack array of texts (a column of ``ack_many``'s jobs)."""
    return _array_header(len(values)) + b"".join(_str(v.encode("utf-8")) for v in values)


def pack_ints(values: Sequence[int]) -> bytes:
    """A MessagePack array of integers within 64 bits (a column of ``ack_many``'s jobs)."""
    return _array_header(len(values)) + b"".join(_int(v) for v in values)


def pack_columns(columns: Mapping[str, bytes]) -> bytes:
    """A MessagePack map of columns already packed (:func:`pack_texts`, :func:`pack_ints`)."""
    return _map_header(len(columns)) + b"".join(
        _str(name.encode("ascii")) + packed for name, packed in columns.items()
    )


def _map_header(n: int) -> bytes:
    return bytes((0x80 | n,)) if n < 16 else b"\xde" + n.to_bytes(2, "big")


def pack_map(values: dict[str, Any]) -> bytes:
    """A flat map as MessagePack (what :func:`pack_job` sends; also for tests that send a
    hand-made spec)."""
    out = [_map_header(len(values))]
    for name, value in values.items():
        out.append(_str(name.encode("ascii")))
        out.append(pack_value(value))
    return b"".join(out)


_ID, _BODY = _str(b"id"), _str(b"body")
_TASK, _ARGS, _KWARGS = _str(b"task"), _str(b"args"), _str(b"kwargs")

#: the fixed text of a task's body around its three parts, and the longest body split
#: into them (lua/_record.lua: BODY_TASK, BODY_ARGS, BODY_KWARGS, BODY_PARTS_MAX)
BODY_TASK, BODY_ARGS, BODY_KWARGS = b'{"task":', b',"args":', b',"kwargs":'
BODY_PARTS_MAX = 512


def body_parts(body: bytes) -> tuple[bytes, bytes, bytes] | None:
    """The task, args and kwargs texts of a body of a task's shape,
    ``{"task":<T>,"args":<A>,"kwargs":<K>}``, split by text alone where
    ``lua/_record.lua``'s ``body_parts`` splits it (the first ``,"args":``, the last
    ``,"kwargs":`` after it), so that the texts between the fixed ones give the body back
    byte for byte; None for any other body, or one over ``BODY_PARTS_MAX`` bytes."""
    n = len(body)
    if n > BODY_PARTS_MAX or not body.startswith(BODY_TASK) or body[-1:] != b"}":
        return None
    a = body.find(BODY_ARGS, 8)
    if a < 0:
        return None
    k = body.rfind(BODY_KWARGS, a + 8, n)
    if k < 0:
        return None
    return body[8:a], body[a + 8 : k], body[k + 10 : n - 1]


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job's options, in the units the scripts take (ms, ints), checked by
    :meth:`build`. None (or the default) means "not given": the queue's option applies.

    - ``priority``: higher first, in [-1000, 1000]; ``score``: a raw ready score instead
      of the priority's place.
    - ``delay_ms`` (from now, on Redis' clock) or ``run_at_ms`` (absolute): held back.
    - ``max_retries``; ``visibility_timeout_ms``: the job's own lease length.
    - ``group`` (its group key) and ``weight`` (its group's weight in a fair queue).
    - ``debounce_ms`` and ``unique_ms``: the rules of ``publish_once``.
    - ``expires_in_ms`` (from now, on Redis' clock) or ``expires_at_ms`` (absolute): a job
      not started by then never starts; it ends in the state ``expired``.
    - ``ordering_key``: the jobs of one key run one at a time, in their order;
      ``on_dead``: ``"skip"`` when the key's next job may run once this one is dead
      (None: ``"block"``, the default; sent only with an ordering key).
    """

    priority: int = 0
    score: float | None = None
    delay_ms: int | None = None
    run_at_ms: int | None = None
    max_retries: int = 0
    visibility_timeout_ms: int | None = None
    group: str | None = None
    weight: float | None = None
    debounce_ms: int | None = None
    unique_ms: int | None = None
    expires_in_ms: int | None = None
    expires_at_ms: int | None = None
    ordering_key: str | None = None
    on_dead: str | None = None
    #: the options as encoded MessagePack pairs, made once per spec (not a field to set)
    packed: bytes = field(default=b"", compare=False, repr=False)
    #: how many pairs ``packed`` holds
    count: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        pairs = [
            (f.name, getattr(self, f.name))
            for f in fields(self)
            if f.name not in ("packed", "count")
        ]
        given = {n: v for n, v in pairs if v is not None and not (n == "priority" and v == 0)}
        object.__setattr__(self, "count", len(given))
        object.__setattr__(self, "packed", pack_map(given)[len(_map_header(len(given))) :])

    @classmethod
    def build(
        cls,
        *,
        priority: int = 0,
        score: float | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        max_retries: int = 0,
        visibility_timeout: float | timedelta | None = None,
        group: str | None = None,
        weight: float | None = None,
        debounce: float | timedelta | None = None,
        unique_for: float | timedelta | None = None,
        expires: float | timedelta | datetime | None = None,
        ordering_key: str | None = None,
        on_dead: str | None = None,
    ) -> JobSpec:
        """The spec of these options as a caller gives them (seconds or timedelta,
        aware datetimes), each checked against :mod:`~django_zqueue.conf.bounds`; raises
        :class:`InvalidArgument` for the first one out of bounds."""
        delay_ms = run_at_ms = None
        if delay is not None or run_at is not None:
            delay_ms, run_at_ms = validate.when(delay, run_at)
        expires_in_ms, expires_at_ms = _expiry(expires)
        debounce_ms = _positive_ms(debounce, "debounce")
        if debounce_ms is not None and (delay_ms is not None or run_at_ms is not None):
            raise InvalidArgument("debounce sets the run-at: give no delay or run_at with it")
        if group is not None:
            problem = group_problem(group)
            if problem:
                raise InvalidArgument(problem)
        _check_order(ordering_key, on_dead)
        return cls(
            priority=validate.priority(priority),
            score=None if score is None else validate.score(score),
            delay_ms=delay_ms,
            run_at_ms=run_at_ms,
            max_retries=validate.max_retries(max_retries),
            visibility_timeout_ms=(
                None
                if visibility_timeout is None
                else validate.visibility_timeout_ms(visibility_timeout)
            ),
            group=group,
            weight=_weight(weight),
            debounce_ms=debounce_ms,
            unique_ms=_positive_ms(unique_for, "unique_for"),
            expires_in_ms=expires_in_ms,
            expires_at_ms=expires_at_ms,
            ordering_key=ordering_key,
            on_dead="skip" if ordering_key is not None and on_dead == "skip" else None,
        )


def _check_order(ordering_key: object, on_dead: object) -> None:
    """Raise :class:`InvalidArgument` for an ordering key or ``on_dead`` rule out of bounds."""
    problem = None if ordering_key is None else bounds.ordering_key_problem(ordering_key)
    problem = problem or (None if on_dead is None else bounds.on_dead_problem(on_dead))
    if problem:
        raise InvalidArgument(problem)


def _weight(weight: float | None) -> float | None:
    """A group's weight as a spec holds it (None for 1), checked against its bounds."""
    if weight is None:
        return None
    if not (bounds.is_number(weight) and bounds.MIN_WEIGHT <= weight <= bounds.MAX_WEIGHT):
        raise InvalidArgument(
            f"weight must be a number in [{bounds.MIN_WEIGHT}, {bounds.MAX_WEIGHT:g}]"
        )
    return None if weight == 1.0 else float(weight)


@dataclass(frozen=True, slots=True)
class JobOptions:
    """A job's options as a caller gives them (seconds or timedelta, aware datetimes;
    None: not given, the queue's option applies), as one value: what ``@task`` holds,
    what ``Task.using`` replaces fields of (``dataclasses.replace``) and what
    ``Queue.prepare`` takes whole. Checked once, when made, by :meth:`JobSpec.build`
    (:class:`InvalidArgument` for the first value out of bounds); ``spec`` is the
    result. A new per-job option is a field here and in :class:`JobSpec`.

    ``debounce`` and ``unique_for`` are the rules of ``publish_once``: a job prepared
    with these options leaves them out of its spec (:meth:`job_spec`), and the publish
    applies them."""

    priority: int = 0
    score: float | None = None
    delay: float | timedelta | None = None
    run_at: datetime | None = None
    max_retries: int | None = None
    visibility_timeout: float | timedelta | None = None
    group: str | None = None
    debounce: float | timedelta | None = None
    unique_for: float | timedelta | None = None
    expires: float | timedelta | datetime | None = None
    #: the jobs of one key run one at a time, in their order (docs/job-control.md)
    ordering_key: str | None = None
    #: when the key's holder dies: "block" (None: the default) or "skip"
    on_dead: str | None = None
    #: the checked spec of these options (``max_retries`` 0 when not given; no weight)
    spec: JobSpec = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", _checked(self))

    @property
    def once(self) -> bool:
        """Whether the options hold a rule of ``publish_once``."""
        return self.debounce is not None or self.unique_for is not None

    def job_spec(self, max_retries: int, weight: float | None = None) -> JobSpec:
        """The spec of a job with these options: ``max_retries`` (the queue's) when the
        options give none, ``weight`` (its group's, in a fair queue), without the rules
        of ``publish_once``."""
        spec = self.spec
        if weight is None and spec.debounce_ms is None and spec.unique_ms is None:
            if self.max_retries is not None or max_retries == spec.max_retries:
                return spec
            if spec.count == (spec.priority != 0) + 1:  # only a priority and retries
                return plain_spec(spec.priority, max_retries)
        return _completed(spec, max_retries if self.max_retries is None else None, weight)


#: the options of :class:`JobOptions`, by name
OPTION_FIELDS = tuple(f.name for f in fields(JobOptions) if f.init)


def _checked(o: JobOptions) -> JobSpec:
    if (
        type(o.priority) is int
        and (o.max_retries is None or type(o.max_retries) is int)
        and o.score is None
        and o.delay is None
        and o.run_at is None
        and o.visibility_timeout is None
        and o.group is None
        and o.debounce is None
        and o.unique_for is None
        and o.expires is None
        and o.ordering_key is None
        and o.on_dead is None
    ):  # the common case: one spec per priority and retries, checked once
        return plain_spec(o.priority, o.max_retries or 0)
    return JobSpec.build(
        priority=o.priority,
        score=o.score,
        delay=o.delay,
        run_at=o.run_at,
        max_retries=0 if o.max_retries is None else o.max_retries,
        visibility_timeout=o.visibility_timeout,
        group=o.group,
        debounce=o.debounce,
        unique_for=o.unique_for,
        expires=o.expires,
        ordering_key=o.ordering_key,
        on_dead=o.on_dead,
    )


@lru_cache(maxsize=256)
def plain_spec(priority: int, max_retries: int) -> JobSpec:
    """The spec of a job with only a priority and retries (checked when first made)."""
    return JobSpec.build(priority=priority, max_retries=max_retries)


@lru_cache(maxsize=256)
def _completed(spec: JobSpec, max_retries: int | None, weight: float | None) -> JobSpec:
    """``spec`` with the queue's ``max_retries`` (None: the spec's own), the group's
    ``weight`` and without the rules of ``publish_once``."""
    changes: dict[str, Any] = {}
    if max_retries is not None and max_retries != spec.max_retries:
        changes["max_retries"] = validate.max_retries(max_retries)
    if weight is not None:
        changes["weight"] = _weight(weight)
    if spec.debounce_ms is not None or spec.unique_ms is not None:
        changes["debounce_ms"] = changes["unique_ms"] = None
    return replace(spec, **changes) if changes else spec


def _expiry(value: float | timedelta | datetime | None) -> tuple[int | None, int | None]:
    """``expires`` as the spec's (expires_in_ms, expires_at_ms): seconds or a timedelta
    from now (Redis' clock), or an aware datetime; refused when not in the future."""
    if value is None:
        return None, None
    if isinstance(value, datetime):
        try:
            _, at_ms = validate.when(None, value)
        except InvalidArgument as exc:  # its checks name run_at: this is expires
            raise InvalidArgument(str(exc).replace("run_at", "expires")) from None
        assert at_ms is not None
        if at_ms <= time.time() * 1000:
            raise InvalidArgument(f"expires is in the past: {value.isoformat()}")
        return None, at_ms
    ms = validate.seconds(value, "expires") * 1000
    lo, hi, _ = bounds.JOB_BOUNDS["expires_in_ms"]
    if not lo <= ms <= hi:
        raise InvalidArgument("expires must be at least 1 ms from now and within 3650 days")
    return int(ms), None


def _positive_ms(value: float | timedelta | None, what: str) -> int | None:
    if value is None:
        return None
    ms = validate.seconds(value, what) * 1000
    lo, hi, _ = bounds.JOB_BOUNDS[f"{'unique' if what == 'unique_for' else what}_ms"]
    if not (math.isfinite(ms) and lo <= ms <= hi):
        raise InvalidArgument(f"{what} must be at least 1 ms and within 3650 days")
    return int(ms)


#: the spec of a job with no options given
DEFAULT_SPEC = JobSpec()
#: the names of a spec's options
SPEC_FIELDS = tuple(f.name for f in fields(JobSpec) if f.name not in ("packed", "count"))


def spec_fields(spec: JobSpec) -> dict[str, Any]:
    """The options a spec sets (None and a priority of 0 left out), by name: JSON-safe."""
    return {
        n: v
        for n in SPEC_FIELDS
        if (v := getattr(spec, n)) is not None and not (n == "priority" and v == 0)
    }


def spec_of(values: dict[str, Any]) -> JobSpec:
    """A spec from :func:`spec_fields` (names it does not know are left out: the scripts
    check every value again)."""
    return JobSpec(**{n: v for n, v in values.items() if n in SPEC_FIELDS})


def pack_job(
    tag: str,
    body: bytes,
    spec: JobSpec,
    extra: dict[str, Any] | None = None,
    split: bool = False,
) -> bytes:
    """The one script argument of a job: ``{"id": tag, "body": body, <spec's options>,
    <extra>}`` as MessagePack (``extra``: a workflow job's ``need``, ``kids``,
    ``parents``). With ``split``, a body of a task's shape goes as its parts instead
    (``task``, ``args``, and ``kwargs`` unless it is ``{}``: :func:`body_parts`), which
    the script joins and stores as they are, without splitting the body again."""
    cut = body_parts(body) if split else None
    if cut is None:
        fields = [_BODY, _str(body)]
    else:
        fields = [_TASK, _str(cut[0]), _ARGS, _str(cut[1])]
        if cut[2] != b"{}":
            fields += (_KWARGS, _str(cut[2]))
    n = 1 + len(fields) // 2 + spec.count + (len(extra) if extra else 0)
    parts = [_map_header(n), _ID, _str(tag.encode("utf-8")), *fields, spec.packed]
    if extra:
        parts.append(pack_map(extra)[len(_map_header(len(extra))) :])
    return b"".join(parts)
