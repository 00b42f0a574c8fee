"""A job's position for the person waiting on it: tokens, the JSON/long-poll view, the
shared poll, the template tag, and ``positions.lua`` (against the real Redis)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.core import signing
from django.template import Context, Template
from django.test import Client, RequestFactory

from django_zqueue import get_queue
from django_zqueue.engine.scripts import MAX_POSITIONS
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue
from django_zqueue.tasks import watch
from django_zqueue.tasks.task import Job
from django_zqueue.web import position

pytestmark = pytest.mark.django_db


@pytest.fixture
def default(zqueue_settings: dict[str, Any]) -> Iterator[Queue]:
    watch._watches.clear()  # a fresh shared poll per test (another prefix each time)
    yield get_queue("default")
    watch._watches.clear()


def line(q: Queue, n: int) -> list[str]:
    return [q.publish({"task": "secret.task", "args": [f"payload-{i}"]}) for i in range(n)]


def get(client: Client, url: str, **query: str) -> tuple[int, dict[str, Any]]:
    response = client.get(url, query)
    assert response["Cache-Control"].startswith("max-age=0")
    return response.status_code, json.loads(response.content)


# ---------------------------------------------------------------- the view


def test_position_counts_down_as_jobs_ahead_leave(default: Queue) -> None:
    tags = line(default, 5)
    url = Job(id=tags[3], queue_name="default").position_url()
    assert url.startswith("/zqueue/position/") and tags[3] not in url
    c = Client()
    status, body = get(c, url)
    assert status == 200
    assert (body["status"], body["rank"], body["ahead"]) == ("waiting", 3, 3)
    assert body["text"] == "3 jobs ahead of yours."
    assert body["eta_seconds"] is None  # nothing has run yet, and no worker is live
    first = body["version"]
    msgs, _ = default.claim(2)
    for m in msgs:
        default.ack(m)
    watch._watches.clear()  # no waiting for the next poll interval
    status, body = get(c, url)
    assert (body["rank"], body["text"]) == (1, "1 job ahead of yours.")
    assert body["version"] != first
    msgs, _ = default.claim(2)
    watch._watches.clear()
    assert get(c, url)[1]["status"] == "running"
    default.nack(msgs[1], "ValueError: card 4242 4242 declined", dead=True)
    watch._watches.clear()
    status, body = get(c, url)
    assert (body["status"], body["rank"], body["text"]) == (
        "failed",
        None,
        "It could not be completed.",
    )
    raw = json.dumps(body)
    assert "declined" not in raw and "payload" not in raw and "secret.task" not in raw


def test_done_and_scheduled(default: Queue) -> None:
    later = default.publish("x", delay=3600)
    gone = default.publish("y")
    default.delete(gone)
    c = Client()
    assert get(c, Job(id=later, queue_name="default").position_url())[1]["status"] == "scheduled"
    body = get(c, Job(id=gone, queue_name="default").position_url())[1]
    assert body["status"] == "gone"  # deleted: never ran, so not "Done."
    assert body["text"] == "It is no longer in the queue: it ended, or was removed."


def test_eta_only_while_a_worker_is_live(default: Queue) -> None:
    tags = line(default, 3)
    default.engine._client.hset(default.engine._keys.stats, mapping={"acked": 10, "run_ms": 20_000})
    pos = watch.read_positions(default, [tags[2]])[tags[2]]
    assert pos.eta_seconds is None  # no live worker: no ETA
    seen = int(time.time() * 1000)
    default.engine._client.hset(
        default.engine._keys.workers, "h:1:a", json.dumps({"threads": 2, "seen": seen})
    )
    pos = watch.read_positions(default, [tags[2]])[tags[2]]
    assert pos.eta_seconds == pytest.approx(3 * 2.0 / 2)


def test_a_cancelled_job_says_so_not_done(default: Queue) -> None:
    waiting, running, finished = line(default, 3)
    c = Client()
    urls = {t: Job(id=t, queue_name="default").position_url() for t in (waiting, running)}
    msgs, _ = default.claim(3)
    default.release(msgs[0])
    default.ack(msgs[2])
    assert default.cancel(waiting) and default.cancel(running)
    body = get(c, urls[waiting])[1]
    assert (body["status"], body["text"]) == ("cancelled", "Cancelled: it will not run.")
    assert get(c, urls[running])[1]["status"] == "cancelled"
    assert get(c, Job(id=finished, queue_name="default").position_url())[1]["text"] == "Done."


def test_expired_has_its_own_words() -> None:
    pos = watch.Position("expired", None, None, 0.0)
    assert position.describe(pos) == ("Expired: it was not run in time, and will not run.", "")
    assert "expired" in watch.FINAL and "cancelled" in watch.FINAL


def test_a_running_job_shows_its_progress(default: Queue) -> None:
    (tag,) = line(default, 1)
    url = Job(id=tag, queue_name="default").position_url()
    msg = default.claim(1)[0][0]
    c = Client()
    body = get(c, url)[1]
    assert (body["status"], body["progress"], body["text"]) == ("running", None, "Running now.")
    default.touch(msg, progress=0.42)
    watch._watches.clear()
    moved = get(c, url)[1]
    assert (moved["progress"], moved["text"]) == (42, "Running now: 42% done.")
    assert moved["version"] != body["version"]  # a long-poll wakes on progress
    default.touch(msg, progress=0.9, note="uploading")
    watch._watches.clear()
    assert get(c, url)[1]["text"] == "Running now: 90% done (uploading)."
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    html = Template("{% load zqueue %}{% zqueue_position job %}").render(
        Context({"job": Job(id=tag, queue_name="default"), "request": request})
    )
    assert 'value="90"' in html and "90% done (uploading)" in html


# ---------------------------------------------------------------- security


def test_bad_forged_expired_and_other_users_tokens_all_answer_the_same_404(
    default: Queue,
) -> None:
    (tag,) = line(default, 1)
    alice = User.objects.create_user("alice", password="pw")
    bob = User.objects.create_user("bob", password="pw")
    good = watch.make_token("default", tag, user=alice)
    forged_key = signing.dumps(
        {"q": "default", "j": tag, "x": int(time.time()) + 99},
        key="not-the-secret",
        salt=watch.SALT,
    )
    expired = signing.dumps({"q": "default", "j": tag, "x": int(time.time()) - 1}, salt=watch.SALT)
    other_salt = signing.dumps({"q": "default", "j": tag, "x": int(time.time()) + 99})
    body, sig = good.rsplit(":", 1)
    tampered = body.replace(body[2], "A" if body[2] != "A" else "B", 1) + ":" + sig
    unknown_queue = watch.make_token("nope", tag)
    bad = [
        "garbage",
        tag,  # a bare id
        "x" * 5000,
        forged_key,
        expired,
        other_salt,
        tampered,
        unknown_queue,
        signing.dumps(["default", tag], salt=watch.SALT),  # signed, but not our shape
    ]
    anonymous, as_bob, as_alice = Client(), Client(), Client()
    as_bob.force_login(bob)
    as_alice.force_login(alice)
    answers = {
        (r.status_code, r.content)
        for c in (anonymous, as_bob)
        for token in [*bad, good]
        for r in [c.get(f"/zqueue/position/{token}/")]
    }
    assert answers == {(404, b'{"status": "unknown", "text": "This position is not available."}')}
    status, found = get(as_alice, f"/zqueue/position/{good}/")
    assert (status, found["rank"]) == (200, 0)
    assert Client().post(f"/zqueue/position/{good}/").status_code == 405


def test_token_lifetime_is_bounded() -> None:
    with pytest.raises(InvalidArgument):
        watch.make_token("default", "t", max_age=0)
    token = watch.make_token("default", "t", max_age=60)
    assert watch.read_token(token) == watch.Target("default", "t", None)


# ---------------------------------------------------------------- the shared poll


def test_one_read_serves_every_watched_job(default: Queue) -> None:
    tags = line(default, 1200)  # more than one positions call (500 per call)
    w = watch.watch_of("default")
    for t in tags:
        w.watchers[t] = 1  # 1,200 watchers already waiting
    pos = w.wait(tags[-1])
    assert pos.rank == 1199
    assert w.reads == 1 and len(w.current) == 1200
    assert [w.wait(t).rank for t in tags[:3]] == [0, 1, 2]
    assert w.reads == 1  # answered from the shared read


def test_concurrent_watchers_share_reads(default: Queue) -> None:
    tags = line(default, 40)
    w = watch.watch_of("default")
    barrier = threading.Barrier(40)
    got: dict[str, int | None] = {}

    def watcher(t: str) -> None:
        barrier.wait()
        got[t] = w.wait(t).rank

    threads = [threading.Thread(target=watcher, args=(t,)) for t in tags]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert got == {t: i for i, t in enumerate(tags)}
    assert w.reads < 40


def test_long_poll_answers_on_change_or_timeout(default: Queue) -> None:
    tags = line(default, 3)
    w = watch.watch_of("default")
    now = w.wait(tags[2])
    assert w.wait(tags[2], now.version, timeout=0.2).version == now.version  # no change
    claimer = threading.Timer(0.2, lambda: default.claim(1))
    claimer.start()
    changed = w.wait(tags[2], now.version, timeout=30)
    claimer.join()
    assert changed.rank == 1


def test_long_poll_through_the_view(default: Queue) -> None:
    tags = line(default, 2)
    url = Job(id=tags[1], queue_name="default").position_url()
    first = get(Client(), url)[1]
    threading.Timer(0.2, lambda: default.claim(1)).start()
    status, body = get(Client(), url, after=first["version"])
    assert (status, body["rank"]) == (200, 0)


# ---------------------------------------------------------------- template tag


def test_template_tag_renders_an_accessible_widget_bound_to_the_user(default: Queue) -> None:
    tags = line(default, 3)
    user = User.objects.create_user("carol", password="pw")
    request = RequestFactory().get("/")
    request.user = user
    html = Template("{% load zqueue %}{% zqueue_position job %}").render(
        Context({"job": Job(id=tags[2], queue_name="default"), "request": request})
    )
    assert 'role="status"' in html and 'aria-live="polite"' in html
    assert 'data-zq-ahead="2"' in html and "2 jobs ahead of yours." in html
    assert "position.js" in html and "payload" not in html
    noscript = html.split("<noscript>")[1].split("</noscript>")[0]
    assert 'http-equiv="refresh" content="10"' in noscript and "reloads itself" in noscript
    assert "<progress" in html and " hidden" in html  # no progress while waiting
    token = html.split('data-zq-position="/zqueue/position/')[1].split("/")[0]
    target = watch.read_token(token)
    assert target == watch.Target("default", tags[2], str(user.pk))


def test_demo_page_enqueues_and_shows_the_widget(
    default: Queue, django_capture_on_commit_callbacks: Any
) -> None:
    c = Client()
    assert "data-zq-position" not in c.get("/demo/wait/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = c.post("/demo/wait/", follow=True)
    assert "data-zq-position" in response.content.decode()
    assert default.counts()["ready"] == 1


# ---------------------------------------------------------------- positions.lua


def test_positions_script_reports_every_state(default: Queue) -> None:
    a, b, c, d = line(default, 4)
    later = default.publish("x", delay=3600)
    default.claim(1)  # a: leased
    msgs, _ = default.claim(1)
    default.nack(msgs[0], "boom", dead=True)  # b: dead
    got = default.engine.run(default.engine._shards[0].positions([d, c, later, a, b, "missing"]))
    assert [(s.tag, s.state, s.rank) for s in got] == [
        (d, "ready", 1),
        (c, "ready", 0),
        (later, "delayed", None),
        (a, "leased", None),
        (b, "dead", None),
        ("missing", "", None),
    ]
    assert got[0].score == default.score(d)
    for n in (0, MAX_POSITIONS + 1):
        with pytest.raises(InvalidArgument):
            default.engine._shards[0].positions(["t"] * n)


def test_global_rank_on_a_partitioned_queue(make_queue: Any) -> None:
    q = make_queue("parts", partitions=3)
    tags = [q.publish(i, priority=i % 3) for i in range(30)]
    got = watch.read_positions(q, tags)
    assert {t: p.rank for t, p in got.items()} == {t: q.rank(t) for t in tags}
