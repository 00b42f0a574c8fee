"""The pytest plugin of django_zqueue (registered by the package: entry point
``pytest11``), docs/testing.md. It provides the fixture ``zqueue``: the test's own
queues (:class:`~.helpers.ZQueueTest`), started before the test and wiped after it.

Nothing runs unless a test asks for the fixture, and loading the plugin imports only the
package's root (safe before ``django.setup()``): the helpers are imported by the fixture.
It is safe in any project, django_zqueue's own test suite included. Django must be set
up (pytest-django)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported by the fixture, once Django is set up
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
    from .helpers import ZQueueTest

    with ZQueueTest(zqueue_redis_url) as zq:
        yield zq
