"""The read model (django_zqueue.read) on known queue states, without HTTP.

Each read of the dashboard, the metrics and the commands (the overview's figures, a page
of a state, where a job is, one job) on one shard and on a partitioned queue, with exact
values; and the adversarial cases: a record that is not JSON or not an object, a job
deleted between the page read and the record read, an empty queue, stale slots of the
minute ring, dead and malformed worker registrations.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from redis.client import Pipeline

from django_zqueue import read
from django_zqueue.engine.keys import partition_of
from django_zqueue.engine.records import Progress, Record
from django_zqueue.queue import Queue
from django_zqueue.read import jobs as read_jobs

from . import redis_server
from .conftest import QueueFactory
from .records_util import set_body, to_json_layout

ERROR = "ValueError: nope\nTraceback (most recent call last):\n  boom"
CONSUMER = "host:1:w"


def redis_ms(client: redis.Redis) -> int:
    secs, micros = client.time()
    return int(secs) * 1000 + int(micros) // 1000


def tag_in(partition: int, n: int, stem: str) -> str:
    """A tag starting with ``stem`` whose partition is ``partition`` of ``n``."""
    return next(f"{stem}{i}" for i in range(10_000) if partition_of(f"{stem}{i}", n) == partition)


@dataclass
class State:
    """A queue filled by :func:`fill`, and what the reads must find."""

    q: Queue
    ready: list[str]  # in global order
    t0: int  # Redis time before the first publish
    t1: int  # Redis time after the last write


def claim_tag(q: Queue, tag: str) -> Any:
    """Claim job ``tag`` (the claim of a partitioned queue starts at a round-robin
    shard): every other job claimed on the way is released (it keeps its score)."""
    for _ in range(4 * q.partitions):
        msgs, _ = q.claim(1, consumer=CONSUMER)
        for m in msgs:
            if m.tag == tag:
                return m
            q.release(m)
    raise AssertionError(f"{tag} never claimed")


def fill(q: Queue, client: redis.Redis) -> State:
    """Four ready jobs at raw scores 10, 20, 20, 30 (the two at 20 in shards 2 and 0 of a
    partitioned queue, tag order against shard order), one delayed, one in flight with
    progress, one dead with an error."""
    n = q.partitions
    tie_a, tie_b = ("a-tie", "b-tie") if n == 1 else (tag_in(2, n, "a"), tag_in(0, n, "b"))
    t0 = redis_ms(client)
    q.publish({"n": 0}, tag="head", score=10, priority=3, max_retries=4)
    q.publish({"n": 1}, tag=tie_a, score=20)
    q.publish({"n": 2}, tag=tie_b, score=20)
    q.publish({"task": "t.work", "args": [], "kwargs": {}}, tag="tail", score=30)
    q.publish({"n": 4}, tag="run", score=1)
    q.publish({"n": 5}, tag="doomed", score=2)
    q.publish({"n": 6}, tag="later", delay=3600)
    q.touch(claim_tag(q, "run"), progress=0.25, note="quarter")
    assert q.nack(claim_tag(q, "doomed"), ERROR, dead=True) == "dead"
    ready = ["head", tie_a, tie_b, "tail"] if n == 1 else ["head", tie_b, tie_a, "tail"]
    return State(q, ready, t0, redis_ms(client))


@pytest.fixture(params=[1, 3], ids=["one-shard", "partitioned"])
def state(
    request: pytest.FixtureRequest, make_queue: QueueFactory, redis_client: redis.Redis
) -> State:
    return fill(make_queue(partitions=request.param), redis_client)


@pytest.fixture(params=[1, 3], ids=["one-shard", "partitioned"])
def empty(request: pytest.FixtureRequest, make_queue: QueueFactory) -> Queue:
    return make_queue(partitions=request.param)


def register(q: Queue, client: redis.Redis, worker: str, value: object) -> None:
    raw = value if isinstance(value, str) else json.dumps(value)
    client.hset(q.engine._keys.workers, worker, raw)


# ---------------------------------------------------------------- overview


def test_overview_figures(state: State, redis_client: redis.Redis) -> None:
    q = state.q
    now = int(time.time() * 1000)
    register(q, redis_client, "live:1:aaaa", {"threads": 3, "seen": now, "host": "h", "pid": 1})
    register(q, redis_client, "dead:2:bbbb", {"threads": 5, "seen": now - 31_000})
    register(q, redis_client, "junk:3:cccc", "not json")
    register(q, redis_client, "list:4:dddd", [1, 2])
    (f,) = read.overview([q.engine])
    assert (f.name, f.ready, f.delayed, f.inflight, f.dead) == ("q", 4, 1, 1, 1)
    assert f.workers == 3
    assert f.head is not None and f.head.priority == 3 and f.head.max_retries == 4
    assert state.t0 <= (f.head.enqueued_at_ms or 0) <= state.t1 <= f.now_ms
    assert f.lag_seconds == (f.now_ms - (f.head.enqueued_at_ms or 0)) / 1000
    assert f.counters["enqueued"] == 7 and f.counters["dead"] == 1
    assert f.counters == q.stats() and "acked" not in f.counters
    rows = f.minutes(3)
    assert [m.minute for m in rows] == [
        f.now_ms // 60_000 - 2,
        f.now_ms // 60_000 - 1,
        f.now_ms // 60_000,
    ]
    assert rows[-1].ready == 4 and sum(m.enqueued for m in rows) == 7


def test_overview_of_several_queues_keeps_their_order(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    a, b, c = make_queue("a"), make_queue("b", partitions=2), make_queue("c")
    b.publish_many(range(3))
    c.publish("x")
    figures = read.overview([c.engine, a.engine, b.engine])
    assert [(f.name, f.ready) for f in figures] == [("c", 1), ("a", 0), ("b", 3)]
    assert figures[1].head is None and figures[1].lag_seconds is None


def test_overview_of_an_empty_queue(empty: Queue) -> None:
    (f,) = read.overview([empty.engine])
    assert (f.ready, f.delayed, f.inflight, f.dead, f.workers) == (0, 0, 0, 0, 0)
    assert f.head is None and f.lag_seconds is None and f.stats == {} and f.counters == {}
    rows = f.minutes(3)
    assert [(m.enqueued, m.acked, m.ready) for m in rows] == [(0, 0, -1), (0, 0, -1), (0, 0, 0)]


def test_overview_head_record_not_json(state: State, redis_client: redis.Redis) -> None:
    q = state.q
    redis_client.hset(q.engine._keys_for("head").meta, "head", b"\xff not json")
    (f,) = read.overview([q.engine])
    assert f.ready == 4 and f.head is None and f.lag_seconds is None


# ---------------------------------------------------------------- a page of a state


def test_ready_listing_in_global_order(state: State) -> None:
    q = state.q
    first = q.read.listing("ready", 1, 3)
    assert [j.tag for j in first.jobs] == state.ready[:3]
    assert first.counts == {"ready": 4, "delayed": 1, "leased": 1, "dead": 1, "waiting": 0}
    assert [j.score for j in first.jobs] == [10.0, 20.0, 20.0]
    assert [j.shard for j in first.jobs] == [q.engine._shard_for(t).index for t in state.ready[:3]]
    assert [q.rank(t) for t in state.ready] == [0, 1, 2, 3]
    head = first.jobs[0]
    assert head.record is not None and head.body == {"n": 0}
    assert (head.record.priority, head.record.attempts, head.record.max_retries) == (3, 0, 4)
    assert state.t0 <= (head.record.enqueued_at_ms or 0) <= state.t1
    assert head.progress is None and head.error is None
    assert first.number == 1 and first.offset == 0 and first.workers == 0
    assert first.mean_run_ms is None
    assert first.max_pages == (None if q.partitions == 1 else read.MAX_MERGED // 3)
    second = q.read.listing("ready", 2, 3)
    assert [j.tag for j in second.jobs] == ["tail"] and second.offset == 3
    assert second.jobs[0].body == {"task": "t.work", "args": [], "kwargs": {}}
    past = q.read.listing("ready", 99, 3)  # past the end: the last page
    assert past.number == 2 and [j.tag for j in past.jobs] == ["tail"]


def test_other_states_listings(state: State) -> None:
    q = state.q
    (later,) = q.read.listing("delayed").jobs
    assert later.tag == "later" and later.record is not None
    assert state.t0 + 3_600_000 <= later.score <= state.t1 + 3_600_000
    (run,) = q.read.listing("leased").jobs
    assert run.tag == "run" and run.progress is not None and run.record is not None
    assert (run.progress.value, run.progress.note) == (0.25, "quarter")
    assert run.record.consumer == CONSUMER and run.record.attempts == 1
    assert state.t0 <= (run.record.started_at_ms or 0) <= state.t1 < run.score
    (dead,) = q.read.listing("dead", errors=True).jobs
    assert dead.tag == "doomed" and dead.error == ERROR and dead.body == {"n": 5}
    assert q.read.listing("dead").jobs[0].error is None  # errors only when asked for
    assert q.read.listing("inflight").state == "leased"


def test_listing_of_records_that_are_not_json_objects(
    state: State, redis_client: redis.Redis
) -> None:
    q = state.q
    head, second, third, tail = state.ready
    to_json_layout(redis_client, q.engine._keys_for(head), head)  # its body apart from its record
    redis_client.hset(q.engine._keys_for(head).meta, head, "not json")
    redis_client.hset(q.engine._keys_for(second).meta, second, "[1, 2]")
    redis_client.hset(q.engine._keys_for(third).meta, third, '{"p": "high"}')
    set_body(redis_client, q.engine._keys_for(tail), tail, b"{broken")
    jobs = q.read.listing("ready").jobs
    assert [j.tag for j in jobs] == state.ready
    assert [j.record is None for j in jobs] == [True, True, True, False]
    assert jobs[0].body == {"n": 0} and jobs[3].body is None


def test_a_job_deleted_between_the_page_and_its_record(
    state: State, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = state.q
    victim = state.ready[1]
    read_range = read_jobs._read_range

    def racing(*args: Any) -> Any:
        got = read_range(*args)
        assert q.delete(victim)  # after the range, before the hashes
        return got

    monkeypatch.setattr(read_jobs, "_read_range", racing)
    listing = q.read.listing("ready")
    assert [j.tag for j in listing.jobs] == state.ready and listing.counts["ready"] == 4
    gone = listing.jobs[1]
    assert (gone.record, gone.body, gone.score) == (None, None, 20.0)
    assert all(j.record is not None for j in listing.jobs if j.tag != victim)


def test_listing_of_an_empty_queue(empty: Queue) -> None:
    for state in read.LISTED:
        listing = empty.read.listing(state, 7, 50)
        assert listing.jobs == [] and listing.number == 1 and listing.state == state
        assert listing.counts == {"ready": 0, "delayed": 0, "leased": 0, "dead": 0, "waiting": 0}


def test_listing_validates(q: Queue) -> None:
    with pytest.raises(ValueError):
        q.read.listing("nope")
    with pytest.raises(ValueError):
        q.read.listing("ready", 0)
    with pytest.raises(ValueError):
        q.read.listing("ready", 1, read.MAX_LIMIT + 1)


def test_ready_listing_reads_run_time_and_workers(state: State, redis_client: redis.Redis) -> None:
    q = state.q
    stats = [s.keys.stats for s in q.engine._shards]
    redis_client.hset(stats[0], mapping={"acked": 3, "run_ms": 900})
    redis_client.hset(
        stats[-1],
        mapping={"acked": 1, "run_ms": 1100} if len(stats) > 1 else {"acked": 4, "run_ms": 2000},
    )
    register(q, redis_client, "w:1:aaaa", {"threads": 2, "seen": int(time.time() * 1000)})
    listing = q.read.listing("ready")
    assert listing.mean_run_ms == 500.0 and listing.workers == 2
    assert read.eta_seconds(3, listing.mean_run_ms, listing.workers) == 1.0
    reading = q.read.job(state.ready[2])
    assert reading is not None and reading.info.rank == 2
    assert (reading.mean_run_ms, reading.workers) == (500.0, 2)
    assert state.t1 <= reading.now_ms


# ---------------------------------------------------------------- one job, where a job is


def test_job_and_info_rank_in_the_whole_queue(state: State) -> None:
    q = state.q
    for rank, tag in enumerate(state.ready):
        reading = q.read.job(tag)
        assert reading is not None and reading.info.rank == rank and reading.info.state == "ready"
        info = q.read.info(tag, with_body=False)
        assert info is not None and info.rank == rank and info.body is None
    reading = q.read.job("doomed")
    assert reading is not None and reading.info.rank is None
    assert reading.info.last_error == ERROR and reading.info.body == {"n": 5}
    assert reading.mean_run_ms is None and reading.workers == 0
    assert q.read.job("nobody") is None and q.read.info("nobody") is None


def test_locate(state: State, redis_client: redis.Redis) -> None:
    q = state.q
    places = {tag: read.locate([q.engine], tag) for tag in [*state.ready, "later", "run", "doomed"]}
    for rank, tag in enumerate(state.ready):
        (loc,) = places[tag]
        assert (loc.queue, loc.tag, loc.state, loc.rank) == ("q", tag, "ready", rank)
    assert [loc.score for tag in state.ready for loc in places[tag]] == [10.0, 20.0, 20.0, 30.0]
    assert places["tail"][0].score_text == "30"
    assert [places[t][0].state for t in ("later", "run", "doomed")] == ["delayed", "leased", "dead"]
    assert all(places[t][0].rank is None for t in ("later", "run", "doomed"))
    assert read.locate([q.engine], "nobody") == [] and read.locate([q.engine], "") == []
    assert read.locate([q.engine], "x" * 257) == []
    redis_client.zrem(q.engine._keys_for("tail").ready, "tail")  # a record in no set
    (orphan,) = read.locate([q.engine], "tail")
    assert (orphan.state, orphan.score, orphan.rank) == ("orphan", None, None)


def test_locate_in_several_queues(make_queue: QueueFactory) -> None:
    a, b, c = make_queue("a"), make_queue("b", partitions=2), make_queue("c")
    b.publish("first", tag="early", score=-5)
    for q in (a, b, c):
        q.publish("x", tag="same", score=1)
    found = read.locate([c.engine, b.engine, a.engine], "same")
    assert [(loc.queue, loc.rank) for loc in found] == [("c", 0), ("b", 1), ("a", 0)]


# ---------------------------------------------------------------- decoding


def test_record_decoding() -> None:
    full = {"p": -2, "a": 3, "m": 5, "e": 1_700_000_000_000, "st": 1_700_000_000_500, "c": "h:1"}
    assert Record.decode(json.dumps(full)) == Record(
        -2, 3, 5, 1_700_000_000_000, 1_700_000_000_500, "h:1"
    )
    assert Record.decode(b"{}") == Record(0, 0, 0, None, None, None)
    for raw in (None, b"", "not json", b"\xff", "[1]", '"text"', "3", '{"a": "x"}', '{"e": null}'):
        assert Record.decode(raw) is None, raw
    rec = Record.decode('{"e": 60000, "st": 120000}')
    assert rec is not None and rec.enqueued_at is not None and rec.started_at is not None
    assert (rec.enqueued_at.minute, rec.started_at.minute) == (1, 2)


def test_progress_decoding() -> None:
    assert Progress.decode('{"v": 1.5, "n": "", "t": 5}') == Progress(1.0, None, 5)
    assert Progress.decode('{"v": -1, "n": "x"}') == Progress(0.0, "x", None)
    assert Progress.decode('{"v": "half", "t": "now"}') == Progress(None, None, None)
    for raw in (None, "", "[]", "nope"):
        assert Progress.decode(raw) is None


def test_stats_decoding_and_merge_with_stale_slots() -> None:
    assert read.decode_stats({b"acked": b"3", b"junk": b"x", "m1": "5"}) == {"acked": 3, "m1": 5}
    minute = 1000
    slot, before = minute % 64, (minute - 1) % 64
    a = {
        "enqueued": 3,
        f"m{slot}": minute,
        f"e{slot}": 3,
        f"m{before}": minute - 1,
        f"e{before}": 2,
    }
    # b's slot still holds the minute 64 minutes ago: stale, not summed in
    b = {"enqueued": 5, "acked": 1, f"m{slot}": minute - 64, f"e{slot}": 100, f"r{slot}": 9}
    b |= {f"m{before}": minute - 1, f"e{before}": 7, f"a{before}": 1}
    merged = read.merge_stats([a, b])
    assert read.counters(merged) == {"enqueued": 8, "acked": 1}
    rows = read.minutes(merged, minute * 60_000 + 59_999, 3, ready_now=4)
    assert [(m.minute, m.enqueued, m.acked, m.ready) for m in rows] == [
        (minute - 2, 0, 0, -1),
        (minute - 1, 9, 1, -1),
        (minute, 3, 0, 4),
    ]
    assert read.merge_stats([b]) == b  # one shard: as it is
    stale = read.minutes(b, minute * 60_000, 1)
    assert [(m.enqueued, m.ready) for m in stale] == [(0, -1)]  # slot holds another minute


def test_stale_ring_slots_through_the_overview(q: Queue, redis_client: redis.Redis) -> None:
    minute = redis_ms(redis_client) // 60_000
    slot, before = minute % 64, (minute - 1) % 64
    redis_client.hset(
        q.engine._keys.stats,
        mapping={
            f"m{slot}": minute, f"e{slot}": 4, f"a{slot}": 2, f"r{slot}": 7,
            f"m{before}": minute - 1 - 64, f"e{before}": 99, f"r{before}": 50,
        },
    )  # fmt: skip
    (f,) = read.overview([q.engine])
    if f.now_ms // 60_000 != minute:  # the minute turned between the write and the read
        pytest.skip("the minute turned")
    rows = f.minutes(2)
    assert [(m.enqueued, m.acked, m.ready) for m in rows] == [(0, 0, -1), (4, 2, 0)]


def test_worker_registrations() -> None:
    cutoff = 1_000_000
    workers: dict[bytes | str, bytes | str] = {
        "live": json.dumps({"threads": 2, "seen": cutoff}),
        "also-live": json.dumps({"seen": cutoff + 5}),  # threads default to 1
        "dead": json.dumps({"threads": 4, "seen": cutoff - 1}),
        "garbage": b"\x00not json",
        "list": "[]",
        "bad-seen": json.dumps({"threads": 9, "seen": "soon"}),
        "bad-threads": json.dumps({"threads": "9", "seen": cutoff}),
    }
    assert read.live_thread_count(workers, cutoff) == 3
    assert read.live_thread_count({}, cutoff) == 0


# ---------------------------------------------------------------- round trips


@pytest.mark.skipif(redis_server.TOPOLOGY != "standalone", reason="counts plain pipelines")
def test_round_trips_do_not_grow_with_shards(state: State, monkeypatch: pytest.MonkeyPatch) -> None:
    q = state.q
    trips: list[int] = []
    execute: Callable[..., Any] = Pipeline.execute

    def counted(self: Pipeline, *args: Any, **kwargs: Any) -> Any:
        trips.append(1)
        return execute(self, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "execute", counted)

    def count(read_once: Callable[[], object]) -> int:
        trips.clear()
        read_once()
        return len(trips)

    assert count(lambda: read.overview([q.engine])) == 2
    assert count(lambda: q.read.listing("ready")) == 2
    # past the end: one shard reads the last page; several have read every entry already
    assert count(lambda: q.read.listing("dead", 5)) == (3 if q.partitions == 1 else 2)
    assert count(lambda: read.locate([q.engine], "later")) == 1
    assert count(lambda: read.locate([q.engine], state.ready[1])) == (1 if q.partitions == 1 else 2)
    assert count(lambda: q.read.job(state.ready[1])) == 1  # + the info script
