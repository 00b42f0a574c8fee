"""django_zqueue.testing for unittest and Django's TestCase: ``ZQueueTestMixin`` gives
each test ``self.zqueue``, wiped at its end; ``with_zqueue`` gives one test its own."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core import mail
from django.db import transaction
from django.test import SimpleTestCase, TestCase, TransactionTestCase

from django_zqueue import get_queue
from django_zqueue.testing import ZQueueTest, ZQueueTestMixin, with_zqueue

from . import testing_tasks as t
from .redis_server import redis_url


class Mixed(ZQueueTestMixin):
    def setUp(self) -> None:
        self.zqueue_redis_url = redis_url()
        t.LOG.clear()
        super().setUp()


class MixinInATestCase(Mixed, TestCase):
    def test_own_prefix(self) -> None:
        assert get_queue().engine.prefix == self.zqueue.prefix

    def test_enqueue_in_atomic_is_seen_and_drained(self) -> None:
        user = User.objects.create_user("ann", "ann@example.com", "x")
        with transaction.atomic():
            t.send_welcome.enqueue(user.pk)
        self.zqueue.assert_enqueued(t.send_welcome, args=[user.pk])
        self.zqueue.drain()
        assert mail.outbox[0].to == ["ann@example.com"]

    def test_a_failing_task_fails_the_test_with_its_error(self) -> None:
        t.boom.enqueue("mixin")
        with self.assertRaisesMessage(ValueError, "mixin"):
            self.zqueue.drain()


class MixinInATransactionTestCase(Mixed, TransactionTestCase):
    def test_enqueued_at_once_and_drained(self) -> None:
        t.add.enqueue(2, 2)
        self.zqueue.assert_enqueued(t.add, args=[2, 2])
        assert self.zqueue.drain().succeeded == 1
        assert t.LOG == [("add", 2, 2)]


class EachTestIsWiped(Mixed, SimpleTestCase):
    def test_the_keys_go_at_the_end(self) -> None:
        t.add.enqueue(1, 1)
        prefix = self.zqueue.prefix
        self.zqueue.stop()
        with ZQueueTest(redis_url(), prefix=prefix) as again:
            assert again.enqueued() == []


class Decorated(SimpleTestCase):
    @with_zqueue
    def test_with_zqueue(self, zq: ZQueueTest) -> None:
        assert get_queue().engine.prefix == zq.prefix
        t.add.enqueue(5, 5)
        zq.assert_enqueued(t.add, args=[5, 5], count=1)


def test_the_package_registers_the_pytest_plugin() -> None:
    """pyproject.toml's entry point (pytest11) names the plugin module, which has the
    fixtures."""
    import tomllib
    from pathlib import Path

    from django_zqueue.testing import plugin

    data = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    points = data["project"]["entry-points"]["pytest11"]
    assert points == {"django_zqueue.testing.plugin": "django_zqueue.testing.plugin"}
    assert callable(plugin.zqueue) and callable(plugin.zqueue_redis_url)


def test_a_bad_prefix_fails_at_start_and_leaves_the_settings_alone() -> None:
    import pytest
    from django.conf import settings

    from django_zqueue.exceptions import ConfigurationError

    before = settings.ZQUEUE
    with pytest.raises(ConfigurationError, match=r"E004|E022"):
        ZQueueTest(redis_url(), prefix="has space").start()
    assert before == settings.ZQUEUE
    assert settings.ZQUEUE_TEST_PREFIX is False


def test_drain_leaves_the_tests_connection_alone_without_the_db_mark() -> None:
    """A test without database access, after one that opened the thread's connection:
    the worker's checks around each job leave that connection alone (they would ask it,
    and pytest-django refuses), and the job runs."""
    from django.db import connection

    with ZQueueTest(redis_url()) as zq:
        t.LOG.clear()
        t.add.enqueue(1, 2)
        opened = connection.connection is not None
        zq.drain()
        assert t.LOG == [("add", 1, 2)]
        assert (connection.connection is not None) == opened
