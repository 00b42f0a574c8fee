"""The queues' own prefix under a test runner (django_zqueue/conf/testenv.py): while
Django's test environment is set up, every queue uses ``test_<PREFIX>`` (with the
pytest-xdist worker's name), or ``ZQUEUE_TEST_PREFIX``; ``False`` opts out. The suite
itself opts out (testproject/settings.py), so each test here sets it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from django_zqueue import conf, get_queue
from django_zqueue.conf import queue_options, testenv
from django_zqueue.exceptions import ConfigurationError
from django_zqueue.queue import Queue

from . import testing_tasks as t
from .redis_server import redis_url


@pytest.fixture
def site() -> Iterator[str]:
    """A project's settings with its own PREFIX (a developer's keys)."""
    base = f"zqt-{uuid.uuid4().hex[:10]}"
    value = {**settings.ZQUEUE, "REDIS_URL": redis_url(), "PREFIX": base}
    with override_settings(ZQUEUE=value):
        yield base
    conf.reset()


def test_pytest_django_sets_up_the_test_environment() -> None:
    assert testenv.under_test()


def test_the_default_test_prefix_is_test_and_the_prefix(
    site: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    with override_settings(ZQUEUE_TEST_PREFIX=True):
        assert conf.get_config().prefix == f"test_{site}"
        assert get_queue().engine.prefix == f"test_{site}"


def test_an_unset_test_prefix_is_the_default(site: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    with override_settings():
        del settings.ZQUEUE_TEST_PREFIX
        conf.reset()
        try:
            assert conf.get_config().prefix == f"test_{site}"
        finally:
            conf.reset()


def test_under_xdist_each_worker_has_its_own(site: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    with override_settings(ZQUEUE_TEST_PREFIX=""):
        assert conf.get_config().prefix == f"test_{site}_gw3"


def test_a_named_test_prefix(site: str) -> None:
    with override_settings(ZQUEUE_TEST_PREFIX="mine"):
        assert conf.get_config().prefix == "mine"


@pytest.mark.parametrize("off", [False, None])
def test_opting_out_runs_on_the_prefix_itself(site: str, off: object) -> None:
    with override_settings(ZQUEUE_TEST_PREFIX=off):
        assert conf.get_config().prefix == site


@pytest.mark.parametrize("bad", ["has space", "{brace}", "x" * 101, 3])
def test_a_bad_test_prefix_is_a_configuration_error(site: str, bad: object) -> None:
    with override_settings(ZQUEUE_TEST_PREFIX=bad):
        with pytest.raises(ConfigurationError, match=r"E022.*ZQUEUE_TEST_PREFIX"):
            conf.get_config()
        assert any(p.id == "E022" for p in conf.problems())


def test_the_test_prefix_goes_when_the_environment_does(
    site: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not under test (a developer's worker, the same settings): the prefix itself."""
    from django.test import utils

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)

    with override_settings(ZQUEUE_TEST_PREFIX=True):
        assert get_queue().engine.prefix == f"test_{site}"
        saved = utils._TestState.saved_data
        del utils._TestState.saved_data
        try:
            assert not testenv.under_test()
            assert conf.get_config().prefix == site
            assert get_queue().engine.prefix == site  # the cached queue dropped too
        finally:
            utils._TestState.saved_data = saved
        assert conf.get_config().prefix == f"test_{site}"
        assert get_queue().engine.prefix == f"test_{site}"


def test_a_tests_job_never_reaches_the_developers_keys(
    site: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    dev = Queue("default", queue_options("default"), prefix=site, client=redis_client)
    tests = Queue("default", queue_options("default"), prefix=f"test_{site}", client=redis_client)
    try:
        with override_settings(ZQUEUE_TEST_PREFIX=True):
            t.add.enqueue(1, 2)
        assert dev.counts()["ready"] == 0 and dev.claim(5)[0] == []
        assert tests.counts()["ready"] == 1
    finally:
        tests.engine.sandbox.wipe_prefix()
        dev.engine.sandbox.wipe_prefix()
