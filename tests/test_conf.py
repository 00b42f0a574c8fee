from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_zqueue import ConfigurationError, UnknownQueue, get_queue
from django_zqueue.conf import Backoff, get_config, parse


def ids(raw: Any) -> list[str]:
    return [p.id for p in parse(raw)[1]]


def test_defaults_are_valid() -> None:
    config, problems = parse(None)
    assert problems == []
    assert config.redis_url == "redis://localhost:6379/0"
    assert config.prefix == "zq"
    assert list(config.queues) == ["default"]
    assert config.queues["default"].priority_mode == "strict"


def test_full_valid_settings() -> None:
    config, problems = parse(
        {
            "REDIS_URL": "rediss://user:secret@example.com:6380/2",
            "PREFIX": "app.jobs",
            "DEFAULTS": {"max_retries": 7},
            "QUEUES": {
                "emails": {"visibility_timeout": 30, "concurrency": 4, "qps": 2.5},
                "reports": {
                    "priority_mode": "aging",
                    "priority_aging_seconds": 120,
                    "retry_backoff": {"base": 2, "max": 60, "jitter": 0},
                    "max_retries": 0,
                },
            },
            "SOCKET_TIMEOUT": None,
        }
    )
    assert problems == []
    emails, reports = config.queues["emails"], config.queues["reports"]
    assert emails.max_retries == 7  # from DEFAULTS
    assert emails.concurrency == 4 and emails.qps == 2.5 and emails.visibility_timeout == 30
    assert reports.max_retries == 0
    assert reports.retry_backoff == Backoff(2.0, 60.0, 0.0)
    assert config.socket_timeout is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([], "django_zqueue.E001"),
        ({"REDIS_URLS": "x"}, "django_zqueue.E001"),
        ({"REDIS_URL": "http://localhost"}, "django_zqueue.E002"),
        ({"REDIS_URL": ""}, "django_zqueue.E002"),
        ({"SOCKET_TIMEOUT": -1}, "django_zqueue.E003"),
        ({"CONNECTION_OPTIONS": 3}, "django_zqueue.E003"),
        ({"PREFIX": "a{b}"}, "django_zqueue.E004"),
        ({"QUEUES": {"bad name": {}}}, "django_zqueue.E004"),
        ({"QUEUES": {}}, "django_zqueue.E005"),
        ({"QUEUES": {"q": []}}, "django_zqueue.E005"),
        ({"QUEUES": {"q": {"visiblity_timeout": 3}}}, "django_zqueue.E006"),
        ({"QUEUES": {"q": {"visibility_timeout": 0}}}, "django_zqueue.E007"),
        ({"QUEUES": {"q": {"concurrency": 1.5}}}, "django_zqueue.E007"),
        ({"QUEUES": {"q": {"qps": float("nan")}}}, "django_zqueue.E007"),
        ({"QUEUES": {"q": {"max_retries": -1}}}, "django_zqueue.E007"),
        ({"QUEUES": {"q": {"max_retries": True}}}, "django_zqueue.E007"),
        ({"QUEUES": {"q": {"dead_letter_max": 0}}}, "django_zqueue.E007"),
        ({"QUEUES": {"q": {"priority_mode": "fair"}}}, "django_zqueue.E008"),
        ({"QUEUES": {"q": {"priority_aging_seconds": 10**9}}}, "django_zqueue.E009"),
        ({"QUEUES": {"q": {"retry_backoff": 5}}}, "django_zqueue.E011"),
        ({"QUEUES": {"q": {"retry_backoff": {"jitter": 2}}}}, "django_zqueue.E011"),
    ],
)
def test_invalid_settings_are_reported(raw: Any, expected: str) -> None:
    assert expected in ids(raw)


def test_check_command_reports_problems_with_hints() -> None:
    with override_settings(ZQUEUE={"QUEUES": {"q": {"priority_mode": "fair"}}}):
        with pytest.raises(SystemCheckError) as err:
            call_command("check")
    text = str(err.value)
    assert "django_zqueue.E008" in text
    assert "HINT" in text


def test_check_command_passes_on_valid_settings() -> None:
    queues = {"default": {}, "emails": {}, "reports": {}}  # the ones TASKS names
    with override_settings(ZQUEUE={"QUEUES": queues}):
        call_command("check")


def test_check_command_reports_tasks_queues_missing_from_zqueue() -> None:
    with override_settings(ZQUEUE={"QUEUES": {"default": {}}}):
        with pytest.raises(SystemCheckError, match=r"django_zqueue\.E104"):
            call_command("check")


def test_get_config_raises_and_reset_on_change() -> None:
    with override_settings(ZQUEUE={"QUEUES": {"q": {"qps": -1}}}):
        with pytest.raises(ConfigurationError, match="E007"):
            get_config()
    with override_settings(ZQUEUE={"QUEUES": {"q": {"qps": 1}}}):
        assert get_config().queues["q"].qps == 1.0


def test_get_queue(zqueue_settings: dict[str, Any]) -> None:
    q = get_queue("other")
    assert q.options.max_retries == 1
    assert q.engine._keys.ready == f"{{{zqueue_settings['PREFIX']}:other}}:ready"
    assert get_queue("other") is q
    with pytest.raises(UnknownQueue, match="unknown queue 'nope'"):
        get_queue("nope")


def test_backoff_grows_and_caps() -> None:
    b = Backoff(base=1, max=10, jitter=0)
    assert [b.delay(a) for a in (1, 2, 3, 4, 5, 6)] == [1, 2, 4, 8, 10, 10]
    j = Backoff(base=10, max=100, jitter=0.5)
    assert j.delay(1, rand=lambda: 0.0) == 5.0
    assert j.delay(1, rand=lambda: 1.0) == 15.0
