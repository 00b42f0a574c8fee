"""A chunk task's job page shows the other jobs of its handler call, linked
(``engine.chunkcalls``, ``queue.read.chunk_members``, the admin's job page): the call
that ran it last, so after a retry the retry's call."""

from __future__ import annotations

import pytest
import redis

from django_zqueue import get_queue
from django_zqueue.worker import Worker

from .test_admin import client_for, job_url, make_user, project  # noqa: F401
from .test_chunks import CALLS, FAIL_ONCE, doubled, picky

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("project")]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    FAIL_ONCE.clear()


def drain() -> None:
    Worker(["default"], burst=True, scan_interval=0.05, prefetch=20).run()


def test_each_member_names_its_latest_call_after_a_retry() -> None:
    FAIL_ONCE.update({2, 5})
    jobs = picky.enqueue_many([(i,) for i in range(10)])
    drain()
    assert CALLS[0] == list(range(10)) and sorted(CALLS[1]) == [2, 5]
    read = get_queue("default").read
    tags = [j.id for j in jobs]
    first = read.chunk_members(tags[0])
    assert first is not None and sorted(first) == sorted(tags)
    retried = read.chunk_members(tags[2])
    assert retried is not None and sorted(retried) == sorted([tags[2], tags[5]])
    plain = get_queue("default").publish("not a chunk task's job")
    assert read.chunk_members(plain) is None  # nothing recorded: no section


def test_the_job_page_links_the_other_members() -> None:
    jobs = doubled.enqueue_many([(i,) for i in range(3)])
    drain()
    viewer = client_for(make_user("viewer", "view_queue"))
    html = viewer.get(job_url(jobs[1].id)).content.decode()
    assert 'id="zq-chunk"' in html
    for other in (jobs[0].id, jobs[2].id):
        assert f'href="{job_url(other).replace("&", "&amp;")}"' in html
    assert f'<strong aria-current="page">{jobs[1].id}</strong>' in html
    plain = get_queue("default").publish("x")
    assert 'id="zq-chunk"' not in viewer.get(job_url(plain)).content.decode()


def test_a_bad_or_missing_record_reads_as_no_call(
    redis_client: redis.Redis,
) -> None:
    q = get_queue("default")
    k = q.engine._keys
    redis_client.set(k.chunk_of("a"), "not json")
    redis_client.set(k.chunk_of("b"), '["first", 7]')  # its call's key expired
    redis_client.set(k.chunk_of("c"), '["first", 8]')
    redis_client.set(k.chunk_call("8"), '{"no": "list"}')
    assert [q.read.chunk_members(t) for t in "abc"] == [None, None, None]
