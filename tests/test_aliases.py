"""Task aliases (``@task(aliases=[...])``): the queued jobs of a renamed task run the
new one; a name or an alias taken twice is refused at registration; ``check --deploy``
names the queued task names no code registers, with their counts per queue."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import checks

from django_zqueue import get_queue, task
from django_zqueue.exceptions import ConfigurationError, InvalidArgument
from django_zqueue.ops.checks import check_unregistered_tasks
from django_zqueue.tasks import registry
from django_zqueue.worker import Worker

OLD = "tests.aliases.old_resize"
NEW = "tests.aliases.resize"

_seen: list[int] = []
_lock = threading.Lock()


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """Registered tasks and aliases as they were before the test."""
    tasks, aliases = dict(registry._tasks), dict(registry._aliases)
    yield
    registry._tasks.clear()
    registry._tasks.update(tasks)
    registry._aliases.clear()
    registry._aliases.update(aliases)


def _old(n: int) -> None:
    raise AssertionError("the old function must not run")


def _new(n: int) -> None:
    with _lock:
        _seen.append(n)


def test_5000_queued_jobs_of_a_renamed_task_run_under_its_alias(
    zqueue_settings: dict[str, Any], clean_registry: None
) -> None:
    old = task(name=OLD)(_old)
    old.enqueue_many([(i,) for i in range(5000)])
    registry._tasks.pop(OLD)  # the deploy: the old name is gone from the code
    assert registry.get(OLD) is None
    task(name=NEW, aliases=[OLD])(_new)
    assert registry.get(OLD) is registry.get(NEW)
    _seen.clear()
    Worker(["default"], burst=True, scan_interval=0.05, concurrency=4).run()
    assert sorted(_seen) == list(range(5000))
    q = get_queue("default")
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}


def test_a_job_of_an_unregistered_name_still_dies_unknown(
    zqueue_settings: dict[str, Any], clean_registry: None
) -> None:
    old = task(name=OLD)(_old)
    job = old.enqueue(1)
    registry._tasks.pop(OLD)
    Worker(["default"], burst=True, scan_interval=0.05).run()
    info = get_queue("default").info(job.id)
    assert info is not None and info.state == "dead"
    assert "unknown task" in (info.last_error or "")


def test_an_alias_taken_by_another_task_is_refused_whole(clean_registry: None) -> None:
    task(name=NEW, aliases=[OLD])(_new)
    before = (dict(registry._tasks), dict(registry._aliases))
    with pytest.raises(ConfigurationError, match=r"alias 'tests\.aliases\.old_resize'"):
        task(name="tests.aliases.other", aliases=["tests.aliases.x", OLD])(_old)
    assert (registry._tasks, registry._aliases) == before  # nothing registered
    with pytest.raises(ConfigurationError, match="already used"):
        task(name=OLD)(_old)  # a task named as another's alias
    with pytest.raises(ConfigurationError, match="already used"):
        task(name="tests.aliases.third", aliases=[NEW])(_old)  # an alias that is a name
    with pytest.raises(ConfigurationError, match="its own name"):
        task(name="tests.aliases.fourth", aliases=["tests.aliases.fourth"])(_old)
    # the same function registered again (a module imported twice) is no clash
    task(name=NEW, aliases=[OLD])(_new)


@pytest.mark.parametrize(
    "bad", ["old.name", ["ok", ""], ["ok", 3], ["a", "a"], [None], {"a": 1}, ["x" * 257]]
)
def test_bad_aliases_raise_a_clear_error(bad: Any, clean_registry: None) -> None:
    before = (dict(registry._tasks), dict(registry._aliases))
    with pytest.raises(InvalidArgument, match="alias"):
        task(name="tests.aliases.bad", aliases=bad)(_new)
    assert (registry._tasks, registry._aliases) == before


def test_check_deploy_names_an_unregistered_task_with_its_counts(
    zqueue_settings: dict[str, Any], clean_registry: None
) -> None:
    task(name=OLD)(_old).enqueue_many([(i,) for i in range(7)])
    task(name=OLD, queue="other")(_old).using(queue="other").enqueue_in(3600, 1)
    task(name="tests.aliases.kept")(_new).enqueue(1)
    registry._tasks.pop(OLD)
    registry._tasks.pop("tests.aliases.kept")
    task(name="tests.aliases.kept2", aliases=["tests.aliases.kept"])(_new)
    found = check_unregistered_tasks()
    assert [m.id for m in found] == ["django_zqueue.W003"]
    assert isinstance(found[0], checks.Warning)
    assert OLD in found[0].msg and "'default': 7" in found[0].msg and "'other': 1" in found[0].msg
    assert "aliases=['tests.aliases.old_resize']" in (found[0].hint or "")
    # the alias added, the check is quiet
    task(name=NEW, aliases=[OLD])(_new)
    assert check_unregistered_tasks() == []


def test_the_sample_is_bounded_and_says_so(
    zqueue_settings: dict[str, Any], clean_registry: None
) -> None:
    task(name=OLD)(_old).enqueue_many([(i,) for i in range(30)])
    q = get_queue("default")
    got = q.read.task_names(sample=10)
    assert got.counts == {OLD: 10} and got.read == 10 and got.queued == 30 and not got.exact
    full = q.read.task_names()
    assert full.counts == {OLD: 30} and full.exact
    with pytest.raises(InvalidArgument):
        q.read.task_names(sample=0)
