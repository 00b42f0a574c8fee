"""The admin's "Select all N" (every job of a tab that matches) and Retry now, with
Django's test client against a real Redis."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client, override_settings

from django_zqueue import get_queue
from django_zqueue.queue import Queue
from django_zqueue.queue.bulk import Bulk, BulkResult

from .test_admin import BASE, client_for, make_user, manager, project, superuser, viewer  # noqa: F401

pytestmark = pytest.mark.django_db


def do(name: str) -> str:
    return f"{BASE}q/default/do/{name}/"


def bury(q: Queue, n: int, task: str = "t", prefix: str = "d") -> list[str]:
    tags = [f"{prefix}{i}" for i in range(n)]
    q.publish_many([{"task": task, "args": [], "kwargs": {}}] * n, tags=tags)
    while msgs := q.claim(100)[0]:
        for m in msgs:
            q.nack(m, f"ValueError: {m.body['task']}", dead=True)  # type: ignore[index]
    return tags


def messages_of(c: Client, location: str) -> list[str]:
    return [str(m) for m in c.get(location).context["messages"]]


def test_the_bar_is_offered_when_the_page_does_not_show_every_job(
    project: dict[str, Any],  # noqa: F811
    manager: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    bury(q, 30)
    page = manager.get(f"{BASE}q/default/?state=dead&per_page=25").content.decode()
    assert "data-zq-across hidden" in page and "Select all 30 jobs of this tab" in page
    assert 'name="select_across" value="0"' in page
    assert "Retry selected now" in page
    whole = manager.get(f"{BASE}q/default/?state=dead&per_page=50").content.decode()
    assert "data-zq-across" not in whole  # every job is on the page already
    filtered = manager.get(f"{BASE}q/default/?state=dead&task=t").content.decode()
    assert "Select every job of this tab that matches the filter" in filtered


def test_requeue_every_dead_letter_across_pages(
    project: dict[str, Any],  # noqa: F811
    manager: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    bury(q, 260)
    r = manager.post(do("requeue"), {"select_across": "1", "state": "dead", "tags": ["d0"]})
    assert r.status_code == 302 and r["Location"] == f"{BASE}q/default/?state=dead"
    assert messages_of(manager, r["Location"]) == ["260 dead letters requeued."]
    assert q.counts()["dead"] == 0 and q.counts()["ready"] == 260


def test_the_filter_chooses_and_the_jobs_that_left_are_counted(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q = get_queue("default")
    a = bury(q, 40, task="app.a", prefix="a")
    b = bury(q, 10, task="app.b", prefix="b")
    original = Bulk._act

    def act(self: Bulk, shard: Any, action: str, state: str, tags: list[str]) -> BulkResult:
        for t in tags[:3]:  # somebody else requeues them first
            assert q.requeue_dead(t)
        return original(self, shard, action, state, tags)

    monkeypatch.setattr(Bulk, "_act", act)
    post = {"select_across": "1", "state": "dead", "error": "app.a"}
    r = superuser.post(do("requeue"), post)
    assert messages_of(superuser, r["Location"]) == [
        "37 dead letters requeued. 3 had already left the dead letters."
    ]
    assert all(q.state(t) == "ready" for t in a) and all(q.state(t) == "dead" for t in b)


def test_delete_every_match_asks_first(
    project: dict[str, Any],  # noqa: F811
    manager: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    bury(q, 5, task="app.keep", prefix="k")
    bury(q, 7, task="app.drop", prefix="x")
    post = {"select_across": "1", "state": "dead", "task": "drop"}
    r = manager.post(do("delete"), post)
    page = r.content.decode()
    assert r.status_code == 200 and "This cannot be undone" in page
    assert "whose task contains “drop”" in page
    assert re.search(r'name="select_across" value="1"', page) and 'name="task" value="drop"' in page
    assert q.counts()["dead"] == 12
    r = manager.post(do("delete"), {**post, "confirm": "yes"})
    assert messages_of(manager, r["Location"]) == ["7 dead letters deleted."]
    assert q.counts()["dead"] == 5


def test_cancel_and_run_now_every_job_of_a_tab(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    q.publish("first", tag="first")
    later = [q.publish("x", delay=600, tag=f"l{i}") for i in range(30)]
    r = superuser.post(do("run_now"), {"select_across": "1", "state": "delayed"})
    assert "30 waiting jobs moved to the front of the line." in messages_of(
        superuser, r["Location"]
    )
    assert q.rank("first") == 30
    r = superuser.post(do("cancel"), {"select_across": "1", "state": "ready", "confirm": "yes"})
    assert messages_of(superuser, r["Location"]) == ["31 jobs cancelled."]
    assert all(q.state(t) is None for t in later)


def test_select_across_is_checked_as_the_actions_are(
    project: dict[str, Any],  # noqa: F811
    manager: Client,  # noqa: F811
    viewer: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    bury(q, 3)
    across = {"select_across": "1", "state": "dead", "confirm": "yes"}
    assert manager.get(do("requeue")).status_code == 405
    assert viewer.post(do("requeue"), across).status_code == 403
    assert manager.post(do("requeue"), {**across, "state": "ready"}).status_code == 400
    runner = client_for(make_user("runner", "view_queue", "manage_jobs"))
    assert runner.post(do("priority"), {**across, "state": "ready"}).status_code == 400
    csrf = client_for(
        make_user("csrf", "view_queue", "manage_dead_letters"), enforce_csrf_checks=True
    )
    assert csrf.post(do("requeue"), across).status_code == 403
    with override_settings(ZQUEUE={**project, "ADMIN_ACTIONS": False}):
        assert manager.post(do("requeue"), across).status_code == 404
    assert q.counts()["dead"] == 3


def test_retry_now_from_the_job_page_and_the_list(
    project: dict[str, Any],  # noqa: F811
    manager: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    dead = bury(q, 2)
    for i in range(5):
        q.publish("x", priority=100, tag=f"r{i}")
    page = manager.get(f"{BASE}q/default/job/", {"id": dead[0]}).content.decode()
    assert "Retry now" in page and "Requeue" in page
    r = manager.post(do("retry_now"), {"tags": [dead[0]]})
    assert messages_of(manager, r["Location"]) == [
        "1 dead letter requeued to the front of the line."
    ]
    assert q.rank(dead[0]) == 0
    manager.post(do("requeue"), {"tags": [dead[1]]})
    assert q.rank(dead[1]) == 6
