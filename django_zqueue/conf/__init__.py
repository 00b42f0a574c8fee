"""``settings.ZQUEUE`` parsed into frozen dataclasses.

This module reads the whole setting (:class:`Config`, :func:`parse`, :func:`get_config`);
the options of one queue, :class:`QueueOptions`, and their validation live in
:mod:`django_zqueue.conf.queue`, and are importable from here too.

The parsed configuration is cached and dropped whenever Django's ``setting_changed``
signal fires (``override_settings`` in tests). Nothing here connects to Redis.

Validation produces a list of :class:`Problem` (id, message, hint). The system checks
(:mod:`django_zqueue.ops.checks`) report them; :func:`get_config` raises
:class:`~django_zqueue.exceptions.ConfigurationError` with the same text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from ..exceptions import ConfigurationError
from . import testenv
from .bounds import MAX_EXACT as MAX_EXACT  # django_zqueue.conf.MAX_EXACT before 0.2
from .bounds import is_number
from .joblogs import JobLogOptions as JobLogOptions
from .joblogs import parse_job_logs
from .queue import BACKOFF_KEYS as BACKOFF_KEYS
from .queue import MAX_AGING_SECONDS as MAX_AGING_SECONDS
from .queue import MAX_KEEP_FINISHED as MAX_KEEP_FINISHED
from .queue import MAX_PARTITIONS as MAX_PARTITIONS
from .queue import PRIORITY_BAND as PRIORITY_BAND
from .queue import PRIORITY_MAX as PRIORITY_MAX
from .queue import PRIORITY_MIN as PRIORITY_MIN
from .queue import QUEUE_KEYS as QUEUE_KEYS
from .queue import Backoff as Backoff
from .queue import PriorityMode as PriorityMode
from .queue import QueueOptions as QueueOptions
from .queue import parse_queue
from .queue import queue_options as queue_options
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
    #: what a job's log keeps (``JOB_LOGS``, :mod:`.joblogs`)
    job_logs: JobLogOptions = field(default_factory=JobLogOptions)

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
    "JOB_LOGS",
}


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
        job_logs=parse_job_logs(raw.get("JOB_LOGS"), out.add),
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
        queues[name] = parse_queue(name, opts, defaults, out.add)
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


@lru_cache(maxsize=2)
def _cached(testing: bool = False) -> tuple[Config, list[Problem]]:
    config, found = parse(getattr(settings, "ZQUEUE", None))
    if testing:  # under a test runner: the queues' own prefix (conf/testenv.py)
        try:
            prefix = testenv.prefix_under_test(config.prefix)
        except ValueError as exc:
            found = [*found, Problem("E022", str(exc), "See docs/testing.md.")]
        else:
            if prefix is not None:
                config = replace(config, prefix=prefix)
    return config, found


#: whether the last :func:`get_config` ran under a test runner (None: not yet asked)
_testing: list[bool | None] = [None]


def problems() -> list[Problem]:
    return list(_cached(testenv.under_test())[1])


def get_config() -> Config:
    """The parsed ``settings.ZQUEUE``; raises ``ConfigurationError`` if it is invalid.
    Under a test runner its prefix is the tests' own (:mod:`.testenv`); when the test
    environment comes or goes, the caches built on the settings are dropped (:func:`reset`)."""
    testing = testenv.under_test()
    if _testing[0] is not testing:
        if _testing[0] is not None:
            reset()
        _testing[0] = testing
    config, found = _cached(testing)
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
    if setting in ("ZQUEUE", testenv.SETTING):
        reset()
