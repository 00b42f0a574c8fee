"""Faults at the edges that are not a script's: times out of range, records and replies
that are not what they should be. Each is read without an error outside ZQueueError."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from django_zqueue.engine.records import EARLIEST, LATEST, JobInfo, Progress, Record, from_ms
from django_zqueue.exceptions import CorruptResult, ZQueueError
from django_zqueue.queue import Queue
from django_zqueue.queue.aio import AsyncQueue
from django_zqueue.read.workers import read_workers
from django_zqueue.tasks.watch import read_positions
from django_zqueue.worker.leases import Leases

from .redis_server import redis_url


@pytest.mark.parametrize(
    ("ms", "expected"),
    [
        (math.inf, LATEST),
        (1e300, LATEST),
        (2**80, LATEST),
        (-math.inf, EARLIEST),
        (-1e300, EARLIEST),
        (math.nan, EARLIEST),
    ],
)
def test_a_time_out_of_range_is_clamped(ms: float, expected: Any) -> None:
    assert from_ms(ms) == expected
    assert from_ms(ms).astimezone().tzinfo is not None  # shown in any time zone


def test_a_time_in_range_is_exact() -> None:
    assert from_ms(0).isoformat() == "1970-01-01T00:00:00+00:00"
    assert from_ms(1_700_000_000_123).isoformat() == "2023-11-14T22:13:20.123000+00:00"


def test_records_with_infinite_or_huge_numbers_read_as_no_record() -> None:
    assert Record.decode(b'{"e": Infinity, "a": 1}') is None
    assert Record.decode(b'{"e": 1, "a": 1e400}') is None
    progress = Progress.decode(b'{"v": %d, "t": %d}' % (10**400, 10**400))
    assert progress is not None and progress.value == 1.0
    assert progress.at == LATEST


def leased(q: Queue) -> str:
    tag = q.publish({"task": "x", "args": [], "kwargs": {}})
    msgs, _ = q.claim(1, "w-test")
    assert [m.tag for m in msgs] == [tag]
    return tag


def test_a_lease_deadline_of_inf_reads(q: Queue, redis_client: redis.Redis) -> None:
    tag = leased(q)
    redis_client.zadd(q.engine._keys.leased, {tag: math.inf}, xx=True)
    info = q.info(tag)
    assert info is not None and info.state == "leased"
    assert info.lease_deadline == LATEST


def test_a_corrupt_progress_or_error_reads(q: Queue, redis_client: redis.Redis) -> None:
    tag = leased(q)
    redis_client.hset(q.engine._keys.progress, tag, b"{not json")
    redis_client.hset(q.engine._keys.errors, tag, b"\xff\xfe not utf-8")
    info = q.info(tag)
    assert info is not None and info.progress is None
    assert info.last_error is not None and "not utf-8" in info.last_error


def test_an_info_reply_with_an_infinite_score_decodes() -> None:
    reply = [b"dead", b"-inf", -1, b'{"e": 1e400}', b"", b"", b""]
    info = JobInfo.from_reply("q", "t", reply)
    assert info is not None and info.died_at == EARLIEST and info.attempts == 0


@pytest.mark.parametrize("deadline", [math.inf, -math.inf])
def test_a_lease_deadline_of_inf_is_recovered(
    q: Queue, redis_client: redis.Redis, deadline: float
) -> None:
    tag = leased(q)
    redis_client.zadd(q.engine._keys.leased, {tag: deadline}, xx=True)
    assert q.scan().recovered == 1
    assert q.state(tag) == "ready"


# ------------------------------------------------------------------ the workers hash


def test_garbage_in_the_workers_hash_is_pruned_with_a_warning(
    q: Queue, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    now_ms = int(time.time() * 1000)
    live = json.dumps({"threads": 2, "seen": now_ms, "host": "h", "pid": 1, "started": now_ms})
    gone = json.dumps({"threads": 2, "seen": now_ms - 3_600_000, "host": "h", "pid": 2})
    redis_client.hset(
        q.engine._keys.workers,
        mapping={
            "live": live,
            "gone": gone,
            "notjson": b"{oops",
            "badutf8": b"\xff\xfe",
            "list": "[1, 2]",
            "noseen": '{"threads": 1}',
            "textseen": '{"seen": "yesterday"}',
            "infseen": '{"seen": Infinity}',
        },
    )
    leases = Leases("w-me", [q], 1)
    with caplog.at_level(logging.WARNING, logger="django_zqueue"):
        leases.register()  # no error: the garbage is not an outage
    assert sorted(redis_client.hkeys(q.engine._keys.workers)) == [b"live", b"w-me"]
    corrupt = [r.getMessage() for r in caplog.records if "worker_entry_corrupt" in r.getMessage()]
    assert len(corrupt) == 6
    assert all(q.engine._keys.workers in line for line in corrupt)


def test_the_workers_read_skips_garbage_and_infinite_numbers(
    q: Queue, redis_client: redis.Redis
) -> None:
    now_ms = int(time.time() * 1000)
    tag = leased(q)  # claimed by "w-test"
    redis_client.zadd(q.engine._keys.leased, {tag: math.inf}, xx=True)
    redis_client.hset(
        q.engine._keys.workers,
        mapping={
            "w-test": json.dumps({"threads": 1, "seen": now_ms, "host": "h", "pid": 3}),
            "notjson": b"{oops",
            b"\xff": '{"seen": Infinity, "pid": NaN, "threads": 1e400}',
        },
    )
    reading = read_workers([q.engine])
    by_id = {w.id: w for w in reading.workers}
    assert set(by_id) == {"w-test", "\ufffd"}
    assert [j.tag for j in by_id["w-test"].jobs] == [tag]
    assert by_id["\ufffd"].pid is None and by_id["\ufffd"].seen_ms == 0


# ------------------------------------------------------------------ results


@pytest.mark.parametrize("raw", [b"{not json", b"\xff\xfe"], ids=["not-json", "not-utf8"])
def test_a_result_that_is_not_json_raises_corrupt_result(
    q: Queue, redis_client: redis.Redis, raw: bytes
) -> None:
    key = q.engine._keys_for("job1").result("job1")
    redis_client.set(key, raw)
    with pytest.raises(CorruptResult, match="is not JSON") as got:
        q.result("job1")
    assert isinstance(got.value, ZQueueError) and key in str(got.value)

    async def read() -> Any:
        client = aredis.Redis.from_url(redis_url())
        try:
            return await AsyncQueue(q, client=client).result("job1")
        finally:
            await client.aclose()

    with pytest.raises(CorruptResult):
        asyncio.run(read())


def test_positions_read_with_a_corrupt_stats_counter(q: Queue, redis_client: redis.Redis) -> None:
    tag = q.publish({"task": "x", "args": [], "kwargs": {}})
    redis_client.hset(q.engine._keys.stats, mapping={"acked": "x", "run_ms": "1.5"})
    got = read_positions(q, [tag])
    assert got[tag].rank == 0


# ------------------------------------------------------------------ a parent's corrupt links


@pytest.mark.parametrize("ends", ["acked", "dead"])
def test_a_parent_whose_dependents_list_is_corrupt_still_reaches_them(
    make_queue: Any,
    zqueue_settings: dict[str, Any],
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    ends: str,
) -> None:
    """The parent's ``kids`` does not decode: its dependents (here one in its own queue
    and one in another) are found from their own links, released when it succeeded,
    dead-lettered when it failed; one warning names the parent."""
    from django_zqueue import get_queue
    from django_zqueue.engine.records.links import FlowJob, Kid, Ref
    from django_zqueue.queue.flow import publish_flow

    q, other = get_queue("default"), get_queue("other")
    parent, near, far = q.prepare("p", "p"), q.prepare("n", "n"), other.prepare("f", "f")
    bystander = q.prepare("b", "b")
    publish_flow(
        [
            (q, FlowJob(parent, kids=(Kid(q.name, "n", 1), Kid(other.name, "f", 1)))),
            (q, FlowJob(near, parents=(Ref(q.name, "p"),))),
            (other, FlowJob(far, parents=(Ref(q.name, "p"),))),
            (q, FlowJob(bystander, parents=(Ref(q.name, "elsewhere"),))),
        ]
    )
    redis_client.hset(q.engine._keys.wf("p"), "kids", "not json [")
    msg = q.get()
    assert msg is not None and msg.tag == "p"
    with caplog.at_level(logging.WARNING, logger="django_zqueue"):
        if ends == "acked":
            assert q.ack(msg)
        else:
            assert q.nack(msg, "boom", dead=True) == "dead"
        q.engine.flow.drain()
    want = "ready" if ends == "acked" else "dead"
    assert q.state("n") == want and other.state("f") == want
    assert q.state("b") == "waiting"  # another parent's dependent is left alone
    assert [r for r in caplog.records if "workflow_links_corrupt" in r.getMessage()]
