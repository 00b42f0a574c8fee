"""``settings.ZQUEUE`` parsed into frozen dataclasses.

The parsed configuration is cached and dropped whenever Django's ``setting_changed``
signal fires (``override_settings`` in tests). Nothing here connects to Redis.

Validation produces a list of :class:`Problem` (id, message, hint). The system checks
(:mod:`django_zqueue.checks`) report them; :func:`get_config` raises
:class:`~django_zqueue.exceptions.ConfigurationError` with the same text.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from . import bounds
from .bounds import (
    MAX_BACKOFF,
    MAX_EXACT,  # noqa: F401 - django_zqueue.conf.MAX_EXACT before 0.2
    backoff_problem,
    is_int,
    is_number,
    max_retries_problem,
    visibility_timeout_problem,
)
from .exceptions import ConfigurationError
from .fairness import Fairness, fairness_options
from .redis_url import (
    MIN_REDIS_PY_FOR_CLUSTER,
    RedisTarget,
    parse_redis_url,
    redacted_url,
    redis_py_version,
)

#: a queue name or key prefix: it becomes part of every key name (keys.py)
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
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


@dataclass(frozen=True, slots=True)
class Config:
    redis_url: str = DEFAULT_REDIS_URL
    prefix: str = "zq"
    queues: Mapping[str, QueueOptions] = field(default_factory=lambda: {"default": QueueOptions()})
    socket_timeout: float | None = 5.0
    socket_connect_timeout: float | None = 5.0
    connection_options: Mapping[str, Any] = field(default_factory=dict)
    enqueue_on_commit: bool = True
    admin_actions: bool = True  # dead-letter requeue/delete/purge in the admin (POST only)
    outbox: bool = False  # jobs enqueued in a transaction go through the outbox table
    #: new jobs as one compact record (False: the JSON record and body hash of releases
    #: before it, which their workers read: for a rolling upgrade)
    compact_records: bool = True
    #: scripts called as one Redis Functions library (FCALL); False: EVALSHA, for a
    #: server that refuses FUNCTION LOAD
    lua_functions: bool = True
    cluster: bool = False  # REDIS_URL names the startup nodes of a Redis Cluster

    def target(self) -> RedisTarget:
        """Where Redis is (``ValueError`` for a URL that :func:`parse` reports)."""
        return parse_redis_url(self.redis_url, self.cluster)


@dataclass(frozen=True, slots=True)
class Problem:
    id: str
    msg: str
    hint: str


TOP_LEVEL_KEYS = {
    "REDIS_URL",
    "PREFIX",
    "QUEUES",
    "DEFAULTS",
    "SOCKET_TIMEOUT",
    "SOCKET_CONNECT_TIMEOUT",
    "CONNECTION_OPTIONS",
    "ENQUEUE_ON_COMMIT",
    "ADMIN_ACTIONS",
    "OUTBOX",
    "COMPACT_RECORDS",
    "LUA_FUNCTIONS",
    "SCHEDULES",
    "CLUSTER",
}
QUEUE_KEYS = set(QueueOptions.__dataclass_fields__)
#: the options of a queue with none set (the defaults that hints name)
_DEFAULT_QUEUE = QueueOptions()
BACKOFF_KEYS = {"base", "max", "jitter"}


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, id: str, msg: str, hint: str) -> None:
        self.problems.append(Problem(f"django_zqueue.{id}", msg, hint))


def _check_url(
    url: object, cluster: bool, out: _Collector, version: tuple[int, ...] | None = None
) -> None:
    if not isinstance(url, str) or not url:
        out.add("E002", "ZQUEUE['REDIS_URL'] must be a non-empty string.", _URL_HINT)
        return
    try:
        target = parse_redis_url(url, cluster)
    except ValueError as exc:
        out.add("E002", f"ZQUEUE['REDIS_URL'] cannot be used: {exc}.", _URL_HINT)
        return
    version = version or redis_py_version()
    if target.topology == "cluster" and version < MIN_REDIS_PY_FOR_CLUSTER:
        need = ".".join(map(str, MIN_REDIS_PY_FOR_CLUSTER))
        out.add(
            "E014",
            f"A Redis Cluster needs redis-py >= {need} (installed: {'.'.join(map(str, version))}).",
            f"pip install 'redis>={need}'",
        )


_URL_HINT = (
    "For example 'redis://user:password@localhost:6379/0', 'rediss://…', "
    "'unix:///run/redis.sock', 'redis+cluster://10.0.0.1:7000,10.0.0.2:7000' or "
    "'redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster/0' (see docs/settings.md)."
)


def _timeout(raw: Mapping[str, Any], key: str, out: _Collector) -> float | None:
    v = raw.get(key, 5.0)
    if v is None:
        return None
    if not is_number(v) or v <= 0:
        out.add("E003", f"ZQUEUE[{key!r}] must be a positive number of seconds or None.", "Use 5.")
        return 5.0
    return float(v)


def _parse_backoff(name: str, v: object, out: _Collector) -> Backoff:
    if isinstance(v, Backoff):
        return v
    if not isinstance(v, Mapping):
        out.add(
            "E011",
            f"Queue {name!r}: retry_backoff must be a dict with base, max, jitter.",
            "For example {'base': 1, 'max': 300, 'jitter': 0.2}.",
        )
        return Backoff()
    unknown = set(v) - BACKOFF_KEYS
    if unknown:
        out.add(
            "E011",
            f"Queue {name!r}: unknown retry_backoff keys {sorted(unknown)}.",
            "Allowed: base, max, jitter.",
        )
    base, mx, jit = v.get("base", 1.0), v.get("max", 300.0), v.get("jitter", 0.2)
    ok = True
    if is_number(base) and is_number(mx) and is_number(jit):
        problem = backoff_problem(Backoff(float(base), float(mx), float(jit)))
        if problem and (base > MAX_BACKOFF or mx > MAX_BACKOFF):
            out.add("E011", f"Queue {name!r}: {problem}.", "Use at most 7 days (604800 s).")
            ok = False
    if not is_number(base) or base < 0:
        out.add("E011", f"Queue {name!r}: retry_backoff base must be >= 0 seconds.", "Use 1.")
        ok = False
    if not is_number(mx) or mx < 0:
        out.add("E011", f"Queue {name!r}: retry_backoff max must be >= 0 seconds.", "Use 300.")
        ok = False
    if not is_number(jit) or not 0 <= jit <= 1:
        out.add("E011", f"Queue {name!r}: retry_backoff jitter must be in [0, 1].", "Use 0.2.")
        ok = False
    return Backoff(float(base), float(mx), float(jit)) if ok else Backoff()


def _parse_queue(
    name: str, raw: object, defaults: Mapping[str, Any], out: _Collector
) -> QueueOptions:
    if not isinstance(raw, Mapping):
        out.add(
            "E005",
            f"Queue {name!r}: options must be a dict, not {type(raw).__name__}.",
            "Use {} for the defaults.",
        )
        return QueueOptions()
    merged = {**defaults, **raw}
    unknown = set(merged) - QUEUE_KEYS
    if unknown:
        out.add(
            "E006",
            f"Queue {name!r}: unknown option(s) {sorted(unknown)}.",
            f"Known options: {', '.join(sorted(QUEUE_KEYS))}.",
        )
    kw: dict[str, Any] = {}  # the valid options, for QueueOptions(**kw)
    _positive_options(name, merged, kw, out)
    _retry_options(name, merged, kw, out)
    _priority_options(name, merged, kw, out)
    if kw.get("scan_batch", 0) > 5000:
        out.add("E007", f"Queue {name!r}: scan_batch must be at most 5000.", "Use 100.")
        kw.pop("scan_batch")
    _partitions_option(name, merged, kw, out)
    _history_options(name, merged, kw, out)
    fairness_options(name, merged, kw, out.add)
    return QueueOptions(**kw)


def _positive(
    name: str,
    merged: Mapping[str, Any],
    kw: dict[str, Any],
    out: _Collector,
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
        out.add(
            "E007",
            f"Queue {name!r}: {key} must be {kind}{' or None' if allow_none else ''}, got {v!r}.",
            f"Default: {getattr(_DEFAULT_QUEUE, key)!r}.",
        )
        return
    kw[key] = v if integer else float(v)


def _positive_options(
    name: str, merged: Mapping[str, Any], kw: dict[str, Any], out: _Collector
) -> None:
    """The options that are positive numbers (E007)."""
    _positive(name, merged, kw, out, "visibility_timeout")
    _positive(name, merged, kw, out, "concurrency", integer=True, allow_none=True)
    _positive(name, merged, kw, out, "qps", allow_none=True)
    _positive(name, merged, kw, out, "dead_letter_max", integer=True)
    _positive(name, merged, kw, out, "dead_letter_ttl")
    _positive(name, merged, kw, out, "max_payload_bytes", integer=True)
    _positive(name, merged, kw, out, "priority_aging_seconds")
    _positive(name, merged, kw, out, "scan_batch", integer=True)
    _positive(name, merged, kw, out, "max_length", integer=True, allow_none=True)
    if (kw.get("max_length") or 0) > bounds.MAX_QUEUE_LENGTH:
        out.add(
            "E007",
            f"Queue {name!r}: max_length must be at most {bounds.MAX_QUEUE_LENGTH}.",
            "Use None for no limit.",
        )
        kw.pop("max_length")


def _retry_options(
    name: str, merged: Mapping[str, Any], kw: dict[str, Any], out: _Collector
) -> None:
    """max_retries, the visibility timeout's bounds (E007) and retry_backoff (E011)."""
    if "max_retries" in merged:
        v = merged["max_retries"]
        problem = max_retries_problem(v)
        if problem:
            out.add("E007", f"Queue {name!r}: {problem}.", "Use 3.")
        else:
            kw["max_retries"] = v
    if "visibility_timeout" in kw:
        problem = visibility_timeout_problem(kw["visibility_timeout"])
        if problem:
            out.add(
                "E007",
                f"Queue {name!r}: {problem}.",
                "A lease shorter than 1 s expires under running jobs (they run again at "
                "once); a longer one than 7 days hides a dead worker's jobs. Default: 300.",
            )
            kw.pop("visibility_timeout")
    if "retry_backoff" in merged:
        kw["retry_backoff"] = _parse_backoff(name, merged["retry_backoff"], out)


def _priority_options(
    name: str, merged: Mapping[str, Any], kw: dict[str, Any], out: _Collector
) -> None:
    """priority_mode (E008) and the upper bound of priority_aging_seconds (E009)."""
    if "priority_mode" in merged:
        v = merged["priority_mode"]
        if v not in ("strict", "aging"):
            out.add(
                "E008",
                f"Queue {name!r}: priority_mode must be 'strict' or 'aging', got {v!r}.",
                "'strict': higher priority always first; 'aging': each priority step is worth "
                "priority_aging_seconds of waiting.",
            )
        else:
            kw["priority_mode"] = v
    aging = kw.get("priority_aging_seconds", _DEFAULT_QUEUE.priority_aging_seconds)
    if aging > MAX_AGING_SECONDS:
        out.add(
            "E009",
            f"Queue {name!r}: priority_aging_seconds must be at most {MAX_AGING_SECONDS}.",
            "Scores must stay below 2**53 to be exact.",
        )
        kw.pop("priority_aging_seconds", None)


def _partitions_option(
    name: str, merged: Mapping[str, Any], kw: dict[str, Any], out: _Collector
) -> None:
    """partitions (E007), which excludes concurrency and qps."""
    if "partitions" not in merged:
        return
    v = merged["partitions"]
    if not is_int(v) or not 1 <= v <= MAX_PARTITIONS:
        out.add(
            "E007",
            f"Queue {name!r}: partitions must be an integer in [1, {MAX_PARTITIONS}], got {v!r}.",
            "Use 1 (one hash tag, the default) unless the queue must spread over cluster nodes.",
        )
    elif v > 1 and (kw.get("concurrency") or kw.get("qps")):
        out.add(
            "E007",
            f"Queue {name!r}: concurrency and qps cannot be combined with partitions > 1.",
            "Both limits are enforced atomically on one hash tag; a partitioned queue has "
            "several. Use partitions = 1, or drop the limit.",
        )
    else:
        kw["partitions"] = v


def _history_options(
    name: str, merged: Mapping[str, Any], kw: dict[str, Any], out: _Collector
) -> None:
    """keep_finished (an integer >= 0) and finished_ttl (seconds > 0, at most 3650 days):
    the history of finished jobs (E007)."""
    if "keep_finished" in merged:
        v = merged["keep_finished"]
        if not is_int(v) or not 0 <= v <= MAX_KEEP_FINISHED:
            out.add(
                "E007",
                f"Queue {name!r}: keep_finished must be an integer in [0, "
                f"{MAX_KEEP_FINISHED:,}], got {v!r}.",
                f"Default: {_DEFAULT_QUEUE.keep_finished}; 0 keeps no history.",
            )
        else:
            kw["keep_finished"] = v
    _positive(name, merged, kw, out, "finished_ttl")
    if kw.get("finished_ttl", 0) > bounds.MAX_DELAY:
        out.add(
            "E007",
            f"Queue {name!r}: finished_ttl must be at most {bounds.MAX_DELAY} seconds (3650 days).",
            f"Default: {_DEFAULT_QUEUE.finished_ttl!r}.",
        )
        kw.pop("finished_ttl")


def queue_options(name: str = "queue", **raw: Any) -> QueueOptions:
    """Validated :class:`QueueOptions` from settings-style keyword arguments."""
    out = _Collector()
    options = _parse_queue(name, raw, {}, out)
    if out.problems:
        lines = "; ".join(f"{p.id}: {p.msg}" for p in out.problems)
        raise ConfigurationError(f"invalid queue options: {lines}")
    return options


def parse(raw: object) -> tuple[Config, list[Problem]]:
    """Parse a ``ZQUEUE`` value. Returns the config (defaults where invalid) and problems."""
    out = _Collector()
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        _not_a_dict(raw, out)
        return Config(), out.problems
    unknown = set(raw) - TOP_LEVEL_KEYS
    if unknown:
        out.add(
            "E001",
            f"settings.ZQUEUE has unknown key(s) {sorted(unknown)}.",
            f"Known keys: {', '.join(sorted(TOP_LEVEL_KEYS))}.",
        )
    url, cluster = _parse_redis(raw, out)
    prefix = _parse_prefix(raw, out)
    queues = _parse_queues(raw, out)
    conn_opts = _parse_connection_options(raw, out)
    on_commit = _parse_flag(raw, "ENQUEUE_ON_COMMIT", out)
    _check_schedules(raw, out)
    admin_actions = _parse_flag(raw, "ADMIN_ACTIONS", out)
    outbox = _parse_flag(raw, "OUTBOX", out, default=False)
    compact = _parse_flag(raw, "COMPACT_RECORDS", out)
    functions = _parse_flag(raw, "LUA_FUNCTIONS", out)
    config = Config(
        compact_records=compact,
        lua_functions=functions,
        enqueue_on_commit=on_commit,
        admin_actions=admin_actions,
        outbox=outbox,
        redis_url=url if isinstance(url, str) else DEFAULT_REDIS_URL,
        prefix=prefix,
        queues=queues,
        socket_timeout=_timeout(raw, "SOCKET_TIMEOUT", out),
        socket_connect_timeout=_timeout(raw, "SOCKET_CONNECT_TIMEOUT", out),
        connection_options=conn_opts,
        cluster=cluster,
    )
    return config, out.problems


def _not_a_dict(raw: object, out: _Collector) -> None:
    """E001 for a ``ZQUEUE`` that is not a dict (a bare URL gets its own hint)."""
    if isinstance(raw, str):
        out.add(
            "E001",
            f"settings.ZQUEUE must be a dict, not a string ({redacted_url(raw)!r}).",
            f"Put the URL in a dict: ZQUEUE = {{'REDIS_URL': {redacted_url(raw)!r}}}.",
        )
    else:
        out.add(
            "E001",
            f"settings.ZQUEUE must be a dict, not {type(raw).__name__}.",
            "For example ZQUEUE = {'REDIS_URL': 'redis://127.0.0.1:6379/0', "
            "'QUEUES': {'default': {}}} (docs/settings.md).",
        )


def _parse_redis(raw: Mapping[str, Any], out: _Collector) -> tuple[object, bool]:
    """``REDIS_URL`` (checked, returned as given) and ``CLUSTER`` (E002, E014)."""
    url = raw.get("REDIS_URL", DEFAULT_REDIS_URL)
    cluster = raw.get("CLUSTER", False)
    if not isinstance(cluster, bool):
        out.add(
            "E002",
            "ZQUEUE['CLUSTER'] must be True or False.",
            "True reads REDIS_URL as the startup node(s) of a Redis Cluster.",
        )
        cluster = False
    _check_url(url, cluster, out)
    return url, cluster


def _parse_prefix(raw: Mapping[str, Any], out: _Collector) -> str:
    prefix = raw.get("PREFIX", "zq")
    if not isinstance(prefix, str) or not NAME_RE.match(prefix):
        out.add(
            "E004",
            f"ZQUEUE['PREFIX'] {prefix!r} is invalid.",
            "Use 1-100 characters from A-Z a-z 0-9 _ . -",
        )
        prefix = "zq"
    return prefix


def _parse_queues(raw: Mapping[str, Any], out: _Collector) -> dict[str, QueueOptions]:
    """``QUEUES``, each queue's options over ``DEFAULTS`` (E004, E005 and the queue's own)."""
    defaults = raw.get("DEFAULTS", {})
    if not isinstance(defaults, Mapping):
        out.add("E005", "ZQUEUE['DEFAULTS'] must be a dict of queue options.", "Use {}.")
        defaults = {}
    queues_raw = raw.get("QUEUES", {"default": {}})
    queues: dict[str, QueueOptions] = {}
    if not isinstance(queues_raw, Mapping) or not queues_raw:
        out.add(
            "E005",
            "ZQUEUE['QUEUES'] must be a non-empty dict of queue name -> options.",
            "For example {'default': {}}.",
        )
        return queues
    for name, opts in queues_raw.items():
        if not isinstance(name, str) or not NAME_RE.match(name):
            out.add(
                "E004",
                f"Queue name {name!r} is invalid.",
                "Use 1-100 characters from A-Z a-z 0-9 _ . -",
            )
            continue
        queues[name] = _parse_queue(name, opts, defaults, out)
    return queues


def _parse_connection_options(raw: Mapping[str, Any], out: _Collector) -> dict[str, Any]:
    conn_opts = raw.get("CONNECTION_OPTIONS", {})
    if not isinstance(conn_opts, Mapping):
        out.add(
            "E003",
            "ZQUEUE['CONNECTION_OPTIONS'] must be a dict of redis-py connection arguments.",
            "For example {'ssl_ca_certs': '/etc/ssl/ca.pem'}.",
        )
        conn_opts = {}
    return dict(conn_opts)


def _parse_flag(raw: Mapping[str, Any], key: str, out: _Collector, *, default: bool = True) -> bool:
    """``ENQUEUE_ON_COMMIT``, ``ADMIN_ACTIONS``, ``COMPACT_RECORDS``, ``LUA_FUNCTIONS``
    (default True) or ``OUTBOX`` (default False): True or False (E010)."""
    value = raw.get(key, default)
    if not isinstance(value, bool):
        out.add("E010", f"ZQUEUE[{key!r}] must be True or False.", f"Default: {default}.")
        return default
    return value


def _check_schedules(raw: Mapping[str, Any], out: _Collector) -> None:
    """``SCHEDULES`` maps names to dicts with a task name (E012); schedules.py reads it."""
    schedules = raw.get("SCHEDULES", {})
    if not isinstance(schedules, Mapping) or not all(
        isinstance(v, Mapping) and isinstance(v.get("task"), str) for v in schedules.values()
    ):
        out.add(
            "E012",
            "ZQUEUE['SCHEDULES'] must map schedule names to dicts with a 'task' name.",
            "For example {'nightly': {'task': 'app.tasks.report', 'cron': '0 3 * * *'}}.",
        )


@lru_cache(maxsize=1)
def _cached() -> tuple[Config, list[Problem]]:
    return parse(getattr(settings, "ZQUEUE", None))


def problems() -> list[Problem]:
    return list(_cached()[1])


def get_config() -> Config:
    """The parsed ``settings.ZQUEUE``; raises ``ConfigurationError`` if it is invalid."""
    config, found = _cached()
    if found:
        lines = "; ".join(f"{p.id}: {p.msg}" for p in found)
        raise ConfigurationError(f"invalid settings.ZQUEUE: {lines}")
    return config


def reset() -> None:
    _cached.cache_clear()
    for hook in _reset_hooks:
        hook()


_reset_hooks: list[Callable[[], None]] = []


def on_reset(hook: Callable[[], None]) -> None:
    """Register a cache to drop whenever ``settings.ZQUEUE`` changes."""
    _reset_hooks.append(hook)


@receiver(setting_changed)
def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "ZQUEUE":
        reset()
