"""The admin dashboard with Django's test client, against a real Redis.

Every page and permission case, the dead-letter actions (POST only, CSRF, permission,
the ADMIN_ACTIONS switch), HTML escaping, and that GET requests write nothing to Redis
and stay within a fixed number of Redis commands.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import translation
from redis.connection import AbstractConnection

from django_zqueue import conf, get_queue
from django_zqueue.admin import dashboard
from django_zqueue.metrics import ZQueueCollector, exposition, metrics_view
from django_zqueue.queue import Queue
from django_zqueue.web import humanize
from testproject.demo import tasks

from .conftest import snapshot
from .redis_server import redis_url

pytestmark = pytest.mark.django_db

BASE = "/admin/django_zqueue/queue/"
EVIL = "<script>alert(1)</script>"


@pytest.fixture
def project(prefix: str) -> Iterator[dict[str, Any]]:
    """The testproject's queues (default, emails, reports) under this test's prefix."""
    value = {
        **settings.ZQUEUE,
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "ENQUEUE_ON_COMMIT": False,  # the test's transaction never commits
    }
    with override_settings(ZQUEUE=value):
        yield value
    conf.reset()


def make_user(name: str, *perms: str, staff: bool = True) -> User:
    user = User.objects.create_user(name, f"{name}@example.com", "pw", is_staff=staff)
    for codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="django_zqueue", codename=codename)
        )
    return user


def client_for(user: User | None, **kwargs: Any) -> Client:
    c = Client(**kwargs)
    if user is not None:
        c.force_login(user)
    return c


@pytest.fixture
def viewer() -> Client:
    return client_for(make_user("viewer", "view_queue"))


@pytest.fixture
def payload_viewer() -> Client:
    return client_for(make_user("payload", "view_queue", "view_payload"))


@pytest.fixture
def manager() -> Client:
    return client_for(make_user("manager", "view_queue", "manage_dead_letters"))


@pytest.fixture
def superuser() -> Client:
    return client_for(User.objects.create_superuser("root", "root@example.com", "pw"))


@pytest.fixture
def jobs(project: dict[str, Any]) -> dict[str, str]:
    """A bit of everything in "default": ready, delayed, in flight (with progress), dead
    (with an error), and HTML in every field a person can write to."""
    q = get_queue("default")
    ready = [tasks.add.enqueue(i, i).id for i in range(3)]
    evil = q.publish({"task": EVIL, "args": [EVIL], "kwargs": {"x": EVIL}}, tag=EVIL)
    delayed = tasks.add.enqueue_in(600, 1, 2).id
    q.publish({"task": "testproject.demo.tasks.sleep", "args": [5], "kwargs": {}}, tag="running")
    q.publish(
        {"task": "testproject.demo.tasks.always_fails", "args": [], "kwargs": {}}, tag="doomed"
    )
    # claim in rank order: the three adds, the evil one, then "running" and "doomed"
    msgs = {m.tag: m for m in q.claim(6, consumer=f"host:1:{EVIL}")[0]}
    for tag in (*ready, evil):
        q.release(msgs[tag])
    q.touch(msgs["running"], progress=0.42, note=f"half {EVIL}")
    q.nack(
        msgs["doomed"],
        f"RuntimeError: {EVIL}\nTraceback (most recent call last):\n  boom",
        dead=True,
    )
    return {
        "ready": ready[0],
        "evil": evil,
        "delayed": delayed,
        "running": "running",
        "dead": "doomed",
    }


def job_url(tag: str, queue: str = "default") -> str:
    return f"{BASE}q/{queue}/job/?id={quote(tag, safe='')}"


def pages(jobs: dict[str, str]) -> list[str]:
    """Every GET page of the dashboard."""
    return [
        BASE,
        f"{BASE}q/default/",
        f"{BASE}q/default/?state=delayed",
        f"{BASE}q/default/?state=leased",
        f"{BASE}q/default/?state=dead",
        f"{BASE}q/emails/",
        job_url(jobs["ready"]),
        job_url(jobs["delayed"]),
        job_url(jobs["running"]),
        job_url(jobs["dead"]),
        job_url(jobs["evil"]),
        f"{BASE}search/?q={jobs['ready']}",
        f"{BASE}search/?q=nope",
        f"{BASE}metrics/",
    ]


ACTIONS = ["requeue", "delete", "purge"]


def action_url(action: str, queue: str = "default") -> str:
    return f"{BASE}q/{queue}/dead/{action}/"


# ---------------------------------------------------------------- who may see what


def test_anonymous_is_sent_to_login(jobs: dict[str, str]) -> None:
    c = Client()
    for url in [*pages(jobs), *(action_url(a) for a in ACTIONS)]:
        r = c.get(url)
        assert r.status_code == 302, url
        assert r["Location"].startswith("/admin/login/?next="), url
    r = c.post(action_url("purge"), {"confirm": "yes"})
    assert r.status_code == 302 and r["Location"].startswith("/admin/login/")


def test_non_staff_is_sent_to_login_even_with_permissions(jobs: dict[str, str]) -> None:
    user = make_user("outsider", "view_queue", "view_payload", "manage_dead_letters", staff=False)
    c = client_for(user)
    for url in pages(jobs):
        r = c.get(url)
        assert r.status_code == 302 and r["Location"].startswith("/admin/login/"), url
    r = c.post(action_url("purge"), {"confirm": "yes"})
    assert r.status_code == 302 and r["Location"].startswith("/admin/login/")
    assert get_queue("default").counts()["dead"] == 1


def test_staff_without_view_permission_gets_403(jobs: dict[str, str]) -> None:
    c = client_for(make_user("staff"))
    for url in pages(jobs):
        assert c.get(url).status_code == 403, url
    for action in ACTIONS:
        assert c.post(action_url(action), {"tags": [jobs["dead"]]}).status_code == 403
    # and the admin index does not list the app
    assert b"django_zqueue/queue/" not in c.get("/admin/").content


def test_view_permission_shows_every_page(viewer: Client, jobs: dict[str, str]) -> None:
    for url in pages(jobs):
        r = viewer.get(url)
        assert r.status_code in (200, 302), url
    index = viewer.get("/admin/").content.decode()
    assert f'href="{BASE}"' in index and "Queues" in index
    assert f"{BASE}add/" not in index


def test_add_change_delete_are_off(superuser: Client, project: dict[str, Any]) -> None:
    for url in (f"{BASE}add/", f"{BASE}1/change/", f"{BASE}1/delete/", f"{BASE}1/"):
        assert superuser.get(url).status_code == 404, url


def test_payload_is_hidden_without_view_payload(viewer: Client, jobs: dict[str, str]) -> None:
    job = viewer.get(job_url(jobs["dead"])).content.decode()
    assert "Hidden: needs the permission" in job
    assert "RuntimeError" not in job and "Traceback" not in job
    args = viewer.get(job_url(jobs["running"])).content.decode()
    assert "Hidden: needs the permission" in args and 'id="zq-arguments"' not in args
    dead = viewer.get(f"{BASE}q/default/?state=dead").content.decode()
    assert "RuntimeError" not in dead and ">hidden<" in dead
    # the task name is not payload
    assert "testproject.demo.tasks.always_fails" in dead


def test_payload_is_shown_with_view_payload(payload_viewer: Client, jobs: dict[str, str]) -> None:
    job = payload_viewer.get(job_url(jobs["dead"])).content.decode()
    assert "RuntimeError: &lt;script&gt;" in job and "Traceback (most recent call last)" in job
    running = payload_viewer.get(job_url(jobs["running"])).content.decode()
    assert re.search(r'id="zq-arguments">\{\s*&quot;args&quot;: \[\s*5\s*\]', running)
    dead = payload_viewer.get(f"{BASE}q/default/?state=dead").content.decode()
    assert "RuntimeError: &lt;script&gt;alert(1)&lt;/script&gt;" in dead
    assert "Traceback" not in dead  # the list shows the first line only


def test_everything_is_html_escaped(superuser: Client, jobs: dict[str, str]) -> None:
    seen = set()
    for url in [*pages(jobs), f"{BASE}search/?q={quote(EVIL)}&queue=emails"]:
        r = superuser.get(url, follow=True)
        assert r.status_code == 200, url
        body = r.content.decode()
        assert "<script>alert" not in body, url
        if "&lt;script&gt;alert(1)&lt;/script&gt;" in body:
            seen.add(url)
    # the evil tag, task name, arguments, consumer, progress note and error were all shown
    assert job_url(jobs["evil"]) in seen
    assert f"{BASE}q/default/?state=leased" in seen and f"{BASE}q/default/?state=dead" in seen


# ---------------------------------------------------------------- pages


def test_overview_lists_every_queue(viewer: Client, jobs: dict[str, str]) -> None:
    r = viewer.get(BASE)
    assert r.status_code == 200
    assert r.templates[0].name == "admin/django_zqueue/overview.html"
    html = r.content.decode()
    for name in ("default", "emails", "reports"):
        assert f'href="{BASE}q/{name}/"' in html
    rows = {row["s"].name: row["s"] for row in r.context["rows"]}
    d = rows["default"]
    assert (d.ready, d.delayed, d.inflight, d.dead) == (4, 1, 1, 1)
    assert d.lag_seconds is not None and 0 <= d.lag_seconds < 60
    assert rows["emails"].lag_seconds is None
    # admin look: extends base_site, uses the admin's and the package's stylesheets, no CDN
    assert 'id="site-name"' in html and "/static/django_zqueue/dashboard.css" in html
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)
    # the server-rendered charts
    assert (
        html.count('<figure class="zq-chart">\n<svg') == 6 and 'class="zq-line zq-c-ready"' in html
    )


def test_overview_agrees_with_the_queue_api(project: dict[str, Any], jobs: dict[str, str]) -> None:
    queues = [get_queue(n) for n in ("default", "emails")]
    q = queues[0]
    q.engine._client.hset(
        q.engine._keys.workers,
        "w:1:abcd",
        json.dumps({"threads": 3, "seen": int(time.time() * 1000), "host": "w", "pid": 1}),
    )
    summary = dashboard.overview(queues)[0]
    assert {
        "ready": summary.ready,
        "delayed": summary.delayed,
        "inflight": summary.inflight,
        "dead": summary.dead,
    } == q.counts()
    assert summary.workers == q.live_threads() == 3
    expected = q.minutes(60)
    assert [m.minute for m in summary.minutes] == [m["minute"] for m in expected]
    assert [vars_of(m) for m in summary.minutes] == expected
    stats = q.stats()
    assert {k: summary.counters.get(k) for k in stats} == stats
    assert summary.now_ms // 60_000 == summary.minutes[-1].minute


def vars_of(m: dashboard.Minute) -> dict[str, int]:
    return {name: getattr(m, name) for name in ("minute", *dashboard.SERIES.values())}


def test_queue_page_lists_ready_jobs_in_rank_order_paginated(
    viewer: Client, project: dict[str, Any]
) -> None:
    q = get_queue("default")
    tags = q.publish_many([{"task": "t", "args": [i], "kwargs": {}} for i in range(120)])
    urgent = q.publish({"task": "urgent"}, priority=5)
    r = viewer.get(f"{BASE}q/default/")
    page = r.context["page"]
    assert [row.tag for row in page.rows] == [urgent, *tags[:49]]
    assert [row.rank for row in page.rows] == list(range(50))
    assert page.rows[0].priority == 5 and page.rows[0].task == "urgent"
    assert page.pages == 3 and page.total == 121
    r = viewer.get(f"{BASE}q/default/?page=3")
    rows = r.context["page"].rows
    assert [row.tag for row in rows] == tags[99:]
    for row in rows:
        assert row.rank == q.rank(row.tag) and row.score == q.score(row.tag)
    html = r.content.decode()
    assert "101\N{EN DASH}121 of 121 ready jobs" in html
    # a page past the end is the last page; junk is page 1
    assert viewer.get(f"{BASE}q/default/?page=99").context["page"].number == 3
    assert viewer.get(f"{BASE}q/default/?page=x").context["page"].number == 1
    assert viewer.get(f"{BASE}q/default/?page=99999999999999999999999").status_code == 200
    small = viewer.get(f"{BASE}q/default/?per_page=25&page=2").context["page"]
    assert small.per_page == 25 and small.rows[0].rank == 25


def test_tabs_delayed_leased_dead(payload_viewer: Client, jobs: dict[str, str]) -> None:
    q = get_queue("default")
    later = tasks.add.enqueue_in(3600, 5, 5).id
    delayed = payload_viewer.get(f"{BASE}q/default/?state=delayed").context["page"]
    assert [r.tag for r in delayed.rows] == [jobs["delayed"], later]  # by run-at
    assert delayed.rows[0].run_at is not None and delayed.rows[0].task.endswith(".add")

    r = payload_viewer.get(f"{BASE}q/default/?state=leased")
    (row,) = r.context["page"].rows
    assert row.tag == "running" and row.consumer == f"host:1:{EVIL}"
    assert row.progress_percent == 42 and row.progress_note == f"half {EVIL}"
    assert row.lease_deadline is not None and not row.overdue
    assert '<progress max="100" value="42"' in r.content.decode()

    r = payload_viewer.get(f"{BASE}q/default/?state=dead")
    (row,) = r.context["page"].rows
    assert row.tag == "doomed" and row.died_at is not None
    assert row.error == f"RuntimeError: {EVIL}"
    assert q.info("doomed") is not None


def test_job_page_shows_everything_from_info(payload_viewer: Client, jobs: dict[str, str]) -> None:
    q = get_queue("default")
    r = payload_viewer.get(job_url(jobs["ready"]))
    detail = r.context["job"]
    info = q.info(jobs["ready"])
    assert detail.info == info
    html = r.content.decode()
    assert f'<strong class="zq-rank">{info.rank}</strong>' in html
    # the score is an internal order: the page shows what it means, the position
    assert ">Position</th>" in html and ">Score</th>" not in html
    assert detail.task == "testproject.demo.tasks.add"
    assert '"args": [\n    0,\n    0\n  ]' in detail.arguments

    running = payload_viewer.get(job_url("running")).context["job"]
    assert running.info.state == "leased" and running.progress_percent == 42

    assert payload_viewer.get(job_url("no-such-job")).status_code == 404
    assert payload_viewer.get(f"{BASE}q/default/job/").status_code == 404
    assert payload_viewer.get(job_url("x" * 300)).status_code == 404
    assert payload_viewer.get(f"{BASE}q/nosuchqueue/").status_code == 404
    assert payload_viewer.get(job_url("x", "nosuchqueue")).status_code == 404


def test_search_redirects_to_the_job_with_its_position(
    viewer: Client, jobs: dict[str, str]
) -> None:
    q = get_queue("default")
    r = viewer.get(f"{BASE}search/", {"q": f"  {jobs['ready']} "})
    assert r.status_code == 302 and r["Location"] == job_url(jobs["ready"])
    r = viewer.get(f"{BASE}search/", {"q": jobs["ready"]}, follow=True)
    assert f'<strong class="zq-rank">{q.rank(jobs["ready"])}</strong>' in r.content.decode()
    # a tag that needs quoting
    r = viewer.get(f"{BASE}search/", {"q": EVIL})
    assert r.status_code == 302 and r["Location"] == job_url(EVIL)
    # restricted to one queue
    r = viewer.get(f"{BASE}search/", {"q": jobs["ready"], "queue": "emails"})
    assert r.status_code == 200 and "No job" in r.content.decode()
    assert r.context["searched"] == ["emails"]
    # not found, too long, and one tag in two queues
    assert "No job" in viewer.get(f"{BASE}search/", {"q": "missing"}).content.decode()
    assert "1 to 256 bytes" in viewer.get(f"{BASE}search/", {"q": "é" * 200}).content.decode()
    get_queue("emails").publish({}, tag=jobs["ready"])
    r = viewer.get(f"{BASE}search/", {"q": jobs["ready"]})
    assert r.status_code == 200
    assert [f["loc"].queue for f in r.context["found"]] == ["default", "emails"]


def test_redis_down_is_a_503_page(viewer: Client, project: dict[str, Any]) -> None:
    with override_settings(
        ZQUEUE={**project, "REDIS_URL": "redis://127.0.0.1:1/0", "SOCKET_CONNECT_TIMEOUT": 1}
    ):
        r = viewer.get(BASE)
    assert r.status_code == 503 and "Redis is unavailable" in r.content.decode()


# ---------------------------------------------------------------- dead-letter actions


def test_actions_are_post_only(manager: Client, jobs: dict[str, str]) -> None:
    for action in ACTIONS:
        assert manager.get(action_url(action)).status_code == 405
    assert get_queue("default").counts()["dead"] == 1


def test_actions_need_manage_dead_letters(
    viewer: Client, payload_viewer: Client, jobs: dict[str, str]
) -> None:
    for c in (viewer, payload_viewer):
        for action in ACTIONS:
            r = c.post(action_url(action), {"tags": [jobs["dead"]], "confirm": "yes"})
            assert r.status_code == 403
        assert 'id="zq-dead-form"' not in c.get(f"{BASE}q/default/?state=dead").content.decode()
    assert get_queue("default").counts()["dead"] == 1


def test_requeue_and_delete(manager: Client, jobs: dict[str, str]) -> None:
    q = get_queue("default")
    html = manager.get(f"{BASE}q/default/?state=dead").content.decode()
    assert 'id="zq-dead-form"' in html and f'value="{jobs["dead"]}"' in html
    r = manager.post(action_url("requeue"), {"tags": [jobs["dead"], "not-dead"]})
    assert r.status_code == 302 and r["Location"] == f"{BASE}q/default/?state=dead"
    assert q.state(jobs["dead"]) == "ready"
    msgs = [str(m) for m in manager.get(r["Location"]).context["messages"]]
    assert msgs == ["1 dead letter requeued.", "1 job not requeued: no longer dead letters."]
    # delete refuses a job that is not dead
    r = manager.post(action_url("delete"), {"tags": [jobs["dead"]], "confirm": "yes"})
    assert q.state(jobs["dead"]) == "ready"
    msg = q.claim(10)[0]
    doomed = next(m for m in msg if m.tag == jobs["dead"])
    q.nack(doomed, "again", dead=True)
    r = manager.post(action_url("delete"), {"tags": [jobs["dead"]]})
    assert r.status_code == 200 and "This cannot be undone" in r.content.decode()
    assert q.state(jobs["dead"]) == "dead"  # asked first
    r = manager.post(action_url("delete"), {"tags": [jobs["dead"]], "confirm": "yes"})
    assert r.status_code == 302 and q.state(jobs["dead"]) is None
    # from the job page, "next" brings you back there; a foreign "next" is ignored
    q.publish({}, tag="d2")
    q.nack(next(m for m in q.claim(50)[0] if m.tag == "d2"), "x", dead=True)
    here = job_url("d2")
    assert manager.post(action_url("requeue"), {"tags": ["d2"], "next": here})["Location"] == here
    q.nack(next(m for m in q.claim(50)[0] if m.tag == "d2"), "x", dead=True)
    r = manager.post(action_url("requeue"), {"tags": ["d2"], "next": "https://evil.example/"})
    assert r["Location"] == f"{BASE}q/default/?state=dead"


def test_purge_asks_for_confirmation(manager: Client, jobs: dict[str, str]) -> None:
    q = get_queue("default")
    r = manager.post(action_url("purge"))
    assert r.status_code == 200 and "Delete the 1 dead letter of queue" in r.content.decode()
    assert q.counts()["dead"] == 1
    r = manager.post(action_url("purge"), {"confirm": "yes"})
    assert r.status_code == 302 and q.counts()["dead"] == 0
    assert q.info(jobs["dead"]) is None


def test_actions_enforce_csrf(jobs: dict[str, str]) -> None:
    user = make_user("csrf", "view_queue", "manage_dead_letters")
    c = client_for(user, enforce_csrf_checks=True)
    q = get_queue("default")
    for action in ACTIONS:
        r = c.post(action_url(action), {"tags": [jobs["dead"]], "confirm": "yes"})
        assert r.status_code == 403, action
    assert q.counts()["dead"] == 1
    page = c.get(f"{BASE}q/default/?state=dead").content.decode()
    m = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert m is not None
    r = c.post(action_url("requeue"), {"tags": [jobs["dead"]], "csrfmiddlewaretoken": m.group(1)})
    assert r.status_code == 302 and q.state(jobs["dead"]) == "ready"


def test_actions_off_by_setting(
    manager: Client, jobs: dict[str, str], project: dict[str, Any]
) -> None:
    with override_settings(ZQUEUE={**project, "ADMIN_ACTIONS": False}):
        for action in ACTIONS:
            r = manager.post(action_url(action), {"tags": [jobs["dead"]], "confirm": "yes"})
            assert r.status_code == 404
        html = manager.get(f"{BASE}q/default/?state=dead").content.decode()
        assert 'id="zq-dead-form"' not in html and "actions are off" in html
        assert "Requeue" not in manager.get(job_url(jobs["dead"])).content.decode()
    assert get_queue("default").counts()["dead"] == 1


# ---------------------------------------------------------------- reads only, bounded


class Commands:
    """Counts the Redis commands sent by this process (pipelines included)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        send, pack = AbstractConnection.send_command, AbstractConnection.pack_commands

        def send_command(conn: Any, *args: Any, **kwargs: Any) -> Any:
            self.names.append(_name(args))
            return send(conn, *args, **kwargs)

        def pack_commands(conn: Any, commands: Any) -> Any:
            commands = list(commands)
            self.names.extend(_name(c) for c in commands)
            return pack(conn, commands)

        monkeypatch.setattr(AbstractConnection, "send_command", send_command)
        monkeypatch.setattr(AbstractConnection, "pack_commands", pack_commands)


def _name(args: Any) -> str:
    first = args[0]
    return (first.decode() if isinstance(first, bytes) else str(first)).upper()


def test_get_requests_write_nothing(
    superuser: Client, jobs: dict[str, str], redis_client: redis.Redis, prefix: str
) -> None:
    before = snapshot(redis_client, prefix)
    assert before
    for url in [*pages(jobs), *(action_url(a) for a in ACTIONS)]:
        superuser.get(url, follow=True)
    superuser.get(f"{BASE}q/default/?page=1000&per_page=200")
    superuser.get(f"{BASE}search/", {"q": EVIL})
    assert snapshot(redis_client, prefix) == before


def test_every_page_is_a_few_bounded_read_commands(
    superuser: Client, jobs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    get_queue("default").publish_many([{"n": i} for i in range(300)])
    superuser.get(BASE)  # warm up: connection and script loading
    allowed = {
        "TIME", "ZCARD", "ZRANGE", "ZREVRANGE", "HGETALL", "HGET", "HMGET", "ZSCORE",
        "ZRANK", "HEXISTS", "EVALSHA", "FCALL", "FCALL_RO", "MULTI", "EXEC",
        "EXISTS",  # the queue's pause key (read.overview)
        "ZRANGEBYLEX", "ZLEXCOUNT",  # the blocked keys of strict order (engine.order)
        "XINFO STREAM", "XRANGE",  # the job's log (at most JOB_LOGS["MAX_LINES"] lines)
        "GET",  # a chunk task's call: its job's pointer, then the call (engine.chunkcalls)
    }  # fmt: skip
    for url in [*pages(jobs), f"{BASE}q/default/?per_page=200&page=2"]:
        counter = Commands(monkeypatch)
        superuser.get(url)
        assert 0 < len(counter.names) <= 50, (url, counter.names)
        assert set(counter.names) <= allowed, (url, counter.names)
        monkeypatch.undo()


# ---------------------------------------------------------------- Prometheus


def test_prometheus_metrics(viewer: Client, jobs: dict[str, str]) -> None:
    pytest.importorskip("prometheus_client")
    r = viewer.get(f"{BASE}metrics/")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/plain")
    text = r.content.decode()
    assert 'zqueue_jobs{queue="default",state="ready"} 4.0' in text
    assert 'zqueue_jobs{queue="default",state="inflight"} 1.0' in text
    assert 'zqueue_jobs{queue="default",state="dead"} 1.0' in text
    assert 'zqueue_jobs_enqueued_total{queue="default"} 7.0' in text
    assert 'zqueue_jobs_failed_total{queue="default"} 1.0' in text
    assert 'zqueue_jobs_retried_total{queue="default"} 0.0' in text
    assert 'zqueue_workers{queue="emails"} 0.0' in text
    lag = re.search(r'zqueue_lag_seconds\{queue="default"\} ([0-9.e+-]+)', text)
    assert lag is not None and 0 <= float(lag.group(1)) < 60
    assert exposition([get_queue("emails")]).decode().count("zqueue_jobs{") == 4
    assert metrics_view(None).status_code == 200  # type: ignore[arg-type]
    assert list(ZQueueCollector().describe()) == []


def test_zqueue_stats_prometheus(
    jobs: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("prometheus_client")
    call_command("zqueue_stats", "--prometheus")
    out = capsys.readouterr().out
    assert "# TYPE zqueue_jobs gauge" in out
    assert 'zqueue_jobs{queue="reports",state="ready"} 0.0' in out
    assert 'zqueue_jobs_acked_total{queue="default"} 0.0' in out


def test_metrics_without_prometheus_client(
    viewer: Client, jobs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from django.core.management.base import CommandError

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    r = viewer.get(f"{BASE}metrics/")
    assert r.status_code == 501 and b"django-zqueue[prometheus]" in r.content
    with pytest.raises(CommandError, match="prometheus"):
        call_command("zqueue_stats", "--prometheus")


# ---------------------------------------------------------------- pieces


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, ""),
        (0.25, "250 milliseconds"),
        (0.001, "1 millisecond"),
        (1, "1 second"),
        (42.9, "42 seconds"),
        (90, "90 seconds"),
        (185, "3 minutes"),
        (7440, "2 hours, 4 minutes"),
        (3 * 86400 + 4 * 3600, "3 days, 4 hours"),
        (-5, "5 seconds"),
    ],
)
def test_duration(seconds: float | None, text: str) -> None:
    """Durations in words, through ngettext and django.utils.timesince."""
    assert humanize.duration(seconds) == text


def test_durations_and_counts_are_translated() -> None:
    with translation.override("de"):
        assert humanize.duration(7440) == "2 Stunden, 4 Minuten"
        assert humanize.duration(5) == "5 seconds"  # no catalogue of ours for German yet
        assert humanize.count(1234567) == "1.234.567"
    assert humanize.count(1234567) == "1,234,567" and humanize.count(None) == ""


def test_chart_geometry() -> None:
    chart = dashboard.line_chart("t", [("a", "ready", [0, None, 10, 5])], dots=True)
    (line,) = chart.lines
    assert line.points == "48.0,130.0 410.7,8.0 592.0,69.0" and len(line.dots) == 3
    assert [t.label for t in chart.ticks] == ["0", "5", "10"] and line.latest == 5
    assert [label for _, label in chart.xticks] == ["now"]
    assert dashboard.line_chart("t", [("a", "acked", [0, 0])]).empty
    assert [dashboard.nice_ceiling(x) for x in (0, 3, 10, 11, 4999, 7001)] == [
        1, 5, 10, 20, 5000, 10000,
    ]  # fmt: skip


def test_page_and_overview_validate_arguments(q: Queue) -> None:
    with pytest.raises(ValueError):
        dashboard.page(q, "nope", payload=False)
    with pytest.raises(ValueError):
        dashboard.page(q, "ready", per_page=1000, payload=False)
    with pytest.raises(ValueError):
        dashboard.overview([q], last=64)
    assert dashboard.locate([q], "") == [] and dashboard.job(q, "", payload=True) is None
    assert dashboard.first_line("  \n") is None and dashboard.first_line("a" * 400).endswith("…")


def test_orphan_and_vanished_rows(q: Queue, redis_client: redis.Redis) -> None:
    tag = q.publish({"task": "t"})
    redis_client.zrem(q.engine._keys.ready, tag)  # a record in no set
    (loc,) = dashboard.locate([q], tag)
    assert loc.state == "orphan" and loc.rank is None
    redis_client.zadd(q.engine._keys.ready, {"ghost": 1})  # a member without a record
    (row,) = dashboard.page(q, "ready", payload=True).rows
    assert row.tag == "ghost" and row.gone


def test_overview_lists_schedules(project: dict[str, Any], superuser: Client) -> None:
    from django_zqueue.tasks.schedules import Schedule, Scheduler

    clock = {"now": 1_800_000_000_000}
    s = Scheduler(
        ["default"],
        {
            "nightly": Schedule(
                name="nightly", task="testproject.demo.tasks.noop", cron="0 3 * * *", timezone="UTC"
            )
        },
        now_ms=lambda: clock["now"],
    )
    s.sync()
    clock["now"] += 86_400_000
    s.step()
    html = superuser.get("/admin/django_zqueue/queue/").content.decode()
    assert "Periodic schedules" in html and "nightly" in html and "0 3 * * *" in html
    assert ">ready<" in html  # the last job's state


def test_other_methods_on_read_pages_write_nothing(
    superuser: Client, jobs: dict[str, str], redis_client: redis.Redis, prefix: str
) -> None:
    """POST, PUT, PATCH and DELETE to every read-only page (as a superuser, CSRF checks
    off) change nothing; HEAD and OPTIONS neither. Only the three actions write."""
    before = snapshot(redis_client, prefix)
    for url in pages(jobs):
        for method in ("post", "put", "patch", "delete", "head", "options"):
            r = getattr(superuser, method)(url)
            assert r.status_code in (200, 302, 405), (method, url, r.status_code)
    assert snapshot(redis_client, prefix) == before


def test_a_lease_deadline_of_inf_shows(
    payload_viewer: Client, jobs: dict[str, str], redis_client: redis.Redis
) -> None:
    """A leased job whose deadline is +inf (a hand edit, a bug) shows on its page and in
    the list, its deadline read as the latest time there is, not an OverflowError."""
    q = get_queue("default")
    redis_client.zadd(q.engine._keys.leased, {jobs["running"]: float("inf")}, xx=True)
    page = payload_viewer.get(job_url(jobs["running"]))
    assert page.status_code == 200
    assert "9999" in page.content.decode()
    listing = payload_viewer.get(f"{BASE}q/default/?state=leased")
    assert listing.status_code == 200
    assert jobs["running"] in listing.content.decode()


def test_a_burst_turns_the_throughput_chart_to_a_log_axis() -> None:
    """110,000 enqueued in one minute beside 1,915 acks a minute: on a linear axis the
    acks lie on zero; on the log axis they sit at two thirds of the height. Each sample
    carries its value for hovering."""
    enq: list[int | None] = [2000] * 59 + [110_000]
    acked: list[int | None] = [1915] * 60
    series = [("enqueued", "enqueued", enq), ("acked", "acked", acked)]
    assert dashboard.wants_log(series)
    assert not dashboard.wants_log([("a", "acked", [5, 80]), ("b", "failed", [0, 3])])
    assert not dashboard.wants_log([("a", "ready", [1, 10_000])])  # one series
    chart = dashboard.line_chart("t", series, labels=[f"{i:02}:00 UTC" for i in range(60)])
    assert chart.log
    assert [t.label for t in chart.ticks] == ["0", "1", "100", "10,000", "1,000,000"]
    ack_y = float(chart.lines[1].points.split()[0].split(",")[1])
    height = chart.bottom - chart.top
    assert chart.bottom - ack_y > 0.5 * height  # readable, not flattened
    linear = dashboard.line_chart("t", series, log=False)
    lin_y = float(linear.lines[1].points.split()[0].split(",")[1])
    assert linear.bottom - lin_y < 0.05 * height  # what a linear axis made of it
    x, y, text = chart.lines[1].samples[3]
    assert text == "03:00 UTC: acked 1,915" and (x, y) == tuple(
        chart.lines[1].points.split()[3].split(",")
    )


def test_job_page_lists_a_durable_tasks_steps(
    payload_viewer: Client, viewer: Client, project: dict[str, Any]
) -> None:
    from django_zqueue import durable
    from django_zqueue.exceptions import Parked
    from django_zqueue.tasks.context import JobContext, set_current_job

    q = get_queue("default")
    tag = q.publish({"task": "x"})
    msgs, _ = q.claim(1, "c")
    set_current_job(JobContext(msgs[0], q, "x"))
    try:
        durable.step("charge", lambda: {"id": "ch_1"})
        with pytest.raises(Parked):
            durable.sleep("cool-off", 3600)
    finally:
        set_current_job(None)
    html = payload_viewer.get(job_url(tag)).content.decode()
    assert 'id="zq-durable"' in html and "charge" in html and "ch_1" in html
    assert "cool-off" in html
    hidden = viewer.get(job_url(tag)).content.decode()
    assert "charge" in hidden and "ch_1" not in hidden  # a result is payload
