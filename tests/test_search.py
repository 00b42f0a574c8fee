"""Finding jobs by their arguments (``queue.read.search``, ``search.lua``) on the real
Redis: at the front and deep in a queue, paged by cursor, in either record layout, over
partitions, literally, within its bounds; and the admin's page for it."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.test import Client

from django_zqueue import get_queue
from django_zqueue.engine.scripts import source
from django_zqueue.exceptions import InvalidArgument, ZQueueError
from django_zqueue.queue import Queue
from django_zqueue.read.search import STEP, SearchResult

from .conftest import QueueFactory, snapshot
from .records_util import to_json_layout
from .test_admin import BASE, client_for, make_user, payload_viewer, project, viewer  # noqa: F401


def fill(q: Queue, n: int, start: int = 0) -> list[str]:
    """``n`` small jobs of task ``t.add``, arguments ``[i, "n<i>"]``, in chunks."""
    tags: list[str] = []
    for lo in range(start, start + n, 1000):
        hi = min(lo + 1000, start + n)
        tags += q.publish_many([{"task": "t.add", "args": [i, f"n{i}"]} for i in range(lo, hi)])
    return tags


def walk(q: Queue, text: str, state: str = "ready", limit: int = 50) -> list[Any]:
    """Every match of a search, page by page with the cursor."""
    found: list[Any] = []
    cursor = None
    for _ in range(1000):
        r = q.read.search(text, state, limit, cursor)
        found += r.matches
        if r.done:
            assert r.cursor is None
            return found
        cursor = r.cursor
    raise AssertionError("search never ended")


def test_found_at_rank_0_and_deep_in_the_queue(q: Queue) -> None:
    tags = fill(q, 5000)
    q.publish({"task": "t.mail", "args": ["last@example.com"]}, priority=-1)  # the last
    r = q.read.search('"n0"')
    assert [(m.tag, m.rank) for m in r.matches] == [(tags[0], 0)] and r.done
    r = q.read.search('"n4900"')
    assert [(m.tag, m.rank, m.state, m.shard) for m in r.matches] == [
        (tags[4900], 4900, "ready", 0)
    ]
    assert r.done and r.looked == 5001 and r.steps == 6
    assert q.rank(tags[4900]) == 4900
    # the task name and the tag match too
    assert [m.tag for m in q.read.search("t.mail").matches] == [q.read.page("ready", 5000, 1)[0][0]]
    assert [m.tag for m in q.read.search(tags[17]).matches] == [tags[17]]


def test_a_small_step_budget_returns_a_cursor_that_goes_on(q: Queue) -> None:
    tags = fill(q, 3500)
    from django_zqueue.read.search import search

    r = search(q.engine, '"n3400"', max_steps=2)
    assert r.matches == [] and not r.done and r.looked == 2 * STEP and r.cursor
    r = search(q.engine, '"n3400"', cursor=r.cursor, max_steps=2)
    assert [(m.tag, m.rank) for m in r.matches] == [(tags[3400], 3400)] and r.done
    r = search(q.engine, '"n3400"', budget_s=0)  # the time budget: one step, then the cursor
    assert r.steps == 1 and r.looked == STEP and not r.done


def test_several_matches_paged_by_cursor_none_skipped_or_repeated(q: Queue) -> None:
    tags = fill(q, 2500)
    want = [tags[i] for i in range(2500) if i % 10 == 7]
    got = walk(q, '"n', limit=7)  # every job, 7 a page
    assert [m.tag for m in got] == tags
    assert [m.rank for m in got] == list(range(2500))
    seen: list[str] = []
    taken: set[str] = set()
    cursor = None
    while True:  # jobs taken from the front between pages make it skip none still there
        r = q.read.search('"n', limit=13, cursor=cursor)
        seen += [m.tag for m in r.matches]
        taken |= {m.tag for m in q.claim(5)[0]}
        if r.done:
            break
        cursor = r.cursor
    assert len(seen) == len(set(seen))  # none twice
    assert set(tags) - taken <= set(seen)  # none still ready left out
    assert seen == [t for t in tags if t in set(seen)]  # in order
    assert [m.tag for m in walk(q, '7"]')] == [t for t in want if t not in taken]


def test_a_json_layout_job_is_found(q: Queue, redis_client: redis.Redis) -> None:
    fill(q, 10)
    old = q.publish({"task": "t.old", "args": ["legacy-arg"]})
    fill(q, 10, 10)
    to_json_layout(redis_client, q.engine._keys, old)
    assert redis_client.hget(q.engine._keys.meta, old).startswith(b"{")  # type: ignore[union-attr]
    r = q.read.search("legacy-arg")
    assert [(m.tag, m.rank) for m in r.matches] == [(old, 10)]
    assert [m.tag for m in q.read.search("t.old").matches] == [old]


def test_partitions_are_walked_one_after_another(make_queue: QueueFactory) -> None:
    q = make_queue("parts", partitions=3)
    tags = fill(q, 600)
    got = walk(q, "t.add", limit=100)
    assert sorted(m.tag for m in got) == sorted(tags)
    shards = [m.shard for m in got]
    assert shards == sorted(shards) and set(shards) == {0, 1, 2}
    for m in got[:5]:
        assert q.engine._shard_for(m.tag).index == m.shard
    r = q.read.search('"n599"')
    assert [m.tag for m in r.matches] == [tags[599]] and r.done


def test_every_state(q: Queue) -> None:
    a = q.publish({"args": ["needle-ready"]})
    d = q.publish({"args": ["needle-delayed"]}, delay=600)
    held = q.publish({"args": ["needle-leased"]})
    dead = q.publish({"args": ["needle-dead"]})
    waiting = q.publish({"args": ["needle-waiting"]}, depends_on=[a])
    msgs = q.claim(10)[0]
    for m in msgs:
        if m.tag == dead:
            q.nack(m, "boom", dead=True)
        elif m.tag != held:
            q.release(m)
    for state, tag in [
        ("ready", a),
        ("delayed", d),
        ("leased", held),
        ("inflight", held),
        ("dead", dead),
        ("waiting", waiting),
    ]:
        assert [m.tag for m in q.read.search("needle", state).matches] == [tag], state


def test_no_match_and_literal_text(q: Queue) -> None:
    odd = q.publish({"args": ["100%.[x]"]})
    fill(q, 50)
    r = q.read.search("nothing-like-it")
    assert r == SearchResult([], None, True, 51, 1)
    for text in ("%.", ".[", "[x]", "%", "0%.[x"):
        assert [m.tag for m in q.read.search(text).matches] == [odd], text
    assert q.read.search('"n.').matches == []  # '.' is no wildcard
    assert q.read.search('"N1').matches == []  # case-sensitive
    assert q.read.search("é").matches == []
    uni = q.publish({"args": ["café"]})
    assert [m.tag for m in q.read.search("café").matches] == [uni]
    colons = [q.publish({"args": ["colon"]}, tag=f"a:b:{i}") for i in range(3)]
    assert [m.tag for m in walk(q, "colon", limit=1)] == colons  # a cursor holds the id whole


def test_bad_arguments_are_refused(q: Queue) -> None:
    fill(q, 3)
    for call in (
        lambda: q.read.search(""),
        lambda: q.read.search("x" * 1001),
        lambda: q.read.search("x", limit=0),
        lambda: q.read.search("x", limit=1001),
        lambda: q.read.search("x", state="gone"),
        lambda: q.read.search("x", cursor="9"),
        lambda: q.read.search("x", cursor="0:nan:a"),
        lambda: q.read.search("x", cursor="zz"),
    ):
        with pytest.raises(InvalidArgument):
            call()


@pytest.mark.parametrize(
    "args",
    [
        ("", "", "", 10, 10),  # empty text
        ("x" * 1001, "", "", 10, 10),
        ("x", "", "", 0, 10),  # steps
        ("x", "", "", 1001, 10),
        ("x", "", "", 1.5, 10),
        ("x", "", "", 10, 0),  # limit
        ("x", "", "", 10, 1001),
        ("x", "nan", "a", 10, 10),  # cursor
        ("x", "abc", "a", 10, 10),
    ],
)
def test_the_script_refuses_its_bounds_writing_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str, args: tuple[Any, ...]
) -> None:
    fill(q, 3)
    before = snapshot(redis_client, prefix)
    keys = (q.engine._keys.ready, q.engine._keys.meta, q.engine._keys.body)
    with pytest.raises(redis.ResponseError, match="ZQ_BAD_ARGUMENT"):
        redis_client.eval(source("search"), 3, *keys, *args)
    assert snapshot(redis_client, prefix) == before
    step = q.engine._shards[0].search("ready", b"x", None, 1000, 10)
    with pytest.raises(ZQueueError):
        q.engine.run(step._replace(args=(b"", *step.args[1:])))  # type: ignore[attr-defined]


def test_the_script_stops_at_limit_with_the_match_as_cursor(q: Queue) -> None:
    tags = fill(q, 30)
    s = q.engine._shards[0]
    step = q.engine.run(s.search("ready", b"t.add", None, 1000, 4))
    assert [t for t, _, _ in step.matches] == tags[:4] and step.more and step.looked == 4
    assert step.last is not None and step.last[1] == tags[3]
    step = q.engine.run(s.search("ready", b"t.add", step.last, 1000, 1000))
    assert [r for _, _, r in step.matches] == list(range(4, 30)) and not step.more


# ---------------------------------------------------------------- the admin


@pytest.mark.django_db
def test_admin_search_needs_view_payload_and_lists_the_job(
    project: dict[str, Any],  # noqa: F811
    viewer: Client,  # noqa: F811
    payload_viewer: Client,  # noqa: F811
    redis_client: redis.Redis,
    prefix: str,
) -> None:
    q = get_queue("default")
    tags = fill(q, 1500)
    url = f"{BASE}q/default/find/"
    r = viewer.get(url, {"text": '"n1400"'})
    assert r.status_code == 403 and "view_payload" in r.content.decode()
    assert 'name="text"' not in viewer.get(f"{BASE}q/default/").content.decode()
    assert 'name="text"' in payload_viewer.get(f"{BASE}q/default/").content.decode()
    before = snapshot(redis_client, prefix)
    r = payload_viewer.get(url, {"text": '"n1400"', "state": "ready"})
    assert r.status_code == 200
    html = r.content.decode()
    assert tags[1400] in html and "1,400" in html
    assert [row["m"].tag for row in r.context["rows"]] == [tags[1400]]
    assert r.context["next_url"] is None
    # paged: 50 a page, the cursor in the next link
    r = payload_viewer.get(url, {"text": "t.add"})
    assert len(r.context["rows"]) == 50 and r.context["next_url"]
    r2 = payload_viewer.get(r.context["next_url"])
    assert [row["m"].rank for row in r2.context["rows"]] == list(range(50, 100))
    # nothing found, a bad cursor, an unknown queue
    r = payload_viewer.get(url, {"text": "no-such-text"})
    assert r.status_code == 200 and "No job of this state" in r.content.decode()
    r = payload_viewer.get(url, {"text": "x", "cursor": "zz"})
    assert r.status_code == 200 and "not a search cursor" in r.content.decode()
    assert payload_viewer.get(f"{BASE}q/nosuch/find/", {"text": "x"}).status_code == 404
    assert snapshot(redis_client, prefix) == before
    assert client_for(make_user("nobody")).get(url).status_code == 403
