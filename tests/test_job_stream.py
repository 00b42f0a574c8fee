"""Streamed output: ``current_job().stream(chunk)`` appends to a bounded per-job stream
with a TTL, ``Job.stream(after)`` reads it from a cursor, and ``stream/<token>/`` sends
it (with the job's position) as server-sent events that resume from ``Last-Event-ID``
with no gap and no duplicate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import Client, override_settings

from django_zqueue import current_job, get_queue, task
from django_zqueue.engine import jobstreams
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue
from django_zqueue.tasks import watch
from django_zqueue.tasks.job import Job
from django_zqueue.tasks.watch import make_token
from django_zqueue.worker import Worker

pytestmark = pytest.mark.django_db


@task(name="tests.jobstream.talk")
def talk(n: int) -> None:
    ctx = current_job()
    assert ctx is not None
    for i in range(n):
        ctx.stream(f"chunk {i};")


@task(name="tests.jobstream.atalk")
async def atalk(n: int) -> None:
    ctx = current_job()
    assert ctx is not None
    for i in range(n):
        await ctx.astream(f"a{i}")


@pytest.fixture
def default(zqueue_settings: dict[str, Any]) -> Iterator[Queue]:
    watch._watches.clear()  # a fresh shared poll per test (another prefix each time)
    # the test's transaction never commits: publish at once
    with override_settings(ZQUEUE={**zqueue_settings, "ENQUEUE_ON_COMMIT": False}):
        yield get_queue("default")
    watch._watches.clear()


def sse(client: Client, url: str, last: str | None = None) -> list[tuple[str | None, str, Any]]:
    """The events of one response: (id, event, data)."""
    headers = {"HTTP_LAST_EVENT_ID": last} if last else {}
    response = client.get(url, **headers)
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    body = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    out = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
    return out


def test_a_job_streaming_500_chunks_is_read_in_order_and_resumed(default: Queue) -> None:
    job = talk.enqueue(500)
    Worker(["default"], burst=True, scan_interval=0.05).run()
    url = f"/zqueue/stream/{make_token('default', job.id)}/"
    events = sse(Client(), url)
    chunks = [(i, d["text"]) for i, e, d in events if e == "chunk"]
    assert [t for _, t in chunks] == [f"chunk {i};" for i in range(500)]
    assert events[-1][1] == "end" and events[-1][2]["status"] == "done"
    assert any(e == "position" for _, e, _ in events)
    # a reconnect after chunk 250: the rest, no gap, no duplicate
    again = sse(Client(), url, last=chunks[249][0])
    assert [d["text"] for _, e, d in again if e == "chunk"] == [
        f"chunk {i};" for i in range(250, 500)
    ]
    # the same through Job.stream, a page at a time
    got, after = [], "0"
    while page := job.stream(after, limit=120):
        got += [c.text for c in page]
        after = page[-1].id
    assert got == [f"chunk {i};" for i in range(500)]


def test_an_async_task_streams_too(default: Queue) -> None:
    job = atalk.enqueue(3)
    Worker(["default"], burst=True, scan_interval=0.05, async_concurrency=2).run()
    assert [c.text for c in job.stream()] == ["a0", "a1", "a2"]


def test_a_cancelled_job_says_so_and_the_stream_ends(default: Queue) -> None:
    tag = default.publish({"task": "tests.jobstream.talk", "args": [1], "kwargs": {}})
    msg = default.get()
    assert msg is not None
    default.engine.jobstreams.append(tag, "partial")
    assert default.cancel(tag)
    events = sse(Client(), f"/zqueue/stream/{make_token('default', tag)}/")
    assert [d["text"] for _, e, d in events if e == "chunk"] == ["partial"]
    assert events[-1][1] == "end" and events[-1][2]["status"] == "cancelled"


def test_the_stream_is_bounded_and_expires(default: Queue, redis_client: redis.Redis) -> None:
    s = default.engine.jobstreams
    for i in range(30):
        s.append("t", str(i))
    (key,) = list(redis_client.scan_iter(match=f"{{{default.engine.prefix}:default}}:out:*"))
    assert 0 < redis_client.pttl(key) <= jobstreams.TTL_MS
    assert redis_client.xinfo_stream(key)["length"] == 30
    with pytest.raises(InvalidArgument):
        s.append("t", "x" * (jobstreams.MAX_CHUNK_BYTES + 1))
    with pytest.raises(InvalidArgument):
        s.append("t", "é" * (jobstreams.MAX_CHUNK_BYTES // 2 + 1))  # bytes, not characters
    for bad in ("", b"bytes", None):
        with pytest.raises(InvalidArgument):
            s.append("t", bad)  # type: ignore[arg-type]
    assert redis_client.xinfo_stream(key)["length"] == 30  # nothing written
    assert jobstreams.MAX_CHUNKS == 10_000  # the cap XADD's MAXLEN applies


def test_bad_cursors_and_tokens_are_refused(default: Queue, redis_client: redis.Redis) -> None:
    job = Job("x", "default")
    for bad in ("", "1", "a-b", "1-2-3", "-", "+", "(1-0", "9" * 30 + "-1"):
        with pytest.raises(InvalidArgument):
            job.stream(bad)
    with pytest.raises(InvalidArgument):
        job.stream("0", limit=0)
    token = make_token("default", "x")
    assert Client().get(f"/zqueue/stream/{token}/", HTTP_LAST_EVENT_ID="1-2-3").status_code == 400
    assert Client().get("/zqueue/stream/forged/").status_code == 404
    assert Client().get(f"/zqueue/stream/{make_token('nosuch', 'x')}/").status_code == 404
    assert Client().post(f"/zqueue/stream/{token}/").status_code == 405
    # a corrupt key reads as no stream
    redis_client.set(f"{{{default.engine.prefix}:default}}:out:x", "not a stream")
    assert job.stream() == []


def test_the_widget_shows_what_was_streamed_and_resumes_after_it(default: Queue) -> None:
    from django.contrib.auth.models import AnonymousUser
    from django.template import Context, Template
    from django.test import RequestFactory

    tag = default.publish({"task": "tests.jobstream.talk", "args": [1], "kwargs": {}})
    msg = default.get()
    assert msg is not None
    ids = [default.engine.jobstreams.append(tag, t) for t in ("Hello, ", "<world>")]
    request = RequestFactory().get("/")
    request.user = AnonymousUser()

    def render() -> str:
        watch._watches.clear()
        return Template("{% load zqueue %}{% zqueue_position job %}").render(
            Context({"job": Job(tag, "default"), "request": request})
        )

    html = render()
    assert "Hello, &lt;world&gt;</pre>" in html  # escaped
    assert f'data-zq-after="{ids[-1]}"' in html and 'data-zq-stream="/zqueue/stream/' in html
    assert 'http-equiv="refresh"' in html  # without JavaScript, it reloads while running
    stream_url = html.split('data-zq-stream="')[1].split('"')[0]
    assert default.ack(msg)
    events = sse(Client(), f"{stream_url}?after={ids[-1]}")
    assert [e for _, e, _ in events if e == "chunk"] == []  # nothing twice
    assert events[-1][1] == "end"
    assert 'http-equiv="refresh"' not in render()  # ended: no more reloads


def test_a_response_ends_after_its_window_and_the_next_resumes(
    default: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_zqueue.web import stream

    tag = default.publish({"task": "tests.jobstream.talk", "args": [1], "kwargs": {}})
    msg = default.get()
    assert msg is not None
    monkeypatch.setattr(stream, "WINDOW", 0.0)  # one look, then the response ends
    url = f"/zqueue/stream/{make_token('default', tag)}/"
    s = default.engine.jobstreams
    got: list[str] = []
    last = None
    for round_ in range(3):
        for i in range(4):
            s.append(tag, f"{round_}.{i}")
        events = sse(Client(), url, last=last)
        assert events[-1][1] != "end"  # still running: the window ended it
        chunks = [(i, d["text"]) for i, e, d in events if e == "chunk"]
        got += [t for _, t in chunks]
        last = chunks[-1][0]
    assert got == [f"{r}.{i}" for r in range(3) for i in range(4)]
