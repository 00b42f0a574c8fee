"""The admin's schedules page on real Redis: the list (code beside runtime), and the
buttons and add form: POST only, CSRF, ``manage_jobs`` and ``ADMIN_ACTIONS`` checked,
refusals shown with nothing written."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.test import Client, override_settings

from django_zqueue import conf, get_queue, schedules
from django_zqueue.engine import schedstore

from .conftest import snapshot
from .test_admin import BASE, client_for, make_user, project  # noqa: F401

pytestmark = pytest.mark.django_db

PAGE = f"{BASE}schedules/"
RECORD = "testproject.demo.tasks.record"
HEARTBEAT = "testproject.demo.tasks.heartbeat"


def operator() -> Client:
    return client_for(make_user("operator", "view_queue", "manage_jobs"))


def test_the_page_lists_code_and_runtime_schedules(
    project: dict[str, Any],  # noqa: F811
) -> None:
    schedules.add("tidy", RECORD, every=90, args=["l", 1])
    schedules.pause("tidy")
    viewer = client_for(make_user("viewer", "view_queue"))
    page = viewer.get(PAGE).content.decode()
    assert 'data-schedule="tidy"' in page and f'data-schedule="{HEARTBEAT}"' in page
    assert "every 90 s" in page and "*/10 * * * *" in page and "runtime" in page
    assert "Run now" not in page and "Add a schedule" not in page  # no manage_jobs
    assert viewer.post(f"{PAGE}do/", {"op": "resume", "name": "tidy"}).status_code == 403
    assert schedules.get("tidy").paused
    assert client_for(make_user("staff")).get(PAGE).status_code == 403
    page = operator().get(PAGE).content.decode()
    assert "Run now" in page and "Add a schedule" in page and 'value="resume"' in page
    assert "manage</a>" in viewer.get(BASE).content.decode()  # linked from the overview


def test_buttons_pause_resume_run_and_remove(
    project: dict[str, Any],  # noqa: F811
) -> None:
    schedules.add("tidy", RECORD, every=90, args=["l", 1])
    c = operator()
    assert c.get(f"{PAGE}do/").status_code == 405
    assert c.post(f"{PAGE}do/", {"op": "pause", "name": "tidy"}).status_code == 302
    assert schedules.get("tidy").paused
    c.post(f"{PAGE}do/", {"op": "run", "name": "tidy"})
    q = get_queue("default")
    assert q.counts()["ready"] == 1
    assert schedules.get("tidy").next_at is None  # run now does not move (or resume) it
    c.post(f"{PAGE}do/", {"op": "resume", "name": "tidy"})
    assert not schedules.get("tidy").paused
    r = c.post(f"{PAGE}do/", {"op": "remove", "name": "tidy"})
    assert r.status_code == 200 and "Yes, I\u2019m sure" in r.content.decode()  # asks first
    assert schedules.get("tidy")
    r = c.post(f"{PAGE}do/", {"op": "remove", "name": "tidy", "confirm": "yes"}, follow=True)
    assert "Schedule tidy removed." in r.content.decode()
    assert not schedstore.stored(q, ["tidy"])


def test_the_add_form_and_its_refusals(
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
    prefix: str,
) -> None:
    c = operator()
    form = {"name": "n", "task": RECORD, "cron": "0 3 * * *", "args": '["l", 1]'}
    r = c.post(f"{PAGE}add/", form, follow=True)
    assert "Schedule n added." in r.content.decode()
    e = schedules.get("n")
    assert (e.source, e.cron, e.args, e.queue) == ("runtime", "0 3 * * *", ("l", 1), "default")
    before = snapshot(redis_client, prefix)
    for bad, message in (
        ({**form, "name": "m", "cron": "nope"}, "invalid cron"),
        ({**form, "name": "m", "args": "[1"}, "rgs is not JSON"),
        ({**form, "name": "m", "args": "[]"}, "do not fit"),
        ({**form, "name": "n"}, "already exists"),
        ({**form, "name": HEARTBEAT}, "declared in code"),
        ({**form, "name": "m", "cron": "", "every": "-1"}, "very must be &gt; 0"),
        ({**form, "name": "m", "timezone": "Nowhere/At_All"}, "unknown time zone"),
    ):
        page = c.post(f"{PAGE}add/", bad, follow=True).content.decode()
        assert message in page, message
        assert f'value="{bad["name"]}"' in page  # what was typed is kept
    assert c.post(f"{PAGE}do/", {"op": "remove", "name": HEARTBEAT, "confirm": "yes"})
    assert snapshot(redis_client, prefix) == before
    assert client_for(make_user("v2", "view_queue")).post(f"{PAGE}add/", form).status_code == 403


def test_csrf_is_checked_and_actions_can_be_off(
    project: dict[str, Any],  # noqa: F811
) -> None:
    schedules.add("tidy", RECORD, every=90, args=["l", 1])
    strict = client_for(make_user("strict", "view_queue", "manage_jobs"), enforce_csrf_checks=True)
    assert strict.post(f"{PAGE}do/", {"op": "pause", "name": "tidy"}).status_code == 403
    assert not schedules.get("tidy").paused
    with override_settings(ZQUEUE={**project, "ADMIN_ACTIONS": False}):
        conf.reset()
        c = operator()
        assert "Run now" not in c.get(PAGE).content.decode()
        assert c.post(f"{PAGE}do/", {"op": "pause", "name": "tidy"}).status_code == 404
    conf.reset()
    assert not schedules.get("tidy").paused


def test_a_runtime_schedule_is_edited_from_its_form_checked_as_add_and_logged(
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
    prefix: str,
) -> None:
    from django.contrib.admin.models import LogEntry

    schedules.add("tidy", RECORD, every=90, args=["l", 1])
    c = operator()
    assert f"{PAGE}edit/?name=tidy" in c.get(PAGE).content.decode()
    form = c.get(f"{PAGE}edit/", {"name": "tidy"}).content.decode()
    assert 'value="90"' in form and "[&quot;l&quot;, 1]" in form and "checked" in form
    # refused as add refuses, the form kept, nothing written
    before = snapshot(redis_client, prefix)
    for bad, says in [
        ({"cron": "61 * * * *", "every": ""}, "cron"),
        ({"cron": "", "every": "90", "args": '{"not": "a list"}'}, "args must be a JSON list"),
        ({"cron": "", "every": "-1"}, "every"),
        ({"cron": "0 3 * * *", "every": "60"}, "not both"),
        ({"cron": "0 3 * * *", "every": "", "timezone": "Mars/Olympus"}, "Mars/Olympus"),
        ({"cron": "", "every": "90", "args": '["l"]'}, "argument"),  # record needs 2
    ]:
        r = c.post(f"{PAGE}edit/", {"name": "tidy", "enabled": "on", **bad})
        assert r.status_code == 200, bad
        assert says in r.content.decode(), (bad, says)
    assert snapshot(redis_client, prefix) == before
    r = c.post(
        f"{PAGE}edit/",
        {"name": "tidy", "cron": "0 3 * * *", "every": "", "args": '["m", 2]', "kwargs": ""},
    )  # enabled not ticked: paused
    assert r.status_code == 302
    e = schedules.get("tidy")
    assert (e.cron, e.every, e.args, e.paused) == ("0 3 * * *", None, ("m", 2), True)
    c.post(
        f"{PAGE}edit/",
        {"name": "tidy", "cron": "", "every": "30", "args": '["m", 3]', "enabled": "on"},
    )
    e = schedules.get("tidy")
    assert (e.cron, e.every, e.args, e.paused) == (None, 30.0, ("m", 3), False)
    assert [m.change_message for m in LogEntry.objects.order_by("pk")] == [
        'change: 0 3 * * *, {"args": ["m", 2], "kwargs": {}}, paused',
        'change: every 30 s, {"args": ["m", 3], "kwargs": {}}, enabled',
    ]
    # a schedule in code is not edited here; a viewer may not edit
    r = c.get(f"{PAGE}edit/", {"name": HEARTBEAT})
    assert r.status_code == 302
    viewer = client_for(make_user("viewer", "view_queue"))
    assert viewer.post(f"{PAGE}edit/", {"name": "tidy", "every": "5"}).status_code == 403
    assert schedules.get("tidy").every == 30.0
