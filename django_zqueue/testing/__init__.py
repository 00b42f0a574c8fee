"""Testing a project's tasks through the real code path (docs/testing.md).

- the pytest fixture ``zqueue`` (the plugin :mod:`django_zqueue.testing.plugin`,
  registered by the package);
- :class:`ZQueueTestMixin` and :func:`with_zqueue` for ``unittest`` and Django's
  ``TestCase``;
- :class:`ZQueueTest`, what both give a test: its own queues (its own key prefix on the
  tests' Redis), ``enqueued``, ``assert_enqueued``, ``assert_not_enqueued``,
  ``expect_enqueued``, ``drain``, ``run`` and ``signal``.

Under a test runner the queues also get a test prefix of their own without any of these
(:mod:`django_zqueue.conf.testenv`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .drain import DrainSummary, DrainTimeout, JobNotRun
    from .helpers import ZQueueTest
    from .jobs import EnqueuedJob
    from .mixin import ZQueueTestMixin, with_zqueue
    from .server import test_redis_url

__all__ = [
    "DrainSummary",
    "DrainTimeout",
    "EnqueuedJob",
    "JobNotRun",
    "ZQueueTest",
    "ZQueueTestMixin",
    "test_redis_url",
    "with_zqueue",
]

#: where each name lives, imported when first asked for: pytest loads the plugin
#: (``django_zqueue.testing.plugin``) before Django is set up, and importing this package
#: then imports none of the helpers (the worker, the outbox's model)
_NAMES = {
    "DrainSummary": "drain",
    "DrainTimeout": "drain",
    "JobNotRun": "drain",
    "ZQueueTest": "helpers",
    "EnqueuedJob": "jobs",
    "ZQueueTestMixin": "mixin",
    "with_zqueue": "mixin",
    "test_redis_url": "server",
}


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
