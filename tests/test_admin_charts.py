"""Charts that never lie: a minute with no depth sample is a gap (never a zero), and the
depth is sampled from what the queue holds (the first publish of a minute samples it,
not only a worker's scan), against a real Redis; the admin pages through Django's test client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings

from django_zqueue import conf, get_queue, read
from django_zqueue.admin import dashboard
from django_zqueue.queue import Queue

from .conftest import QueueFactory
from .redis_server import redis_url

BASE = "/admin/django_zqueue/queue/"


def redis_minute(client: redis.Redis) -> int:
    secs, _ = client.time()
    return int(secs) // 60


def ring(q: Queue, client: redis.Redis) -> dict[str, int]:
    return read.decode_stats(client.hgetall(q.engine._keys.stats))


def test_publish_samples_the_depth_with_no_worker(q: Queue, redis_client: redis.Redis) -> None:
    q.publish_many(range(5))
    q.publish("later", delay=600)  # delayed: not in the ready depth
    minute = redis_minute(redis_client)
    fields = ring(q, redis_client)
    if fields[f"m{minute % 64}"] != minute:  # the minute turned between the two
        pytest.skip("the minute turned")
    assert fields[f"r{minute % 64}"] == 5 == q.counts()["ready"]


def test_a_reused_slot_drops_its_old_depth(q: Queue, redis_client: redis.Redis) -> None:
    """A slot still holding a minute 64 minutes old: an ack (no depth read) resets its
    counters and leaves no depth, not the old one and not 0."""
    q.publish_many(range(3))
    (msg,), _ = q.claim(1, consumer="host:1:w")
    minute = redis_minute(redis_client)
    slot = minute % 64
    key = q.engine._keys.stats
    redis_client.hset(key, mapping={f"m{slot}": minute - 64, f"r{slot}": 0, f"a{slot}": 9})
    q.ack(msg, None, 60)
    fields = ring(q, redis_client)
    if fields[f"m{slot}"] != minute:
        pytest.skip("the minute turned")
    assert f"r{slot}" not in fields and fields[f"a{slot}"] == 1
    (f,) = read.overview([q.engine])
    assert f.minutes(1)[-1].ready == 2  # the current minute: the live count


def test_a_publish_only_minute_keeps_the_real_depth(q: Queue, redis_client: redis.Redis) -> None:
    """The defect: a minute with publishes and no scan had its depth written 0."""
    q.publish_many(range(40))
    minute = redis_minute(redis_client)
    slot = minute % 64
    redis_client.hset(q.engine._keys.stats, mapping={f"m{slot}": minute - 64, f"r{slot}": 0})
    q.publish("one more")
    fields = ring(q, redis_client)
    if fields[f"m{slot}"] != minute:
        pytest.skip("the minute turned")
    assert fields[f"r{slot}"] == 41 and fields[f"e{slot}"] == 1


def test_partitions_sum_a_depth_only_when_every_shard_sampled_it() -> None:
    minute = 29_000_000
    slot = minute % 64
    a = {f"m{slot}": minute, f"e{slot}": 2, f"r{slot}": 5}
    b = {f"m{slot}": minute, f"e{slot}": 1}  # published nothing to ready: no sample
    merged = read.merge_stats([a, b])
    assert merged[f"e{slot}"] == 3 and f"r{slot}" not in merged
    assert read.minutes(merged, minute * 60_000, 1)[0].ready == -1
    b[f"r{slot}"] = 7
    assert read.merge_stats([a, b])[f"r{slot}"] == 12
    stale = {f"m{slot}": minute - 64, f"r{slot}": 100}  # another minute's sample: not summed
    assert f"r{slot}" not in read.merge_stats([a, stale])


def test_partitioned_queue_with_no_worker(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue("p", partitions=2)
    q.publish_many(range(20))  # spread over both shards by tag: each samples its depth
    minute = redis_minute(redis_client)
    (f,) = read.overview([q.engine])
    if f.now_ms // 60_000 != minute:
        pytest.skip("the minute turned")
    assert f.ready == 20 and f.stats[f"r{minute % 64}"] == 20


def test_a_gap_breaks_the_line_never_drawn_as_zero() -> None:
    chart = dashboard.line_chart("t", [("a", "ready", [4, None, None, 8, 6, None, 2])], dots=True)
    (line,) = chart.lines
    assert len(line.segments) == 3 and len(line.dots) == 4
    assert [len(s.split()) for s in line.segments] == [1, 2, 1]
    bottom = f"{chart.bottom:.1f}"
    assert all(y != bottom for _, y in line.dots)  # no sample sits on the zero line
    assert [t for *_, t in line.samples][1] == "-3 min: a 8"


# ---------------------------------------------------------------- through the admin


@pytest.fixture
def project(prefix: str) -> Iterator[dict[str, Any]]:
    value = {
        **settings.ZQUEUE,
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "ENQUEUE_ON_COMMIT": False,
    }
    with override_settings(ZQUEUE=value):
        yield value
    conf.reset()


@pytest.fixture
def viewer() -> Client:
    user = User.objects.create_user("viewer", "v@example.com", "pw", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="django_zqueue", codename="view_queue")
    )
    c = Client()
    c.force_login(user)
    return c


@pytest.mark.django_db
def test_depth_chart_of_a_queue_with_no_worker_shows_its_real_depth(
    viewer: Client, project: dict[str, Any], redis_client: redis.Redis
) -> None:
    q = get_queue("default")
    q.publish_many(range(1234))
    minute = redis_minute(redis_client)
    slot, before = minute % 64, (minute - 1) % 64
    # the minute before: publishes and no scan, as an old version wrote it (depth 0) and
    # as this one does (a depth sampled by the publish); two minutes before: no sample
    redis_client.hset(
        q.engine._keys.stats,
        mapping={f"m{before}": minute - 1, f"e{before}": 1000, f"r{before}": 1000},
    )
    r = viewer.get(BASE)
    assert r.status_code == 200
    depth = r.context["rows"][0]["depth"]
    if redis_minute(redis_client) != minute:
        pytest.skip("the minute turned")
    (line,) = depth.lines
    texts = [t for *_, t in line.samples]
    assert texts[-1].endswith("ready 1,234") and texts[-2].endswith("ready 1,000")
    assert len(texts) == 2 and line.latest == 1234  # the other 58 minutes: gaps, no zeros
    assert f"r{slot}" in ring(q, redis_client)
    html = r.content.decode()
    assert ": ready 1,234</title>" in html and ": ready 1,000</title>" in html
