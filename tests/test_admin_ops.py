"""The admin's operator features beyond the read-only pages: the 403 that names the
permission, model arguments linked to their admin pages, no metrics link without
prometheus-client, no ETA while no worker is live (against the real Redis)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from django_zqueue import conf, get_queue
from django_zqueue.admin import display
from testproject.demo import tasks

from .test_admin import BASE, client_for, make_user, manager, project, superuser, viewer  # noqa: F401

pytestmark = pytest.mark.django_db


def test_missing_permission_is_a_403_in_the_admin_look_naming_it(
    project: dict[str, Any],  # noqa: F811
) -> None:
    staff = client_for(make_user("staff"))
    r = staff.get(BASE)
    assert r.status_code == 403
    page = r.content.decode()
    assert 'id="header"' in page and "Can view queue" in page and "django_zqueue.view_queue" in page
    dead = get_queue("default").publish("x")
    r = client_for(make_user("looker", "view_queue")).post(
        f"{BASE}q/default/dead/requeue/", {"tags": [dead]}
    )
    assert r.status_code == 403
    assert "django_zqueue.manage_dead_letters" in r.content.decode()


def test_no_metrics_link_without_prometheus_client(
    project: dict[str, Any],  # noqa: F811
    viewer: Client,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert f'href="{BASE}metrics/"' in viewer.get(BASE).content.decode()
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    assert "metrics/" not in viewer.get(BASE).content.decode()


def test_model_arguments_link_to_their_admin_page(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
) -> None:
    who = User.objects.create_user("alice")
    job = tasks.record.enqueue("ledger", {"user": who, "note": "<b>hi</b>"})
    page = superuser.get(f"{BASE}q/default/job/", {"id": job.id}).content.decode()
    assert f'<a href="/admin/auth/user/{who.pk}/change/">auth.User #{who.pk}</a>' in page
    assert "__zq__" not in page and "&lt;b&gt;hi&lt;/b&gt;" in page


def test_arguments_html_escapes_and_leaves_unknown_models_as_text() -> None:
    body = {
        "task": "t",
        "args": [{"__zq__": "model", "app_label": "nope", "model_name": "gone", "pk": 3}],
        "kwargs": {"x": "<script>", "y": {"__zq__": "model", "app_label": "a", "model_name": "b"}},
    }
    html = display.arguments_html(body, lambda a, m, pk: (f"{a}.{m} #{pk}", None))
    assert "nope.gone #3" in html and "a.b #None" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    from django.contrib import admin

    assert display.model_link(admin.site)("nope", "gone", 3) == ("nope.gone #3", None)


def test_no_eta_while_no_worker_is_live(
    project: dict[str, Any],  # noqa: F811
    viewer: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    tags = [q.publish(i) for i in range(2)]
    q.engine._client.hset(q.engine._keys.stats, mapping={"acked": 4, "run_ms": 8000})
    rows = viewer.get(f"{BASE}q/default/").context["page"].rows
    assert [r.eta for r in rows] == ["", ""]
    job = viewer.get(f"{BASE}q/default/job/", {"id": tags[1]})
    assert "no live worker" in job.content.decode()
    seen = int(time.time() * 1000)
    q.engine._client.hset(q.engine._keys.workers, "w:1:a", json.dumps({"threads": 1, "seen": seen}))
    rows = viewer.get(f"{BASE}q/default/").context["page"].rows
    assert [r.eta for r in rows] == ["2 seconds", "4 seconds"]


# ---------------------------------------------------------------- actions


def test_cancel_waiting_jobs_asks_first_and_needs_its_permission(
    project: dict[str, Any],  # noqa: F811
    manager: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    ready, later = q.publish("a"), q.publish("b", delay=3600)
    url = f"{BASE}q/default/do/cancel/"
    # manage_dead_letters is not enough; no button either
    assert manager.post(url, {"tags": [ready]}).status_code == 403
    assert "Cancel selected" not in manager.get(f"{BASE}q/default/").content.decode()
    c = client_for(make_user("canceller", "view_queue", "manage_jobs"))
    page = c.get(f"{BASE}q/default/").content.decode()
    assert "Cancel selected" in page and "data-zq-select-all" in page
    assert "Requeue selected" not in c.get(f"{BASE}q/default/?state=dead").content.decode()
    r = c.post(url, {"tags": [ready, later]})
    assert r.status_code == 200 and "Cancel 2 jobs?" in r.content.decode()
    assert q.counts()["ready"] == 1 and q.counts()["delayed"] == 1
    r = c.post(url, {"tags": [ready, later, "gone"], "confirm": "yes"})
    assert r.status_code == 302 and q.counts()["ready"] == q.counts()["delayed"] == 0
    msgs = [str(m) for m in c.get(r["Location"]).context["messages"]]
    assert msgs == ["2 jobs cancelled.", "1 job not cancelled: no such job, or it ended already."]
    assert c.post(f"{BASE}q/default/do/nope/", {"tags": [ready]}).status_code == 404
    assert c.get(url).status_code == 405


def test_a_running_job_is_cancelled_from_the_in_flight_tab(
    project: dict[str, Any],  # noqa: F811
) -> None:
    q = get_queue("default")
    tag = q.publish("a")
    q.claim(1)
    c = client_for(make_user("canceller", "view_queue", "manage_jobs"))
    assert "Cancel selected" in c.get(f"{BASE}q/default/", {"state": "leased"}).content.decode()
    c.post(f"{BASE}q/default/do/cancel/", {"tags": [tag], "confirm": "yes"})
    assert q.state(tag) is None
    cancelled = q.cancelled(tag)
    assert cancelled is not None and cancelled.was == "leased"


def test_run_now_moves_a_waiting_job_to_the_front(
    project: dict[str, Any],  # noqa: F811
) -> None:
    q = get_queue("default")
    q.publish_many(range(5))
    last = q.publish("last")
    c = client_for(make_user("mover", "view_queue", "manage_jobs"))
    assert q.rank(last) == 5
    r = c.post(f"{BASE}q/default/do/run_now/", {"tags": [last]})
    assert r.status_code == 302 and q.rank(last) == 0
    onlooker = client_for(make_user("onlooker", "view_queue"))
    r = onlooker.post(f"{BASE}q/default/do/run_now/", {"tags": [last]})
    assert r.status_code == 403 and "manage_jobs" in r.content.decode()


def test_every_action_is_offered_where_it_applies() -> None:
    from django_zqueue.admin.actions import ACTIONS, offered

    assert [a.name for a in offered("dead", lambda code: True)] == [
        "requeue",
        "retry_now",
        "delete",
    ]
    assert [a.name for a in offered("ready", lambda code: True)] == [
        "cancel",
        "run_now",
        "priority",
    ]
    assert [a.name for a in offered("leased", lambda code: True)] == ["cancel"]
    assert offered("ready", lambda code: code != "manage_jobs") == []
    assert all(a.confirm is None or "%(what)s" in a.confirm for a in ACTIONS.values())
    assert all("%(what)s" in a.title for a in ACTIONS.values() if a.confirm)


# ---------------------------------------------------------------- workers page


def test_workers_page_lists_each_worker_and_the_jobs_it_holds(
    project: dict[str, Any],  # noqa: F811
    viewer: Client,  # noqa: F811
) -> None:
    from django_zqueue.worker.leases import Leases

    default, emails = get_queue("default"), get_queue("emails")
    Leases("web-1:4242:ab12", [default, emails], threads=3).register()
    old = int(time.time() * 1000) - 60_000
    gone = {"threads": 2, "seen": old, "host": "web-2", "pid": 7}
    default.engine._client.hset(default.engine._keys.workers, "web-2:7:cd34", json.dumps(gone))
    default.engine._client.hset(default.engine._keys.workers, "junk", "not json")
    tags = [default.publish(i) for i in range(3)]
    held = default.claim(2, consumer="web-1:4242:ab12")[0]
    default.claim(1, consumer="someone-else")
    r = viewer.get(f"{BASE}workers/")
    assert r.status_code == 200
    page = r.context["page"]
    assert [(w.id, w.live, w.threads, w.queues) for w in page.workers] == [
        ("web-1:4242:ab12", True, 3, ["default", "emails"]),
        ("web-2:7:cd34", False, 2, ["default"]),
    ]
    first = page.workers[0]
    assert first.started and first.pid is not None and first.host
    assert sorted(j.tag for j in first.jobs) == sorted(m.tag for m in held)
    assert all(j.lease_left.startswith("in ") for j in first.jobs)
    assert page.workers[1].started == "" and page.workers[1].jobs == []
    html = r.content.decode()
    assert f"{BASE}q/default/job/?id={held[0].tag}" in html
    assert '<span class="zq-state zq-state-dead">gone: heartbeat stopped</span>' in html
    assert '<span class="zq-state zq-state-ready">running</span>' in html
    assert tags[2] not in html  # held by a consumer that is no registered worker
    assert f'href="{BASE}workers/"' in viewer.get(BASE).content.decode()
    assert client_for(make_user("nobody")).get(f"{BASE}workers/").status_code == 403


# ---------------------------------------------------------------- filters


def test_filter_by_task_reads_a_bounded_window_and_scans_further(
    project: dict[str, Any],  # noqa: F811
    viewer: Client,  # noqa: F811
) -> None:
    from django_zqueue.admin import filters

    q = get_queue("default")
    n = filters.WINDOW + 100
    tags = q.publish_many(
        [{"task": "shop.mail" if i % 3 == 0 else "shop.report", "args": [i]} for i in range(n)]
    )
    r = viewer.get(f"{BASE}q/default/", {"task": "MAIL"})
    scan = r.context["scan"]
    assert (scan.first, scan.last, scan.total, scan.more) == (1, filters.WINDOW, n, True)
    rows = r.context["page"].rows
    assert [row.tag for row in rows] == [
        t for i, t in enumerate(tags[: filters.WINDOW]) if i % 3 == 0
    ]
    assert [row.rank for row in rows[:3]] == [0, 3, 6]  # their rank in the whole line
    nxt = r.context["scan_next"]
    assert "window=2" in nxt and "task=MAIL" in nxt
    r = viewer.get(nxt)
    rows = r.context["page"].rows
    want = [t for i, t in enumerate(tags) if i >= filters.WINDOW and i % 3 == 0]
    assert [row.tag for row in rows] == want and r.context["scan_next"] is None
    r = viewer.get(f"{BASE}q/default/", {"task": "nothing-like-it"})
    assert "No job of this window matches." in r.content.decode()


def test_filter_dead_letters_by_error_needs_payload_permission(
    project: dict[str, Any],  # noqa: F811
    viewer: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    for i in range(6):
        q.publish({"task": "t", "args": [i]})
    for i, m in enumerate(q.claim(6)[0]):
        q.nack(m, "SMTPError: refused" if i % 2 else "KeyError: 'x'", dead=True)
    reader = client_for(make_user("reader", "view_queue", "view_payload"))
    r = reader.get(f"{BASE}q/default/", {"state": "dead", "error": "smtp"})
    assert len(r.context["page"].rows) == 3
    assert all("SMTPError" in (row.error or "") for row in r.context["page"].rows)
    # without the payload permission the error filter is not offered and not applied
    r = viewer.get(f"{BASE}q/default/", {"state": "dead", "error": "smtp"})
    assert len(r.context["page"].rows) == 6 and 'name="error"' not in r.content.decode()


def test_pause_and_resume_a_queue_from_its_page(
    project: dict[str, Any],  # noqa: F811
) -> None:
    q = get_queue("default")
    c = client_for(make_user("pauser", "view_queue", "manage_jobs"))
    page = c.get(f"{BASE}q/default/").content.decode()
    assert "Pause queue" in page and "Paused:" not in page
    assert c.get(f"{BASE}q/default/pause/").status_code == 405
    r = c.post(f"{BASE}q/default/pause/", {"op": "pause"})  # asks first
    assert r.status_code == 200 and "Pause queue default?" in r.content.decode()
    assert not q.is_paused()
    r = c.post(f"{BASE}q/default/pause/", {"op": "pause", "confirm": "yes"})
    assert r.status_code == 302 and q.is_paused()
    page = c.get(f"{BASE}q/default/").content.decode()
    assert "Resume queue" in page and "Paused:" in page
    onlooker = client_for(make_user("onlooker2", "view_queue"))
    assert "Resume queue" not in onlooker.get(f"{BASE}q/default/").content.decode()
    assert onlooker.post(f"{BASE}q/default/pause/", {"op": "resume"}).status_code == 403
    assert q.is_paused()
    assert c.post(f"{BASE}q/default/pause/", {"op": "nope"}).status_code == 400
    c.post(f"{BASE}q/default/pause/", {"op": "resume"})
    assert not q.is_paused()


# ---------------------------------------------------------------- workflows and groups


def test_a_workflow_job_page_shows_its_parents_and_dependents(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    parent = q.publish("p")
    kid = q.publish("k", depends_on=[parent])
    page = superuser.get(f"{BASE}q/default/job/", {"id": parent}).content.decode()
    assert "Workflow" in page and f"id={kid}" in page and "Dependents (1)" in page
    page = superuser.get(f"{BASE}q/default/job/", {"id": kid}).content.decode()
    assert f"id={parent}" in page and "Parents (1)" in page and "waiting" in page
    plain = q.publish("plain")
    assert "Workflow" not in superuser.get(f"{BASE}q/default/job/", {"id": plain}).content.decode()
    overview = superuser.get(BASE).content.decode()
    assert "+1 waiting" in overview


def test_a_fair_queue_page_lists_its_groups(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
) -> None:
    queues = {**project["QUEUES"], "fair": {"fairness": "groups"}}
    with override_settings(ZQUEUE={**project, "QUEUES": queues}):
        q = get_queue("fair")
        tags = [q.publish(i, group="tenant-a") for i in range(3)]
        q.publish("b", group="tenant-b")
        page = superuser.get(f"{BASE}q/fair/").content.decode()
        assert "zq-groups" in page and "tenant-a" in page and "tenant-b" in page
        assert page.index("tenant-a") < page.index("tenant-b")  # biggest first
        job = superuser.get(f"{BASE}q/fair/job/", {"id": tags[0]}).content.decode()
        assert "Group" in job and "tenant-a" in job
        plain = superuser.get(f"{BASE}q/default/").content.decode()
        assert "zq-groups" not in plain
    conf.reset()


def test_set_priority_of_waiting_jobs_and_refuse_a_bad_value(
    project: dict[str, Any],  # noqa: F811
) -> None:
    q = get_queue("default")
    q.publish_many(range(3))
    last = q.publish("last")
    c = client_for(make_user("prioritiser", "view_queue", "manage_jobs"))
    url = f"{BASE}q/default/do/priority/"
    for bad in ("", "x", "1.5", "1001", "-1001"):
        assert c.post(url, {"tags": [last], "value": bad}).status_code == 400
    assert q.rank(last) == 3 and q.info(last).priority == 0  # type: ignore[union-attr]
    r = c.post(url, {"tags": [last], "value": "7"})
    assert r.status_code == 302 and q.rank(last) == 0
    assert q.info(last).priority == 7  # type: ignore[union-attr]
    page = c.get(f"{BASE}q/default/job/", {"id": last}).content.decode()
    assert 'name="value" value="7"' in page
