"""The roll-up of the minute ring into 10-minute and hourly rings (engine/rollup.py,
``engine.stats.roll_up``, ``queue.read.buckets``), against a real Redis: sums that match
the minutes, the last depth sample of a bucket, a bucket nobody rolled up is a gap (never
a zero), a roll-up run twice writes the same, the keys expire and go with ``clear()``."""

from __future__ import annotations

import logging
import time

import pytest
import redis

from django_zqueue.engine.rollup import RINGS, roll, roll_up
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue
from django_zqueue.worker.scanner import Scanner

from .conftest import QueueFactory


def redis_minute(client: redis.Redis) -> int:
    secs, _ = client.time()
    return int(secs) // 60


def fill_minutes(
    q: Queue, client: redis.Redis, now: int, back: range, *, depth_every: int = 1
) -> dict[int, dict[str, int]]:
    """Write minutes ``now - b`` for ``b`` in ``back`` straight into the stats ring
    (enqueued = the minute % 7 + 1, acked = 2, failed = 1 every third minute, run ms 30 a
    job, a depth sample every ``depth_every`` minutes); returns them by minute."""
    fields: dict[str, int] = {}
    minutes: dict[int, dict[str, int]] = {}
    for b in back:
        minute = now - b
        slot = minute % 64
        row = {"e": minute % 7 + 1, "a": 2, "f": int(minute % 3 == 0), "d": 0, "t": 60}
        if minute % depth_every == 0:
            row["r"] = minute % 50
        minutes[minute] = row
        fields.update({f"m{slot}": minute, **{f"{k}{slot}": v for k, v in row.items()}})
    client.hset(q.engine._keys.stats, mapping=fields)  # type: ignore[arg-type]
    return minutes


def test_roll_sums_each_bucket_and_keeps_its_last_depth() -> None:
    now = 10_000 * 10 + 4  # minute 4 of a 10-minute bucket
    source: dict[str, int] = {}
    for minute in range(now - 63, now + 1):
        if minute % 10 == 5:  # a quiet minute: no slot (counts 0, no depth)
            continue
        slot = minute % 64
        source.update({f"m{slot}": minute, f"e{slot}": 1, f"a{slot}": minute % 2})
        if minute % 4 == 0:
            source[f"r{slot}"] = minute
    quiet = now - 9  # a quiet minute's slot holding the minute 64 before: stale, ignored
    assert quiet % 10 == 5
    source.update({f"m{quiet % 64}": quiet - 64, f"e{quiet % 64}": 1000})
    fields, drop = roll(source, now, 10, 64, 150, 64)
    # the buckets whose minutes are all in the ring: from now - 63 rounded up
    buckets = sorted(v for k, v in fields.items() if k.startswith("m"))
    assert buckets == list(range((now - 63 + 9) // 10, now // 10 + 1))
    for bucket in buckets:
        slot = bucket % 150
        minutes = [m for m in range(bucket * 10, min(bucket * 10 + 10, now + 1)) if m % 10 != 5]
        assert fields[f"e{slot}"] == len(minutes)
        assert fields[f"a{slot}"] == sum(m % 2 for m in minutes)
        sampled = [m for m in minutes if m % 4 == 0]
        if sampled:
            assert fields[f"r{slot}"] == sampled[-1]
        else:  # no depth sampled: the old one of that slot goes, never a zero
            assert f"r{slot}" not in fields and f"r{slot}" in drop
    assert roll({}, now, 10, 64, 150, 64) == ({}, [])  # nothing to roll: nothing written


def test_roll_up_adds_the_hours_from_the_ten_minute_ring() -> None:
    now = 6 * 10 * 5000 + 25  # minute 25 of an hour
    stats = {f"m{now % 64}": now, f"e{now % 64}": 3, f"r{now % 64}": 9}
    tens = {}
    for unit in range(now // 10 - 8, now // 10):  # 10-minute buckets written before
        slot = unit % RINGS[10]
        tens.update({f"m{slot}": unit, f"e{slot}": 10, f"r{slot}": unit})
    plan = roll_up(stats, tens, now)
    ten, _ = plan[10]
    assert ten[f"e{(now // 10) % 150}"] == 3
    hours, _ = plan[60]
    this, before = now // 60, now // 60 - 1
    # this hour: its 10-minute buckets 0 and 1 (written before) and 2 (now: 3 and depth 9)
    assert hours[f"m{this % 170}"] == this and hours[f"e{this % 170}"] == 23
    assert hours[f"r{this % 170}"] == 9
    # the hour before: the six buckets of 10 each, its depth the last one's
    assert hours[f"e{before % 170}"] == 60 and hours[f"r{before % 170}"] == this * 6 - 1


def test_roll_up_from_redis_reads_back_as_buckets(q: Queue, redis_client: redis.Redis) -> None:
    now = redis_minute(redis_client)
    minutes = fill_minutes(q, redis_client, now, range(1, 60), depth_every=3)
    assert q.engine.stats.roll_up() > 0
    key = q.engine._keys.roll(10)
    assert 0 < redis_client.ttl(key) <= 8 * 86_400
    first = redis_client.hgetall(key)
    assert q.engine.stats.roll_up() > 0 and redis_client.hgetall(key) == first  # the same
    if redis_minute(redis_client) != now:
        pytest.skip("the minute turned during the test")
    rows = q.read.buckets(10, 8)
    assert [r.minute for r in rows] == [(now // 10 - 7 + i) * 10 for i in range(8)]
    for row in rows[:-1]:
        held = [minutes[m] for m in range(row.minute, row.minute + 10) if m in minutes]
        if row.minute < now - 63:  # older than the ring: nobody rolled it up, a gap
            assert not row.live and row.ready == -1
            continue
        assert row.live
        assert row.enqueued == sum(m["e"] for m in held)
        assert row.failed == sum(m["f"] for m in held)
        assert row.run_ms == 60 * len(held)
        depths = [m["r"] for m in held if "r" in m]
        assert row.ready == (depths[-1] if depths else -1)
    assert rows[-1].ready == q.counts()["ready"]  # the current bucket: the depth now
    hours = q.read.buckets(60, 3)
    assert hours[-1].live or hours[-2].live
    rolled = [m for minute, m in minutes.items() if minute // 10 * 10 >= now - 63]
    assert sum(r.enqueued for r in hours) == sum(m["e"] for m in rolled)
    q.clear()
    assert not redis_client.exists(key, q.engine._keys.roll(60))


def test_no_roll_up_is_a_gap_and_bad_fields_are_ignored(
    q: Queue, redis_client: redis.Redis
) -> None:
    rows = q.read.buckets(60, 170)  # an old queue, no scanner: no key at all
    assert len(rows) == 170 and not any(r.live for r in rows[:-1])
    assert all(r.enqueued == 0 and r.ready == -1 for r in rows[:-1])
    now = redis_minute(redis_client)
    slot = (now // 10) % 150
    redis_client.hset(q.engine._keys.roll(10), mapping={f"m{slot}": now // 10, f"e{slot}": "x"})
    redis_client.hset(q.engine._keys.stats, "m0", "junk")
    q.engine.stats.roll_up()  # a corrupt field is skipped, not fatal
    row = q.read.buckets(10, 1)[0]
    assert row.enqueued == 0
    for size, last in ((10, 0), (10, 151), (60, 171), (30, 5)):
        with pytest.raises(InvalidArgument):
            q.read.buckets(size, last)


def test_a_partitioned_queue_sums_its_shards(make_queue: QueueFactory) -> None:
    q = make_queue("parts", partitions=3)
    q.publish_many(range(30))
    q.engine.stats.roll_up()
    row = q.read.buckets(10, 1)[-1]
    assert row.live and row.enqueued == 30 and row.ready == 30


def test_the_scanner_rolls_up_once_a_minute(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("x")
    scanner = Scanner([q])
    scanner.step()
    assert redis_client.exists(q.engine._keys.roll(10), q.engine._keys.roll(60)) == 2
    redis_client.delete(q.engine._keys.roll(10))
    scanner.step()  # the same minute (this host's clock): not again
    if scanner.rolled[q.name] == int(time.time()) // 60:
        assert not redis_client.exists(q.engine._keys.roll(10))


def test_a_corrupt_roll_up_key_never_stops_the_housekeeping(
    q: Queue, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    redis_client.set(q.engine._keys.roll(10), "not a hash")
    tag = q.publish("due", delay=0.001)
    time.sleep(0.01)
    scanner = Scanner([q])
    with caplog.at_level(logging.WARNING, logger="django_zqueue"):
        scanner.tick(0.0)  # the scanner's own loop: isolates a queue's own errors
    assert q.state(tag) == "ready"  # promoted: the scan ran
    said = [r.getMessage() for r in caplog.records if "roll_up_failed" in r.getMessage()]
    assert len(said) == 1 and "WRONGTYPE" in said[0], said
    assert scanner.paused.wait(q.name) == 0  # the queue is not set aside
