"""The helpers of the ``zqueue`` fixture for ``unittest`` and Django's ``TestCase``
(docs/testing.md): :class:`ZQueueTestMixin` gives each test ``self.zqueue``, a
:class:`~.helpers.ZQueueTest` started in ``setUp`` and wiped at the test's end;
:func:`with_zqueue` does the same for one function, passing it as the last argument."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .helpers import ZQueueTest

F = TypeVar("F", bound=Callable[..., Any])


class ZQueueTestMixin:
    """Mix into a ``TestCase`` (before it) for ``self.zqueue`` in every test::

    class SignupTests(ZQueueTestMixin, TestCase):
        def test_welcome(self):
            self.client.post("/signup/", {...})
            self.zqueue.assert_enqueued(send_welcome)
            self.zqueue.drain()
    """

    zqueue: ZQueueTest
    #: the tests' Redis (None: chosen as the fixture chooses it, :mod:`.server`)
    zqueue_redis_url: str | None = None

    def setUp(self) -> None:
        self.zqueue = ZQueueTest(self.zqueue_redis_url).start()
        add_cleanup: Callable[..., None] = getattr(self, "addCleanup")  # noqa: B009
        add_cleanup(self.zqueue.stop)
        parent: Any = super()
        if hasattr(parent, "setUp"):
            parent.setUp()


def with_zqueue(func: F) -> F:
    """Run ``func`` with a :class:`ZQueueTest` of its own, given as its last positional
    argument (``def test_x(self, zqueue): ...``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with ZQueueTest() as zq:
            return func(*args, zq, **kwargs)

    return wrapper  # type: ignore[return-value]
