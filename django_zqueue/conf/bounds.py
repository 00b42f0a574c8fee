"""Bounds of what becomes a lease, a delay or a count (docs/settings.md, "Bounds").

This is the one table of them: the scripts' copy, ``lua/_bounds.lua``, is generated from
it by :func:`lua_source` (``python -m django_zqueue.conf.bounds`` writes it; a test fails when
the file differs), so the scripts refuse exactly what lies outside these numbers. The
names of a job's options (:data:`JOB_OPTIONS`) are here too, generated into
``lua/_job_options.lua`` the same way.
:data:`JOB_BOUNDS` holds the bounds of a job's options by their name in the job spec
(:mod:`django_zqueue.engine.records.spec`). The ``*_problem`` functions
say why a value is out of bounds (or None); :mod:`django_zqueue.conf` reports them for
the settings, :func:`check_job_options` and
:mod:`django_zqueue.engine.records.validate` raise them for calls.
"""

from __future__ import annotations

import math
from typing import Protocol

from ..exceptions import InvalidArgument

MIN_VISIBILITY_TIMEOUT = 1  # seconds: a shorter lease expires under a running job
MAX_VISIBILITY_TIMEOUT = 7 * 86400  # seconds: a longer one hides a dead worker's job for days
MAX_RETRIES = 1000
MAX_DELAY = 3650 * 86400  # seconds: the horizon of delay, run_at and a retry's wait
MAX_BACKOFF = 7 * 86400  # seconds: retry_backoff base and max
#: numbers beyond 2**53 lose precision as doubles (scores, Lua numbers)
MAX_EXACT = 2**53
PRIORITY_MIN = -1000
PRIORITY_MAX = 1000
#: longest group key, in UTF-8 bytes (it is stored in every job's record)
MAX_GROUP_BYTES = 200
#: longest ordering key, in UTF-8 bytes (stored in the record of every job that has one)
MAX_ORDERING_KEY_BYTES = 200
#: a group's weight lies in [MIN_WEIGHT, MAX_WEIGHT]; a job of weight w costs 1/w
MIN_WEIGHT = 0.001
MAX_WEIGHT = 1000.0
#: most parents a job may wait for, and most dependents a job may have
MAX_LINKS = 10_000
#: a job's tag is 1..MAX_TAG_BYTES bytes of UTF-8
MAX_TAG_BYTES = 256
#: most waiting jobs (ready and delayed) a queue's ``max_length`` may allow
MAX_QUEUE_LENGTH = 10**12
#: most waiting jobs of one group a fair queue's ``group_max_length`` may allow (a publish
#: past the count of a group's index entries reads up to this many + 1000 of them)
MAX_GROUP_LENGTH = 1000

#: bounds of a fair queue's per-group limits: jobs of one group in flight, starts of one
#: group per second (conf/fairness.py checks the options, claim_fair.lua the calls)
MAX_GROUP_CONCURRENCY = 1000
MAX_GROUP_QPS = 1_000_000
#: the highest virtual time a fair queue may reach (ZQ_SEQUENCE_EXHAUSTED past it): a
#: weight-1 job advances it by 1, so this is 2^50 weight-1 starts; far below 2^53, where a
#: double stops holding every integer
MAX_VTIME = 2**50
#: most jobs of one group a single publish may add (the group check's count per group)
MAX_GROUP_ADDS = 1_000_000

# What one script call may be asked for at most: the bounds of its arguments.
#: most entries a read of a sorted set returns or looks at per call (range_after, search),
#: and the longest text a search looks for, in bytes
MAX_PAGE = 1000
MAX_NEEDLE_BYTES = 1000
#: a search's field form (``user_id:4242``, ``args.0:abc``): the longest path, in bytes,
#: and the most dot-separated parts it may have
MAX_FIELD_PATH_BYTES = 200
MAX_FIELD_PATH_PARTS = 24
#: most fields a job's durable records may hold (step, park, signal: their max_fields),
#: and the longest value one of them may be, in bytes (16 MiB)
MAX_STEP_FIELDS = 10_000
MAX_VALUE_BYTES = 16 * 2**20
#: the highest notify cap a call takes (park, signal)
MAX_NOTIFY_CAP = 1_000_000
#: the most jobs one ``publish`` (or ``wf_publish``) script call adds, and the most bytes
#: of bodies the client puts in one call (a job whose body alone is larger goes in a call
#: of its own): whichever comes first cuts a publish of many jobs into calls that each
#: stay under 5 ms of Redis time (docs/performance.md, "Publishing many jobs": measured
#: about 5.5 µs a default job, 14 µs with every option on a fair queue, 5 µs per KiB of
#: body, so a full call costs 0.5 to 2.2 ms)
MAX_PUBLISH_JOBS = 100
PUBLISH_CALL_BYTES = 128 * 1024
#: script calls sent per round trip by a publish of many jobs: a failure stops the
#: publish at the end of its round trip, so what was written is known (the exception's
#: ``published``), and the client never holds more than this many calls' arguments
PUBLISH_WINDOW = 64

_MAX_DELAY_MS = MAX_DELAY * 1000

#: the bounds of a job's options, by their name in the job spec (jobspec.py) and in the
#: scripts: (lowest, highest, integer only). The scripts read this table (generated into
#: the ``bounds`` helper), so a new option's bound is one line here.
JOB_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "priority": (PRIORITY_MIN, PRIORITY_MAX, True),
    "score": (-MAX_EXACT, MAX_EXACT, False),
    # a delay <= 0 means now
    "delay_ms": (-MAX_EXACT, _MAX_DELAY_MS, True),
    # the client's reading of the clock: the scripts allow a day of skew past the horizon
    "run_at_ms": (0, MAX_EXACT, True),
    "max_retries": (0, MAX_RETRIES, True),
    "visibility_timeout_ms": (MIN_VISIBILITY_TIMEOUT * 1000, MAX_VISIBILITY_TIMEOUT * 1000, True),
    "weight": (MIN_WEIGHT, MAX_WEIGHT, False),
    "debounce_ms": (1, _MAX_DELAY_MS, True),
    # a job not started by then ends "expired": from now, or absolute (client's clock)
    "expires_in_ms": (1, _MAX_DELAY_MS, True),
    "expires_at_ms": (0, MAX_EXACT, True),
    "unique_ms": (1, _MAX_DELAY_MS, True),
    "need": (0, MAX_LINKS, True),
    "group_bytes": (1, MAX_GROUP_BYTES, True),
    "ordering_key_bytes": (1, MAX_ORDERING_KEY_BYTES, True),
    "id_bytes": (1, MAX_TAG_BYTES, True),
}

#: a job's options by their name in the job spec (the fields of
#: :class:`~django_zqueue.engine.records.spec.JobSpec`, tests/test_bounds.py checks it)
#: and in the job map the scripts read: ``number`` (bounded by :data:`JOB_BOUNDS`) or
#: ``text``. Every publish script takes these (``read_job``, ``lua/_new_job.lua``); the
#: scripts' copy, ``lua/_job_options.lua``, is generated by :func:`options_lua_source`.
JOB_OPTIONS: dict[str, str] = {
    "priority": "number",
    "score": "number",
    "delay_ms": "number",
    "run_at_ms": "number",
    "max_retries": "number",
    "visibility_timeout_ms": "number",
    "group": "text",
    "weight": "number",
    "expires_in_ms": "number",
    "expires_at_ms": "number",
    "ordering_key": "text",
    "on_dead": "text",
}
#: the options only ``publish_once`` takes, on top of :data:`JOB_OPTIONS`
ONCE_OPTIONS: tuple[str, ...] = ("debounce_ms", "unique_ms")
#: what a producer of wire protocol 1 may give (``proto_publish.lua``, docs/protocol.md: a
#: public contract, never narrowed): the job's id and these options
PROTOCOL_OPTIONS: tuple[str, ...] = (
    "id",
    "priority",
    "delay_ms",
    "run_at_ms",
    "max_retries",
    "visibility_timeout_ms",
    "group",
    "weight",
    "expires_in_ms",
    "expires_at_ms",
)


class BackoffValues(Protocol):
    """What :func:`backoff_problem` reads of a retry backoff (:class:`conf.Backoff`)."""

    @property
    def base(self) -> float: ...
    @property
    def max(self) -> float: ...
    @property
    def jitter(self) -> float: ...


def is_number(v: object) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def is_int(v: object) -> bool:
    """An int (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


def visibility_timeout_problem(v: object) -> str | None:
    """Why ``v`` (seconds) cannot be a visibility timeout, or None."""
    lo, hi = MIN_VISIBILITY_TIMEOUT, MAX_VISIBILITY_TIMEOUT
    if not is_number(v) or not lo <= v <= hi:  # type: ignore[operator]
        return f"visibility_timeout must be a number of seconds in [{lo}, {hi}] (7 days), got {v!r}"
    return None


def max_retries_problem(v: object) -> str | None:
    """Why ``v`` cannot be a ``max_retries``, or None."""
    if not is_int(v) or not 0 <= v <= MAX_RETRIES:  # type: ignore[operator]
        return (
            f"max_retries must be an integer in [0, {MAX_RETRIES}] (retries after the first "
            f"run; 0: never retried), got {v!r}"
        )
    return None


def backoff_problem(b: BackoffValues) -> str | None:
    """Why ``b`` cannot be a retry backoff, or None."""
    for what, v in (("base", b.base), ("max", b.max)):
        if not is_number(v) or not 0 <= v <= MAX_BACKOFF:
            return f"retry_backoff {what} must be in [0, {MAX_BACKOFF}] seconds (7 days), got {v!r}"
    if not is_number(b.jitter) or not 0 <= b.jitter <= 1:
        return f"retry_backoff jitter must be in [0, 1], got {b.jitter!r}"
    return None


def delay_problem(seconds: float, what: str = "delay") -> str | None:
    """Why a wait of ``seconds`` from now lies beyond the horizon, or None."""
    if seconds > MAX_DELAY:
        return (
            f"{what} is {seconds:.0f} s from now, beyond the horizon of {MAX_DELAY} s (3650 days)"
        )
    return None


#: what a job whose ordering key's holder died does (docs/job-control.md, "Strict order
#: per key"): "block" (the default: the key waits until the dead job is requeued or
#: deleted, or the key is unblocked) or "skip" (the key's next job becomes claimable)
ON_DEAD = ("block", "skip")


def ordering_key_problem(key: object) -> str | None:
    """Why ``key`` cannot be a job's ordering key, or None."""
    if not isinstance(key, str) or not key:
        return f"ordering_key must be a non-empty string, got {key!r}"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return "ordering_key must be valid UTF-8 text (no lone surrogates)"
    if size > MAX_ORDERING_KEY_BYTES:
        return f"ordering_key must be at most {MAX_ORDERING_KEY_BYTES} bytes in UTF-8"
    if "\0" in key:
        return "ordering_key must not contain a NUL character"
    return None


def on_dead_problem(value: object) -> str | None:
    """Why ``value`` cannot be an ``on_dead`` rule, or None."""
    if value not in ON_DEAD or not isinstance(value, str):
        return f"on_dead must be 'block' or 'skip', got {value!r}"
    return None


def check_job_options(
    owner: str,
    *,
    max_retries: object = None,
    visibility_timeout: object = None,
    retry_backoff: BackoffValues | None = None,
) -> None:
    """Raise :class:`InvalidArgument` (``owner``: what the values belong to) for a value
    out of bounds; None means "not given"."""
    problems = [
        max_retries_problem(max_retries) if max_retries is not None else None,
        visibility_timeout_problem(visibility_timeout) if visibility_timeout is not None else None,
        backoff_problem(retry_backoff) if retry_backoff is not None else None,
    ]
    found = [p for p in problems if p]
    if found:
        raise InvalidArgument(f"{owner}: {'; '.join(found)}")


#: every bound the scripts name, by its name in ``lua/_bounds.lua`` (a script holds no
#: number of its own that is one: tests/test_bounds.py scans them)
LUA_CONSTANTS: dict[str, float] = {
    "MIN_LEASE_MS": MIN_VISIBILITY_TIMEOUT * 1000,
    "MAX_LEASE_MS": MAX_VISIBILITY_TIMEOUT * 1000,
    "MAX_RETRIES": MAX_RETRIES,
    "MAX_DELAY_MS": _MAX_DELAY_MS,
    "MAX_EXACT": MAX_EXACT,
    "MAX_LINKS": MAX_LINKS,
    "MAX_QUEUE_LENGTH": MAX_QUEUE_LENGTH,
    "MAX_GROUP_LENGTH": MAX_GROUP_LENGTH,
    "PRIORITY_MIN": PRIORITY_MIN,
    "PRIORITY_MAX": PRIORITY_MAX,
    "MAX_GROUP_BYTES": MAX_GROUP_BYTES,
    "MIN_WEIGHT": MIN_WEIGHT,
    "MAX_WEIGHT": MAX_WEIGHT,
    "MAX_GROUP_CONCURRENCY": MAX_GROUP_CONCURRENCY,
    "MAX_GROUP_QPS": MAX_GROUP_QPS,
    "MAX_VTIME": MAX_VTIME,
    "MAX_GROUP_ADDS": MAX_GROUP_ADDS,
    "MAX_PAGE": MAX_PAGE,
    "MAX_NEEDLE_BYTES": MAX_NEEDLE_BYTES,
    "MAX_FIELD_PATH_BYTES": MAX_FIELD_PATH_BYTES,
    "MAX_FIELD_PATH_PARTS": MAX_FIELD_PATH_PARTS,
    "MAX_STEP_FIELDS": MAX_STEP_FIELDS,
    "MAX_VALUE_BYTES": MAX_VALUE_BYTES,
    "MAX_NOTIFY_CAP": MAX_NOTIFY_CAP,
    "MAX_PUBLISH_JOBS": MAX_PUBLISH_JOBS,
}


def lua_number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def lua_source() -> str:
    """The scripts' ``bounds`` helper, generated from this module: the constants the
    scripts name (:data:`LUA_CONSTANTS`), :data:`JOB_BOUNDS` as the Lua function
    ``bound(name)`` (lowest, highest, integer only), and ``is_int``."""
    lines = [
        "-- _bounds.lua: generated from django_zqueue/conf/bounds.py (never edit a copy): the",
        "-- bounds of what becomes a lease, a delay or a count, and bound(name), the bounds of",
        "-- a job's option by name (lowest, highest, integer only). is_int: x is an integer",
        "-- in [lo, hi] (NaN and infinities are not).",
        *(f"local {name} = {lua_number(v)}" for name, v in LUA_CONSTANTS.items()),
        "local function bound(name) -- a table would be built on every call: an if chain is not",
        *(
            f"  if name == '{name}' then return {lua_number(lo)}, {lua_number(hi)}, "
            f"{'true' if whole else 'false'} end"
            for name, (lo, hi, whole) in JOB_BOUNDS.items()
        ),
        "  error('no bound named ' .. tostring(name))",
        "end",
        "local function is_int(x, lo, hi)",
        "  return type(x) == 'number' and x == math.floor(x) and x >= lo and x <= hi",
        "end",
    ]
    return "\n".join(lines) + "\n"


def _lua_option(name: str, kind: str) -> str:
    if kind == "text":
        return "true"
    lo, hi, whole = JOB_BOUNDS[name]
    return f"{{{lua_number(lo)}, {lua_number(hi)}, {'true' if whole else 'false'}}}"


def options_lua_source() -> str:
    """The scripts' ``job_options`` helper, generated from :data:`JOB_OPTIONS`,
    :data:`ONCE_OPTIONS` and :data:`PROTOCOL_OPTIONS`: one Lua table each."""

    def table(name: str, values: dict[str, str]) -> list[str]:
        rows = [f"  {option} = {value}," for option, value in values.items()]
        return [f"local {name} = {{", *rows, "}"]

    lines = [
        "-- _job_options.lua: generated from django_zqueue/conf/bounds.py (never edit a copy):",
        "-- the names of a job's options in the job map (JobSpec's fields). JOB_OPTIONS: those",
        "-- every publish takes (read_job, _new_job.lua), each true (a text) or the bounds of a",
        "-- number, {lowest, highest, integer only} (JOB_BOUNDS, as bound(name) gives them);",
        "-- ONCE_OPTIONS: those publish_once takes on top; PROTOCOL_OPTIONS: what a producer of",
        "-- wire protocol 1 may give (proto_publish.lua, docs/protocol.md).",
        *table("JOB_OPTIONS", {n: _lua_option(n, kind) for n, kind in JOB_OPTIONS.items()}),
        *table("ONCE_OPTIONS", dict.fromkeys(ONCE_OPTIONS, "true")),
        *table("PROTOCOL_OPTIONS", dict.fromkeys(PROTOCOL_OPTIONS, "true")),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m django_zqueue.conf.bounds: write the generated helpers
    from pathlib import Path

    lua = Path(__file__).parents[1].joinpath("engine", "lua")
    lua.joinpath("_bounds.lua").write_text(lua_source())
    lua.joinpath("_job_options.lua").write_text(options_lua_source())
