"""Where Redis is: ``ZQUEUE['REDIS_URL']`` (and ``CLUSTER``) read as a :class:`RedisTarget`.

A standalone server's URL goes to redis-py as it is; Cluster and Sentinel URLs are
taken apart here (startup nodes, sentinel addresses, service name, database). Nothing
here reads the settings or connects to Redis: :mod:`django_zqueue.conf` validates the
setting with :func:`parse_redis_url`, :mod:`django_zqueue.engine.redis.connection`
builds the client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit, urlunsplit

REDIS_SCHEMES = ("redis", "rediss", "unix")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
#: redis-py's RedisCluster runs MULTI/EXEC pipelines (one slot) from 6.1 on
MIN_REDIS_PY_FOR_CLUSTER = (6, 1)

Topology = Literal["standalone", "cluster", "sentinel"]


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """Where Redis is, from ``REDIS_URL`` (and ``CLUSTER``). For a standalone server the
    URL goes to redis-py's ``Redis.from_url`` as it is; the other fields serve Cluster
    (startup nodes) and Sentinel (sentinel addresses, service name, database)."""

    topology: Topology
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False


_HOST_RE = re.compile(
    r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:\[\]/]+))(?::(?P<port>\d{1,5}))?$"
)


def _nodes(netloc: str, default_port: int, what: str) -> tuple[tuple[str, int], ...]:
    out = []
    for part in netloc.split(","):
        m = _HOST_RE.match(part.strip())
        port = int(m["port"]) if m and m["port"] else default_port
        if m is None or not 0 < port < 65536:
            raise ValueError(f"{what} address {part!r} is not host[:port]")
        out.append((m["v6"] or m["host"], port))
    return tuple(out)


def parse_redis_url(url: str, cluster: bool = False) -> RedisTarget:
    """The :class:`RedisTarget` of a ``REDIS_URL``; ``ValueError`` with the reason if the
    URL cannot be used. ``cluster=True`` (setting ``CLUSTER``) reads a ``redis://`` or
    ``rediss://`` URL as the startup nodes of a Redis Cluster."""
    parts = urlsplit(url)
    scheme = parts.scheme
    if scheme not in (*REDIS_SCHEMES, *CLUSTER_SCHEMES, *SENTINEL_SCHEMES):
        known = REDIS_SCHEMES + CLUSTER_SCHEMES + SENTINEL_SCHEMES
        raise ValueError(f"scheme {scheme!r} is not one of {known}")
    if cluster and scheme not in ("redis", "rediss", *CLUSTER_SCHEMES):
        raise ValueError(
            f"CLUSTER=True needs a redis://, rediss:// or redis+cluster:// URL, not {scheme}://"
        )
    if scheme in REDIS_SCHEMES and not cluster:
        if "," in parts.netloc:
            raise ValueError(
                "several hosts need redis+cluster:// (or CLUSTER=True) or redis+sentinel://"
            )
        return RedisTarget("standalone", url)
    if parts.query or parts.fragment:
        raise ValueError(
            "Cluster and Sentinel URLs take no query string: put redis-py options in "
            "CONNECTION_OPTIONS"
        )
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username = password = None
    if userinfo:
        user, colon, pw = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(pw) if colon else None
    if not hosts:
        raise ValueError("no host given")
    ssl = scheme.startswith("rediss")
    path = [p for p in parts.path.split("/") if p]
    if scheme in SENTINEL_SCHEMES:
        nodes = _nodes(hosts, 26379, "sentinel")
        if not path:
            raise ValueError(
                "a Sentinel URL names the service: redis+sentinel://host:26379/<service>[/<db>]"
            )
        if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
            raise ValueError(f"path {parts.path!r} is not /<service>[/<db>]")
        db = int(path[1]) if len(path) == 2 else 0
        return RedisTarget("sentinel", url, nodes, unquote(path[0]), db, username, password, ssl)
    nodes = _nodes(hosts, 6379, "cluster node")
    if path not in ([], ["0"]):
        raise ValueError("a Redis Cluster has database 0 only")
    return RedisTarget("cluster", url, nodes, "", 0, username, password, ssl)


def redacted_url(url: str) -> str:
    """``url`` with its password, if any, shown as ``***`` (for messages and logs)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
    except ValueError:
        return url
    userinfo, _, hosts = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{userinfo.partition(':')[0]}:***@{hosts}"))


def redis_py_version() -> tuple[int, ...]:
    import redis

    return tuple(int(p) for p in re.findall(r"\d+", redis.__version__)[:2])
