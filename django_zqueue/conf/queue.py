"""The options of one queue: :class:`QueueOptions` (with :class:`Backoff`, its retry
delays), their bounds, and the validation of one queue's options, from
``ZQUEUE["QUEUES"][name]`` over ``ZQUEUE["DEFAULTS"]`` (:func:`parse_queue`) or from
keyword arguments (:func:`queue_options`).

:mod:`django_zqueue.conf` reads the whole ``settings.ZQUEUE`` and re-exports these
names (``from django_zqueue.conf import QueueOptions`` works). A problem found is
reported through ``add(id, message, hint)``, as :mod:`django_zqueue.conf.fairness` does;
nothing here reads settings or connects to Redis.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..exceptions import ConfigurationError
from . import bounds
from .bounds import (
    MAX_BACKOFF,
    backoff_problem,
    is_int,
    is_number,
    max_retries_problem,
    visibility_timeout_problem,
)
from .fairness import Fairness, fairness_options

#: reports one problem: ``add(id, message, hint)``, the id without its ``django_zqueue.``
Add = Callable[[str, str, str], None]

PRIORITY_MIN = bounds.PRIORITY_MIN
PRIORITY_MAX = bounds.PRIORITY_MAX
#: ready scores of priority p lie in [-p * 2**42, -p * 2**42 + 2**42) in strict mode
PRIORITY_BAND = 2**42
MAX_AGING_SECONDS = 30 * 86400
#: most partitions one queue may have (option ``partitions``)
MAX_PARTITIONS = 256
#: most finished jobs one queue may keep in its history (option ``keep_finished``)
MAX_KEEP_FINISHED = 10_000_000

PriorityMode = Literal["strict", "aging"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff: ``min(max, base * 2**(attempt-1))``, then +/- ``jitter`` share."""

    base: float = 1.0
    max: float = 300.0
    jitter: float = 0.2

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        raw = min(self.max, self.base * (2 ** max(0, min(attempt - 1, 60))))
        if self.jitter:
            raw *= 1 - self.jitter + 2 * self.jitter * rand()
        return float(max(0.0, raw))


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """Options of one queue; every key of ``ZQUEUE["QUEUES"][name]`` maps to a field."""

    visibility_timeout: float = 300.0
    max_retries: int = 3
    retry_backoff: Backoff = field(default_factory=Backoff)
    concurrency: int | None = None
    qps: float | None = None
    dead_letter_max: int = 10_000
    dead_letter_ttl: float = 7 * 86400.0
    max_payload_bytes: int = 1 << 20
    priority_mode: PriorityMode = "strict"
    priority_aging_seconds: float = 60.0
    scan_batch: int = 100
    partitions: int = 1  # > 1: the queue is spread over this many hash tags
    fairness: Fairness = "fifo"  # "groups": weighted fair order across group keys
    group_weights: Mapping[str, float] = field(default_factory=dict)  # absent: weight 1
    group_concurrency: int | None = None  # most jobs of one group in flight
    group_qps: float | None = None  # most starts of one group per second
    max_length: int | None = None  # most jobs waiting (ready + delayed); past it: QueueFull
    #: fair queues: most jobs of one group waiting (ready + delayed); past it: QueueFull
    group_max_length: int | None = None
    #: most succeeded jobs kept in the history of finished jobs (and as many cancelled
    #: ones); 0: no history, and nothing more on the ack path
    keep_finished: int = 10_000
    finished_ttl: float = 86400.0  # seconds a finished job stays in the history

    @property
    def visibility_timeout_ms(self) -> int:
        return int(self.visibility_timeout * 1000)


QUEUE_KEYS = set(QueueOptions.__dataclass_fields__)
#: the options of a queue with none set (the defaults that hints name)
_DEFAULT_QUEUE = QueueOptions()
BACKOFF_KEYS = {"base", "max", "jitter"}


def _parse_backoff(name: str, v: object, add: Add) -> Backoff:
    if isinstance(v, Backoff):
        return v
    if not isinstance(v, Mapping):
        add(
            "E011",
            f"Queue {name!r}: retry_backoff must be a dict with base, max, jitter.",
            "For example {'base': 1, 'max': 300, 'jitter': 0.2}.",
        )
        return Backoff()
    unknown = set(v) - BACKOFF_KEYS
    if unknown:
        add(
            "E011",
            f"Queue {name!r}: unknown retry_backoff keys {sorted(unknown)}.",
            "Allowed: base, max, jitter.",
        )
    base, mx, jit = v.get("base", 1.0), v.get("max", 300.0), v.get("jitter", 0.2)
    ok = True
    if is_number(base) and is_number(mx) and is_number(jit):
        problem = backoff_problem(Backoff(float(base), float(mx), float(jit)))
        if problem and (base > MAX_BACKOFF or mx > MAX_BACKOFF):
            add("E011", f"Queue {name!r}: {problem}.", "Use at most 7 days (604800 s).")
            ok = False
    if not is_number(base) or base < 0:
        add("E011", f"Queue {name!r}: retry_backoff base must be >= 0 seconds.", "Use 1.")
        ok = False
    if not is_number(mx) or mx < 0:
        add("E011", f"Queue {name!r}: retry_backoff max must be >= 0 seconds.", "Use 300.")
        ok = False
    if not is_number(jit) or not 0 <= jit <= 1:
        add("E011", f"Queue {name!r}: retry_backoff jitter must be in [0, 1].", "Use 0.2.")
        ok = False
    return Backoff(float(base), float(mx), float(jit)) if ok else Backoff()


def parse_queue(name: str, raw: object, defaults: Mapping[str, Any], add: Add) -> QueueOptions:
    if not isinstance(raw, Mapping):
        add(
            "E005",
            f"Queue {name!r}: options must be a dict, not {type(raw).__name__}.",
            "Use {} for the defaults.",
        )
        return QueueOptions()
    merged = {**defaults, **raw}
    unknown = set(merged) - QUEUE_KEYS
    if unknown:
        add(
            "E006",
            f"Queue {name!r}: unknown option(s) {sorted(unknown)}.",
            f"Known options: {', '.join(sorted(QUEUE_KEYS))}.",
        )
    kw: dict[str, Any] = {}  # the valid options, for QueueOptions(**kw)
    _positive_options(name, merged, kw, add)
    _retry_options(name, merged, kw, add)
    _priority_options(name, merged, kw, add)
    if kw.get("scan_batch", 0) > 5000:
        add("E007", f"Queue {name!r}: scan_batch must be at most 5000.", "Use 100.")
        kw.pop("scan_batch")
    _partitions_option(name, merged, kw, add)
    _history_options(name, merged, kw, add)
    fairness_options(name, merged, kw, add)
    return QueueOptions(**kw)


def _positive(
    name: str,
    merged: Mapping[str, Any],
    kw: dict[str, Any],
    add: Add,
    key: str,
    *,
    integer: bool = False,
    allow_none: bool = False,
) -> None:
    """Option ``key``, if given, into ``kw`` when it is a positive number (E007 if not)."""
    if key not in merged:
        return
    v = merged[key]
    if v is None and allow_none:
        kw[key] = None
        return
    good = is_int(v) if integer else is_number(v)
    if not good or v <= 0:
        kind = "a positive integer" if integer else "a positive number"
        add(
            "E007",
            f"Queue {name!r}: {key} must be {kind}{' or None' if allow_none else ''}, got {v!r}.",
            f"Default: {getattr(_DEFAULT_QUEUE, key)!r}.",
        )
        return
    kw[key] = v if integer else float(v)


def _positive_options(name: str, merged: Mapping[str, Any], kw: dict[str, Any], add: Add) -> None:
    """The options that are positive numbers (E007)."""
    _positive(name, merged, kw, add, "visibility_timeout")
    _positive(name, merged, kw, add, "concurrency", integer=True, allow_none=True)
    _positive(name, merged, kw, add, "qps", allow_none=True)
    _positive(name, merged, kw, add, "dead_letter_max", integer=True)
    _positive(name, merged, kw, add, "dead_letter_ttl")
    _positive(name, merged, kw, add, "max_payload_bytes", integer=True)
    _positive(name, merged, kw, add, "priority_aging_seconds")
    _positive(name, merged, kw, add, "scan_batch", integer=True)
    _positive(name, merged, kw, add, "max_length", integer=True, allow_none=True)
    if (kw.get("max_length") or 0) > bounds.MAX_QUEUE_LENGTH:
        add(
            "E007",
            f"Queue {name!r}: max_length must be at most {bounds.MAX_QUEUE_LENGTH}.",
            "Use None for no limit.",
        )
        kw.pop("max_length")


def _retry_options(name: str, merged: Mapping[str, Any], kw: dict[str, Any], add: Add) -> None:
    """max_retries, the visibility timeout's bounds (E007) and retry_backoff (E011)."""
    if "max_retries" in merged:
        v = merged["max_retries"]
        problem = max_retries_problem(v)
        if problem:
            add("E007", f"Queue {name!r}: {problem}.", "Use 3.")
        else:
            kw["max_retries"] = v
    if "visibility_timeout" in kw:
        problem = visibility_timeout_problem(kw["visibility_timeout"])
        if problem:
            add(
                "E007",
                f"Queue {name!r}: {problem}.",
                "A lease shorter than 1 s expires under running jobs (they run again at "
                "once); a longer one than 7 days hides a dead worker's jobs. Default: 300.",
            )
            kw.pop("visibility_timeout")
    if "retry_backoff" in merged:
        kw["retry_backoff"] = _parse_backoff(name, merged["retry_backoff"], add)


def _priority_options(name: str, merged: Mapping[str, Any], kw: dict[str, Any], add: Add) -> None:
    """priority_mode (E008) and the upper bound of priority_aging_seconds (E009)."""
    if "priority_mode" in merged:
        v = merged["priority_mode"]
        if v not in ("strict", "aging"):
            add(
                "E008",
                f"Queue {name!r}: priority_mode must be 'strict' or 'aging', got {v!r}.",
                "'strict': higher priority always first; 'aging': each priority step is worth "
                "priority_aging_seconds of waiting.",
            )
        else:
            kw["priority_mode"] = v
    aging = kw.get("priority_aging_seconds", _DEFAULT_QUEUE.priority_aging_seconds)
    if aging > MAX_AGING_SECONDS:
        add(
            "E009",
            f"Queue {name!r}: priority_aging_seconds must be at most {MAX_AGING_SECONDS}.",
            "Scores must stay below 2**53 to be exact.",
        )
        kw.pop("priority_aging_seconds", None)


def _partitions_option(name: str, merged: Mapping[str, Any], kw: dict[str, Any], add: Add) -> None:
    """partitions (E007), which excludes concurrency and qps."""
    if "partitions" not in merged:
        return
    v = merged["partitions"]
    if not is_int(v) or not 1 <= v <= MAX_PARTITIONS:
        add(
            "E007",
            f"Queue {name!r}: partitions must be an integer in [1, {MAX_PARTITIONS}], got {v!r}.",
            "Use 1 (one hash tag, the default) unless the queue must spread over cluster nodes.",
        )
    elif v > 1 and (kw.get("concurrency") or kw.get("qps")):
        add(
            "E007",
            f"Queue {name!r}: concurrency and qps cannot be combined with partitions > 1.",
            "Both limits are enforced atomically on one hash tag; a partitioned queue has "
            "several. Use partitions = 1, or drop the limit.",
        )
    else:
        kw["partitions"] = v


def _history_options(name: str, merged: Mapping[str, Any], kw: dict[str, Any], add: Add) -> None:
    """keep_finished (an integer >= 0) and finished_ttl (seconds > 0, at most 3650 days):
    the history of finished jobs (E007)."""
    if "keep_finished" in merged:
        v = merged["keep_finished"]
        if not is_int(v) or not 0 <= v <= MAX_KEEP_FINISHED:
            add(
                "E007",
                f"Queue {name!r}: keep_finished must be an integer in [0, "
                f"{MAX_KEEP_FINISHED:,}], got {v!r}.",
                f"Default: {_DEFAULT_QUEUE.keep_finished}; 0 keeps no history.",
            )
        else:
            kw["keep_finished"] = v
    _positive(name, merged, kw, add, "finished_ttl")
    if kw.get("finished_ttl", 0) > bounds.MAX_DELAY:
        add(
            "E007",
            f"Queue {name!r}: finished_ttl must be at most {bounds.MAX_DELAY} seconds (3650 days).",
            f"Default: {_DEFAULT_QUEUE.finished_ttl!r}.",
        )
        kw.pop("finished_ttl")


def queue_options(name: str = "queue", **raw: Any) -> QueueOptions:
    """Validated :class:`QueueOptions` from settings-style keyword arguments."""
    found: list[str] = []

    def add(id: str, msg: str, hint: str) -> None:
        found.append(f"django_zqueue.{id}: {msg}")

    options = parse_queue(name, raw, {}, add)
    if found:
        raise ConfigurationError(f"invalid queue options: {'; '.join(found)}")
    return options
