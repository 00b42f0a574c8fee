"""A durable job on the admin's job page: what it is parked for (sleeping until ...,
waiting for event ...), the send-event form offering the names it waits for, and a
mistyped event refused with those names, nothing written; with Django's test client
against a real Redis."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.contrib.admin.models import LogEntry

from django_zqueue import durable, get_queue
from django_zqueue.admin.durable import waited_names
from django_zqueue.exceptions import Parked
from django_zqueue.queue.durable_calls import DurableRecord, ParkedFor
from django_zqueue.tasks.context import JobContext, set_current_job

from .conftest import snapshot
from .test_admin import BASE, client_for, make_user, project  # noqa: F401
from .test_admin_durable import signal_url, waiting_job

pytestmark = pytest.mark.django_db


def sleeping_job() -> str:
    q = get_queue("default")
    tag = q.publish({"task": "x"})
    (msg,), _ = q.claim(1, "c")
    set_current_job(JobContext(msg, q, "x"))
    try:
        with pytest.raises(Parked):
            durable.sleep("cool-off", 3600)
    finally:
        set_current_job(None)
    return tag


def test_a_job_waiting_for_an_event_says_so_and_the_form_offers_its_name(
    project: dict[str, Any],  # noqa: F811
) -> None:
    tag = waiting_job()
    c = client_for(make_user("op", "view_queue", "manage_jobs"))
    r = c.get(f"{BASE}q/default/job/", {"id": tag})
    html = r.content.decode()
    assert r.status_code == 200 and 'id="zq-parked"' in html
    assert "waiting for event approved (until" in html
    assert r.context["waits"] == ["approved"] and r.context["parked"].kind == "event"
    assert '<datalist id="zq-waits"><option value="approved"></datalist>' in html
    assert 'list="zq-waits" value="approved"' in html


def test_a_sleeping_job_says_until_when(project: dict[str, Any]) -> None:  # noqa: F811
    tag = sleeping_job()
    c = client_for(make_user("op", "view_queue", "manage_jobs"))
    r = c.get(f"{BASE}q/default/job/", {"id": tag})
    html = r.content.decode()
    assert "sleeping until" in html and "(durable sleep cool-off)" in html
    assert r.context["waits"] == [] and 'list="zq-waits"' not in html


def test_a_mistyped_event_is_refused_with_the_names_waited_for(
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
    prefix: str,
) -> None:
    tag = waiting_job()
    c = client_for(make_user("op", "view_queue", "manage_jobs"))
    before = snapshot(redis_client, prefix)
    r = c.post(signal_url(), {"id": tag, "name": "aproved", "payload": ""}, follow=True)
    html = r.content.decode()
    assert f"Nothing sent: job {tag} waits for approved, not aproved." in html
    assert snapshot(redis_client, prefix) == before and not LogEntry.objects.exists()
    # sent ahead on purpose: kept for a wait to come, the job still parked
    r = c.post(signal_url(), {"id": tag, "name": "aproved", "ahead": "1"}, follow=True)
    assert "Event aproved kept for job" in r.content.decode()
    assert get_queue("default").state(tag) == "delayed"
    r = c.post(signal_url(), {"id": tag, "name": "approved"}, follow=True)
    assert "Event approved delivered to job" in r.content.decode()
    assert [e.change_message for e in LogEntry.objects.order_by("pk")] == [
        f"send event: aproved to job {tag} (kept)",
        f"send event: approved to job {tag} (woken)",
    ]


def test_a_job_not_parked_for_an_event_takes_any_name(
    project: dict[str, Any],  # noqa: F811
) -> None:
    """A sleeping job (or one not parked): an event is kept for a wait to come."""
    tag = sleeping_job()
    c = client_for(make_user("op", "view_queue", "manage_jobs"))
    r = c.post(signal_url(), {"id": tag, "name": "later"}, follow=True)
    assert "Event later kept for job" in r.content.decode()


def test_waited_names() -> None:
    recs = [
        DurableRecord("wait", "b", None, None),
        DurableRecord("wait", "a", None, None),
        DurableRecord("event", "a", "1", None),
        DurableRecord("step", "s", "1", None),
    ]
    assert waited_names(recs) == ["b"]
    now = ParkedFor("event", "c", None)  # type: ignore[arg-type]
    assert waited_names(recs, now) == ["b", "c"]
    assert waited_names(recs, ParkedFor("sleep", "z", None)) == ["b"]  # type: ignore[arg-type]


def test_the_delayed_tab_shows_parked_jobs_own_state(
    project: dict[str, Any],  # noqa: F811
) -> None:
    waiting, sleeping = waiting_job(), sleeping_job()
    plain = get_queue("default").publish({"task": "later"}, delay=600)
    c = client_for(make_user("v", "view_queue"))
    r = c.get(f"{BASE}q/default/", {"state": "delayed"})
    rows = {row.tag: (row.parked, row.parked_name) for row in r.context["page"].rows}
    assert rows == {
        waiting: ("event", "approved"),
        sleeping: ("sleep", "cool-off"),
        plain: ("", ""),
    }
    html = r.content.decode()
    assert "waiting for event approved, at most until" in html
    assert "sleeping (cool-off) until" in html
