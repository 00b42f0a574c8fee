"""The pytest plugin of django_zqueue (registered by the package: entry point
``pytest11``), docs/testing.md. It provides the fixture ``zqueue``: the test's own
queues (:class:`~.helpers.ZQueueTest`), started before the test and wiped after it.

Nothing runs unless a test asks for the fixture: the plugin is safe in any project,
django_zqueue's own test suite included. Django must be set up (pytest-django)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .helpers import ZQueueTest


@pytest.fixture(scope="session")
def zqueue_redis_url() -> str:
    """The URL of the tests' Redis (``$ZQUEUE_TEST_REDIS_URL``, else the configured one
    if it answers, else a private server started once per session); override this
    fixture to choose another."""
    from .server import test_redis_url

    return test_redis_url()


@pytest.fixture
def zqueue(zqueue_redis_url: str) -> Iterator[ZQueueTest]:
    """This test's own queues: every configured queue under a key prefix of the test's
    own on the tests' Redis, with ``enqueued``, ``assert_enqueued``,
    ``assert_not_enqueued``, ``expect_enqueued``, ``drain``, ``run`` and ``signal``;
    every key of the prefix is deleted after the test."""
    with ZQueueTest(zqueue_redis_url) as zq:
        yield zq
