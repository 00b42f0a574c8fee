"""The queue page's "Waiting" tab: the jobs of workflows waiting for their parents (the
``wait`` set), oldest wait first, paginated like the other tabs, with how many parents
each needs and has seen succeed; "Cancel selected" on it; against a real Redis, on one
shard and on a partitioned queue."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.test import Client, override_settings
from redis.connection import AbstractConnection

from django_zqueue import conf, get_queue, read
from django_zqueue.admin import dashboard
from django_zqueue.admin.actions import ACTIONS
from django_zqueue.queue import Queue

from .conftest import QueueFactory, snapshot
from .test_admin import (  # noqa: F401
    BASE,
    client_for,
    make_user,
    project,
    superuser,
    viewer,
)

pytestmark = pytest.mark.django_db

WAITING = f"{BASE}q/default/?state=waiting"


def waiting_jobs(q: Queue, client: redis.Redis, n: int, parents: list[str]) -> list[str]:
    """``n`` jobs of ``q`` waiting for ``parents``, returned oldest wait first: their wait
    scores are rewritten to known, distinct times in an order that is neither their
    order of publication nor that of their tags."""
    tags = [
        q.publish(
            {"task": f"t.child{i}", "args": [], "kwargs": {}}, tag=f"w{i:03d}", depends_on=parents
        )
        for i in range(n)
    ]
    order = tags[1::2] + tags[0::2]  # odd ones first
    for i, tag in enumerate(order):
        assert client.zadd(q.engine._shard_for(tag).keys.wait, {tag: 1_000_000 + i}, xx=True) == 0
    return order


def ack(q: Queue, tag: str) -> None:
    """Claim and ack job ``tag`` and send its end to its dependents (a partitioned
    queue's claims go round its shards: a job claimed on the way is released)."""
    for _ in range(4 * q.partitions):
        msg = q.get()
        assert msg is not None
        if msg.tag == tag:
            assert q.ack(msg)
            q.dispatch([tag])
            return
        q.release(msg)
    raise AssertionError(f"{tag} never claimed")


def in_wait_sets(q: Queue, client: redis.Redis) -> set[str]:
    return {t.decode() for s in q.engine._shards for t in client.zrange(s.keys.wait, 0, -1)}


# ---------------------------------------------------------------- the read


@pytest.mark.parametrize("partitions", [1, 3], ids=["one-shard", "partitioned"])
def test_waiting_listing_pages_oldest_wait_first_with_parent_counts(
    make_queue: QueueFactory, redis_client: redis.Redis, partitions: int
) -> None:
    q = make_queue(partitions=partitions)
    p1, p2 = q.publish({"p": 1}, tag="p1"), q.publish({"p": 2}, tag="p2")
    both = waiting_jobs(q, redis_client, 5, [p1, p2])
    q.publish({"n": 0}, tag="later", delay=3600)
    assert len(in_wait_sets(q, redis_client)) == 5
    first = q.read.listing("waiting", 1, 2)
    assert [j.tag for j in first.jobs] == both[:2]
    assert first.counts == {"ready": 2, "delayed": 1, "leased": 0, "dead": 0, "waiting": 5}
    assert [j.score for j in first.jobs] == [1_000_000.0, 1_000_001.0]
    assert all(j.links is not None and (j.links.need, j.links.got) == (2, 0) for j in first.jobs)
    assert all(j.record is not None for j in first.jobs)
    assert first.max_pages == (None if partitions == 1 else read.MAX_MERGED // 2)
    pages = [q.read.listing("waiting", n, 2) for n in (1, 2, 3)]
    assert [j.tag for p in pages for j in p.jobs] == both
    past = q.read.listing("waiting", 99, 2)  # past the end: the last page
    assert past.number == 3 and [j.tag for j in past.jobs] == both[4:]
    # one parent succeeds: every job counts it, and stays (the other parent runs on)
    ack(q, "p1")
    rows = dashboard.page(q, "waiting", 1, 10, payload=False).rows
    assert [(r.tag, r.parents_text) for r in rows] == [(t, "1 of 2") for t in both]
    assert rows[0].wait_since is not None and rows[0].task == "t.child1"


@pytest.mark.parametrize("partitions", [1, 3], ids=["one-shard", "partitioned"])
def test_a_job_leaves_the_waiting_listing_when_its_parent_is_acked(
    make_queue: QueueFactory, redis_client: redis.Redis, partitions: int
) -> None:
    q = make_queue(partitions=partitions)
    parent = q.publish({"p": 1}, tag="parent")
    other = q.publish({"p": 2}, tag="other")
    mine = waiting_jobs(q, redis_client, 3, [parent])
    theirs = q.publish({"c": 1}, tag="theirs", depends_on=[other])
    listed = q.read.listing("waiting", 1, 50)
    assert {j.tag for j in listed.jobs} == {*mine, theirs} == in_wait_sets(q, redis_client)
    ack(q, "parent")
    listed = q.read.listing("waiting", 1, 50)
    assert [j.tag for j in listed.jobs] == [theirs] and listed.counts["waiting"] == 1
    assert listed.counts["ready"] == 1 + len(mine)


def test_the_waiting_page_reads_a_bounded_range(
    make_queue: QueueFactory, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page reads the range of its jobs only (never the whole set), and one HMGET of
    the links of each listed job (whatever its number of parents)."""
    q = make_queue(partitions=2)
    parent = q.publish({"p": 1}, tag="parent")
    waiting_jobs(q, redis_client, 30, [parent])
    q.read.listing("waiting", 1, 5)  # warm up
    sent: list[tuple[Any, ...]] = []
    pack = AbstractConnection.pack_commands

    def pack_commands(conn: Any, commands: Any) -> Any:
        commands = list(commands)
        sent.extend(tuple(c) for c in commands)
        return pack(conn, commands)

    monkeypatch.setattr(AbstractConnection, "pack_commands", pack_commands)
    listing = q.read.listing("waiting", 2, 5)
    monkeypatch.undo()
    assert len(listing.jobs) == 5
    ranges = [c for c in sent if c[0] == "ZRANGE"]
    assert len(ranges) == 2 and all(c[2:4] == (0, 9) for c in ranges), ranges
    wf = [c for c in sent if c[0] == "HMGET" and ":wf:" in str(c[1])]
    assert len(wf) == 5 and all(c[2:] == ("need", "got") for c in wf), wf


# ---------------------------------------------------------------- the admin tab


def test_waiting_tab_lists_exactly_the_waiting_jobs_paginated(
    viewer: Client,  # noqa: F811
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    q = get_queue("default")
    parent = q.publish({"task": "t.parent", "args": [], "kwargs": {}}, tag="parent")
    q.publish({"task": "t.later", "args": [], "kwargs": {}}, tag="later", delay=600)
    order = waiting_jobs(q, redis_client, 60, [parent])
    r = viewer.get(WAITING)
    assert r.status_code == 200
    page = r.context["page"]
    assert page.state == "waiting" and page.total == 60 and page.pages == 2
    assert [row.tag for row in page.rows] == order[:50]
    assert {row.tag for row in page.rows} <= in_wait_sets(q, redis_client)
    html = r.content.decode()
    assert "1\N{EN DASH}50 of 60 waiting jobs" in html
    tab = next(t for t in r.context["tabs"] if t["state"] == "waiting")
    assert tab["current"] and tab["count"] == 60 and tab["label"] == "waiting"
    assert 'class="current" aria-current="page">Waiting <span class="zq-badge">60</span>' in html
    first = page.rows[0]
    assert first.task == "t.child1" and first.parents_text == "0 of 1"
    assert f'href="{BASE}q/default/job/?id={first.tag}"' in html
    assert '<th scope="col">Waiting since</th>' in html and ">0 of 1</td>" in html
    r = viewer.get(f"{WAITING}&page=2")
    assert [row.tag for row in r.context["page"].rows] == order[50:]
    assert "51\N{EN DASH}60 of 60 waiting jobs" in r.content.decode()
    small = viewer.get(f"{WAITING}&per_page=25&page=3").context["page"]
    assert small.per_page == 25 and [row.tag for row in small.rows] == order[50:]
    # every waiting job is listed once over the pages, and nothing else is
    listed = [
        row.tag for n in (1, 2) for row in viewer.get(f"{WAITING}&page={n}").context["page"].rows
    ]
    assert sorted(listed) == sorted(in_wait_sets(q, redis_client)) and len(listed) == 60
    # the overview's "+N waiting" links here
    assert f'href="{BASE}q/default/?state=waiting"' in viewer.get(BASE).content.decode()


def test_waiting_tab_page_numbers_like_the_other_tabs(
    viewer: Client,  # noqa: F811
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    """As on every tab: past the end is the last page, junk is page 1, a huge number is
    clamped, an unknown page size is the default; an unknown queue is a 404."""
    q = get_queue("default")
    waiting_jobs(q, redis_client, 30, [q.publish("x", tag="parent")])
    for state in ("ready", "waiting"):
        base = f"{BASE}q/default/?state={state}&per_page=25"
        assert viewer.get(f"{base}&page=99").context["page"].number == (
            2 if state == "waiting" else 1
        )
        assert viewer.get(f"{base}&page=x").context["page"].number == 1
        assert viewer.get(f"{base}&page=-3").context["page"].number == 1
        assert viewer.get(f"{base}&page=99999999999999999999999").status_code == 200
        assert (
            viewer.get(f"{BASE}q/default/?state={state}&per_page=7").context["page"].per_page == 50
        )
    assert viewer.get(f"{BASE}q/nosuchqueue/?state=waiting").status_code == 404


def test_empty_waiting_tab_renders(
    viewer: Client,  # noqa: F811
    project: dict[str, Any],  # noqa: F811
) -> None:
    get_queue("default").publish("x")
    r = viewer.get(WAITING)
    assert r.status_code == 200 and r.context["page"].rows == []
    html = r.content.decode()
    assert "No job waiting for its parents." in html and "0 waiting jobs" in html


def test_waiting_tab_is_refused_without_staff_or_view_permission(
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    q = get_queue("default")
    waiting_jobs(q, redis_client, 2, [q.publish("x", tag="parent")])
    r = client_for(make_user("outsider", "view_queue", "manage_jobs", staff=False)).get(WAITING)
    assert r.status_code == 302 and r["Location"].startswith("/admin/login/")
    r = client_for(None).get(WAITING)
    assert r.status_code == 302 and r["Location"].startswith("/admin/login/")
    assert client_for(make_user("staff")).get(WAITING).status_code == 403
    page = client_for(make_user("looker", "view_queue")).get(WAITING).context["page"]
    assert page.state == "waiting" and len(page.rows) == 2


def test_cancel_is_offered_on_the_waiting_tab_and_cancels(
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    q = get_queue("default")
    order = waiting_jobs(q, redis_client, 3, [q.publish("x", tag="parent")])
    assert "waiting" in ACTIONS["cancel"].states
    looker = client_for(make_user("looker", "view_queue"))
    assert "Cancel selected" not in looker.get(WAITING).content.decode()
    boss = client_for(make_user("boss", "view_queue", "manage_jobs"))
    html = boss.get(WAITING).content.decode()
    assert "Cancel selected" in html and f'name="tags" value="{order[0]}"' in html
    assert "Run selected now" not in html and "Set priority" not in html
    url = f"{BASE}q/default/do/cancel/"
    assert looker.post(url, {"tags": [order[0]], "confirm": "yes"}).status_code == 403
    asked = boss.post(url, {"tags": [order[0]]})
    assert asked.status_code == 200 and q.state(order[0]) == "waiting"  # asks first
    r = boss.post(url, {"tags": [order[0], "nope"], "confirm": "yes", "next": WAITING})
    assert r.status_code == 302 and r["Location"] == WAITING
    cancelled = q.cancelled(order[0])
    assert cancelled is not None and cancelled.was == "waiting"
    assert [row.tag for row in boss.get(WAITING).context["page"].rows] == order[1:]
    with override_settings(ZQUEUE={**project, "ADMIN_ACTIONS": False}):
        conf.reset()
        assert "Cancel selected" not in boss.get(WAITING).content.decode()
    conf.reset()


def test_waiting_tab_get_writes_nothing(
    superuser: Client,  # noqa: F811
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
    prefix: str,
) -> None:
    q = get_queue("default")
    order = waiting_jobs(q, redis_client, 3, [q.publish("x", tag="parent")])
    before = snapshot(redis_client, prefix)
    for url in (
        WAITING,
        f"{WAITING}&page=9",
        f"{WAITING}&task=child",
        f"{BASE}q/default/do/cancel/",
    ):
        superuser.get(url)
    superuser.get(f"{BASE}q/default/job/", {"id": order[0]})
    assert snapshot(redis_client, prefix) == before
    # the pages read were the waiting tab's (with its filter and its buttons)
    r = superuser.get(f"{WAITING}&task=child")
    assert [row.tag for row in r.context["page"].rows] == order
    assert "Cancel selected" in r.content.decode()
    assert snapshot(redis_client, prefix) == before


def test_waiting_tab_of_a_partitioned_queue(
    viewer: Client,  # noqa: F811
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    with override_settings(ZQUEUE={**project, "QUEUES": {"default": {"partitions": 3}}}):
        conf.reset()
        q = get_queue("default")
        assert q.partitions == 3
        order = waiting_jobs(q, redis_client, 12, [q.publish("x", tag="parent")])
        assert len({q.engine._shard_for(t).index for t in order}) == 3
        pages = [viewer.get(f"{WAITING}&per_page=25&page={n}").context["page"] for n in (1, 2)]
        assert pages[0].total == 12 and pages[1].number == 1
        assert [row.tag for row in pages[0].rows] == order
        assert pages[0].max_pages == read.MAX_MERGED // 25
    conf.reset()


def test_job_page_of_a_waiting_job_links_to_the_waiting_tab(
    viewer: Client,  # noqa: F811
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    q = get_queue("default")
    (tag,) = waiting_jobs(q, redis_client, 1, [q.publish("x", tag="parent")])
    r = viewer.get(f"{BASE}q/default/job/", {"id": tag})
    assert r.status_code == 200 and r.context["state_url"] == WAITING
    rows = viewer.get(r.context["state_url"]).context["page"].rows
    assert [row.tag for row in rows] == [tag]
