"""Every action of the queue admin audited in Django's admin log (``LogEntry``: the user,
the queue, the count), confirmations that say how many jobs they act on, "Pause queue"
asking first, and Enter on a row checkbox submitting no action; with Django's test
client against a real Redis."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.test import Client

from django_zqueue import get_queue, schedules
from django_zqueue.admin import bulk, filters
from django_zqueue.queue import Queue

from .test_admin import BASE, client_for, make_user, project  # noqa: F401
from .test_admin_durable import signal_url, waiting_job

pytestmark = pytest.mark.django_db

RECORD = "testproject.demo.tasks.record"


def entries() -> list[tuple[str, str, int, str]]:
    """(user, queue, flag, message) of every log entry, oldest first."""
    return [
        (e.user.username, e.object_id or "", e.action_flag, e.get_change_message())
        for e in LogEntry.objects.order_by("pk")
    ]


def dead_letters(q: Queue, tasks: list[str]) -> list[str]:
    tags = [q.publish({"task": t, "args": [i]}) for i, t in enumerate(tasks)]
    for m in q.claim(len(tags))[0]:
        q.nack(m, "boom", dead=True)
    return tags


@pytest.fixture
def operator() -> Client:
    return client_for(make_user("op", "view_queue", "manage_jobs", "manage_dead_letters"))


def test_actions_on_selected_jobs_are_logged_with_their_count(
    project: dict[str, Any],  # noqa: F811
    operator: Client,
) -> None:
    q = get_queue("default")
    dead = dead_letters(q, ["t.a", "t.a", "t.b"])
    r = operator.post(f"{BASE}q/default/do/requeue/", {"tags": [*dead[:2], "not-there"]})
    assert r.status_code == 302
    waiting = [q.publish({"task": "t.w"}) for _ in range(3)]
    operator.post(f"{BASE}q/default/do/run_now/", {"tags": waiting[:1]})
    operator.post(f"{BASE}q/default/do/priority/", {"tags": waiting[1:], "value": "7"})
    r = operator.post(f"{BASE}q/default/do/cancel/", {"tags": waiting})  # asks first
    assert r.status_code == 200 and "Cancel 3 jobs?" in r.content.decode()
    operator.post(f"{BASE}q/default/do/cancel/", {"tags": waiting, "confirm": "yes"})
    operator.post(f"{BASE}q/default/do/delete/", {"tags": dead[2:], "confirm": "yes"})
    assert entries() == [
        ("op", "default", CHANGE, "requeue: 2 jobs (of 3 asked)"),
        ("op", "default", CHANGE, "run_now: 1 job"),
        ("op", "default", CHANGE, "priority: 2 jobs"),
        ("op", "default", CHANGE, "cancel: 3 jobs"),
        ("op", "default", DELETION, "delete: 1 job"),
    ]
    e = LogEntry.objects.order_by("pk").first()
    assert e is not None and e.object_repr == "default" and e.content_type.model == "queue"


def test_refused_and_unconfirmed_actions_log_nothing(
    project: dict[str, Any],  # noqa: F811
    operator: Client,
) -> None:
    q = get_queue("default")
    dead = dead_letters(q, ["t.a"])
    onlooker = client_for(make_user("onlooker", "view_queue"))
    assert onlooker.post(f"{BASE}q/default/do/requeue/", {"tags": dead}).status_code == 403
    assert (
        onlooker.post(f"{BASE}q/default/pause/", {"op": "pause", "confirm": "yes"}).status_code
        == 403
    )
    assert operator.post(f"{BASE}q/default/do/delete/", {"tags": dead}).status_code == 200
    assert operator.post(f"{BASE}q/default/pause/", {"op": "pause"}).status_code == 200
    assert operator.post(f"{BASE}q/default/do/requeue/", {}).status_code == 302  # none selected
    assert (
        operator.post(f"{BASE}q/default/pause/", {"op": "x", "confirm": "yes"}).status_code == 400
    )
    assert entries() == [] and q.counts()["dead"] == 1 and not q.is_paused()


def test_pause_asks_first_then_pause_resume_and_purge_are_logged(
    project: dict[str, Any],  # noqa: F811
    operator: Client,
) -> None:
    q = get_queue("default")
    q.publish_many(range(1234))
    r = operator.post(f"{BASE}q/default/pause/", {"op": "pause"})
    html = r.content.decode()
    assert r.status_code == 200 and not q.is_paused()
    assert "Its 1,234 ready jobs wait" in html
    assert 'name="op" value="pause"' in html and 'name="confirm" value="yes"' in html
    operator.post(f"{BASE}q/default/pause/", {"op": "pause", "confirm": "yes"})
    assert q.is_paused()
    operator.post(f"{BASE}q/default/pause/", {"op": "resume"})  # resuming asks nothing
    assert not q.is_paused()
    dead_letters(q, ["t.a", "t.b"])
    operator.post(f"{BASE}q/default/dead/purge/", {"confirm": "yes"})
    assert entries() == [
        ("op", "default", CHANGE, "pause: the queue"),
        ("op", "default", CHANGE, "resume: the queue"),
        ("op", "default", DELETION, "purge: 2 jobs (every dead letter)"),
    ]


def test_a_filtered_action_on_every_match_says_how_many_and_is_logged(
    project: dict[str, Any],  # noqa: F811
    operator: Client,
) -> None:
    q = get_queue("default")
    dead_letters(q, ["t.keep", "t.drop", "t.keep", "t.drop", "t.drop"])
    form = {"select_across": "1", "state": "dead", "task": "drop"}
    r = operator.post(f"{BASE}q/default/do/delete/", form)
    text = re.sub(r"\s+", " ", r.content.decode())
    assert r.status_code == 200 and "the 3 jobs of the tab (of 5) whose task contains" in text
    assert q.counts()["dead"] == 5
    r = operator.post(f"{BASE}q/default/do/delete/", {**form, "confirm": "yes"})
    assert r.status_code == 302 and q.counts()["dead"] == 2
    assert entries() == [("op", "default", DELETION, "delete: 3 jobs")]


def test_a_tally_cut_short_says_at_least(project: dict[str, Any]) -> None:  # noqa: F811
    q = get_queue("default")
    dead_letters(q, ["t.drop"] * (bulk.COUNT_PAGE + 5))
    across = bulk.Across("dead", filters.Filter("drop", ""))
    tally = across.tally(q, budget_s=0)  # one page, then the budget is spent
    assert (tally.matched, tally.read, tally.total, tally.complete) == (200, 200, 205, False)
    action = bulk.actions.ACTIONS["delete"]
    assert across.what(action, 205, tally).startswith("at least 200 jobs of the tab (of 205)")
    full = across.tally(q)
    assert full.complete and full.matched == 205


def test_send_event_and_schedule_changes_are_logged(
    project: dict[str, Any],  # noqa: F811
    operator: Client,
) -> None:
    tag = waiting_job()
    operator.post(signal_url(), {"id": tag, "name": "approved", "payload": ""})
    operator.post(signal_url(), {"id": "no-such-job", "name": "approved", "payload": ""})
    form = {"name": "tidy", "task": RECORD, "every": "90", "args": '["l", 1]'}
    operator.post(f"{BASE}schedules/add/", form)
    operator.post(f"{BASE}schedules/do/", {"op": "pause", "name": "tidy"})
    operator.post(f"{BASE}schedules/do/", {"op": "run", "name": "tidy"})
    operator.post(f"{BASE}schedules/do/", {"op": "remove", "name": "tidy", "confirm": "yes"})
    operator.post(f"{BASE}schedules/do/", {"op": "pause", "name": "no-such"})  # refused
    assert entries() == [
        ("op", "default", CHANGE, f"send event: approved to job {tag} (woken)"),
        ("op", "schedule tidy", ADDITION, f"add: {RECORD} every 90 s on default"),
        ("op", "schedule tidy", CHANGE, "pause: the schedule"),
        ("op", "schedule tidy", CHANGE, "run: the schedule"),
        ("op", "schedule tidy", DELETION, "remove: the schedule"),
    ]
    assert "tidy" not in [e.name for e in schedules.entries()]


def test_enter_on_a_row_checkbox_submits_no_action(
    project: dict[str, Any],  # noqa: F811
    operator: Client,
) -> None:
    """A form's implicit submission (Enter) clicks its first submit button: the action
    forms' first is a disabled one, so Enter does nothing."""
    q = get_queue("default")
    dead_letters(q, ["t.a"])
    q.publish({"task": "t.w"})
    for state in ("dead", "ready"):
        html = operator.get(f"{BASE}q/default/", {"state": state}).content.decode()
        form = html[html.index('class="zq-select-form"') :]
        first = re.search(r"<(button|input)[^>]*type=\"submit\"[^>]*>", form)
        assert first is not None and " disabled" in first[0], state
        assert 'type="checkbox"' in form
