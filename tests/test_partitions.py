"""Partitioned queues (option ``partitions``) against a real Redis.

A partitioned queue spreads its jobs over N hash tags ``{prefix:queue#i}``; a job's
partition is CRC-32 of its tag modulo N. These tests check the routing (publish, dedup,
exists/score/delete/info touch the job's own partition), that every script call stays
within one partition's keys, the exact global rank against a model (hypothesis), the
round-robin claim, the merged listings, the worker and the admin on a partitioned queue,
the option's validation and the refusal to change N under existing jobs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client, override_settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from django_zqueue import conf, get_queue
from django_zqueue.admin import dashboard
from django_zqueue.conf import QueueOptions, queue_options
from django_zqueue.engine.keys import layout_key, partition_keys, partition_of, queue_keys
from django_zqueue.engine.redis.connection import is_cluster
from django_zqueue.engine.scripts import SequenceExhausted
from django_zqueue.exceptions import (
    ConfigurationError,
    DuplicateJob,
    InvalidArgument,
    PartitionMismatch,
)
from django_zqueue.queue import MAX_MERGED, Queue

from .conftest import QueueFactory, snapshot
from .redis_server import redis_url

ROOT = Path(__file__).resolve().parent.parent
BAND = 2**42


def tag_in(partition: int, n: int, stem: str = "t") -> str:
    """A tag whose partition is ``partition`` of ``n``."""
    for i in range(10_000):
        tag = f"{stem}{i}"
        if partition_of(tag, n) == partition:
            return tag
    raise AssertionError("no tag found")


def keys_with_jobs(client: redis.Redis, prefix: str) -> set[str]:
    return {k.decode() for k in client.scan_iter(match=f"{{{prefix}:*", count=1000)}


# ---------------------------------------------------------------- options and keys


@pytest.mark.parametrize("bad", [0, -1, 257, 2.0, "4", True, None])
def test_partitions_option_is_validated(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"E007.*partitions must be an integer"):
        queue_options("q", partitions=bad)


def test_partitions_exclude_global_limits() -> None:
    for limit in ({"concurrency": 2}, {"qps": 5}):
        with pytest.raises(ConfigurationError, match="cannot be combined with partitions"):
            queue_options("q", partitions=4, **limit)
        with pytest.raises(InvalidArgument, match="cannot be combined"):
            Queue("q", QueueOptions(partitions=4, **limit))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="partitions must be"):
        Queue("q", QueueOptions(partitions=0))
    assert queue_options("q", partitions=1, concurrency=2).partitions == 1
    assert queue_options("q", partitions=256).partitions == 256


def test_system_check_reports_bad_partitions() -> None:
    from django_zqueue.ops.checks import check_settings

    with override_settings(ZQUEUE={"QUEUES": {"q": {"partitions": 300}}}):
        errors = check_settings()
    assert [e.id for e in errors] == ["django_zqueue.E007"]
    assert "partitions" in errors[0].msg
    conf.reset()


def test_key_names() -> None:
    assert [k.tag for k in partition_keys("zq", "jobs", 3)] == [
        "{zq:jobs#0}",
        "{zq:jobs#1}",
        "{zq:jobs#2}",
    ]
    assert partition_keys("zq", "jobs", 1) == [queue_keys("zq", "jobs")]  # unchanged
    assert partition_keys("zq", "jobs", 2)[1].ready == "{zq:jobs#1}:ready"
    assert layout_key("zq", "jobs") == "{zq:jobs}:partitions"


def test_partition_of_is_crc32_and_stable_across_processes() -> None:
    tags = ["a", "job-1", "ü-tag", "x" * 256]
    assert [partition_of(t, 16) for t in tags] == [zlib.crc32(t.encode()) % 16 for t in tags]
    assert all(partition_of(t, 1) == 0 for t in tags)
    assert partition_of("cron:nightly:1700000000000", 16) == 0  # with the schedules
    code = (
        "from django_zqueue.engine.keys import partition_of;"
        f"print([partition_of(t, 16) for t in {tags!r}])"
    )
    runs = set()
    for seed in ("1", "2"):  # Python's hash() would differ between these
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            check=True,
        )
        runs.add(out.stdout.strip())
    assert runs == {str([partition_of(t, 16) for t in tags])}


# ---------------------------------------------------------------- routing


def test_publish_routes_each_job_to_its_partition(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    q = make_queue(partitions=4)
    tags = q.publish_many([{"i": i} for i in range(40)], tags=[f"job{i}" for i in range(40)])
    for tag in tags:
        p = partition_of(tag, 4)
        assert redis_client.zscore(q.engine._part_keys[p].ready, tag) is not None
        assert redis_client.hexists(q.engine._part_keys[p].meta, tag)
        for j in range(4):
            if j != p:
                assert redis_client.zscore(q.engine._part_keys[j].ready, tag) is None
    # nothing under the queue's own (unpartitioned) tag but the layout record
    own = {k for k in keys_with_jobs(redis_client, prefix) if k.startswith(f"{{{prefix}:q}}")}
    assert own == {layout_key(prefix, "q")}
    assert redis_client.get(layout_key(prefix, "q")) == b"4"
    assert q.total_count() == 40 and q.counts()["ready"] == 40
    assert q.stats()["enqueued"] == 40
    used = {partition_of(t, 4) for t in tags}
    assert used == {0, 1, 2, 3}


def test_dedup_holds_across_partitions(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    q = make_queue(partitions=8)
    q.publish("x", tag="same")
    with pytest.raises(DuplicateJob) as exc:
        q.publish("y", tag="same")
    assert exc.value.tags == ["same"] and exc.value.states == ["ready"]
    before = snapshot(redis_client, prefix)
    # a batch over several partitions with one clash: nothing written
    many = [f"other{i}" for i in range(30)]
    with pytest.raises(DuplicateJob) as exc:
        q.publish_many(range(31), tags=[*many, "same"])
    assert exc.value.tags == ["same"]
    with pytest.raises(DuplicateJob):
        q.publish_many([1, 2], tags=["dup", "dup"])
    assert snapshot(redis_client, prefix) == before
    # a dead job keeps its tag too
    msg = q.get()
    assert msg is not None and msg.tag == "same"
    assert q.nack(msg, "boom", dead=True) == "dead"
    with pytest.raises(DuplicateJob) as exc:
        q.publish("z", tag="same")
    assert exc.value.states == ["dead"]


def test_exists_score_state_info_delete_route_directly(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue(partitions=6)
    tag = tag_in(5, 6)
    q.publish({"a": 1}, tag=tag, priority=3)
    k = q.engine._part_keys[5]
    assert q.exists(tag) and q.state(tag) == "ready"
    assert q.score(tag) == redis_client.zscore(k.ready, tag)
    info = q.info(tag)
    assert info is not None and info.state == "ready" and info.body == {"a": 1}
    assert info.priority == 3 and info.rank == 0 and info.score == q.score(tag)
    # the script calls touch partition 5's keys only: watch the server's command log
    # (the shared server also logs other clients' commands: keep this test's own)
    evalshas: list[str] = []
    # on a Redis Cluster: MONITOR of the master that holds partition 5
    monitor = (
        redis_client.monitor(target_node=redis_client.get_node_from_key(k.ready))
        if is_cluster(redis_client)
        else redis_client.monitor()
    )
    with monitor as m:
        q.exists(tag)
        q.delete(tag)
        for _ in range(10_000):
            cmd = m.next_command()["command"]
            if cmd.startswith(("EVALSHA", "FCALL")) and q.prefix in cmd:
                evalshas.append(cmd)
                if len(evalshas) == 2:
                    break
    assert len(evalshas) == 2
    for cmd in evalshas:
        assert k.tag in cmd
        for j in range(6):
            if j != 5:
                assert q.engine._part_keys[j].tag not in cmd
    assert not q.exists(tag) and q.info(tag) is None and q.score(tag) is None
    for bad in (b"bytes", 5, "", "x" * 257):  # checked before routing: a clear error
        for method in (q.rank, q.score, q.state, q.exists, q.info, q.delete, q.result):
            with pytest.raises((InvalidArgument, TypeError)):
                method(bad)  # type: ignore[arg-type]


def test_unpartitioned_queue_keeps_its_key_names(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    q = make_queue()
    q.publish("x", tag="a")
    assert q.partitions == 1 and q.engine._part_keys == [q.engine._keys]
    assert keys_with_jobs(redis_client, prefix) == {
        f"{{{prefix}:q}}:{name}" for name in ("ready", "meta", "ctr", "notify", "stats")
    }
    assert redis_client.hget(q.engine._keys.ctr, "seq") == b"1"
    assert q.score("a") == 1.0  # the per-queue sequence, as before


# ---------------------------------------------------------------- global rank


def model_order(entries: dict[str, tuple[float, int]]) -> list[str]:
    """The global order: score, then partition, then tag bytes."""
    return sorted(entries, key=lambda t: (entries[t][0], entries[t][1], t.encode()))


OPS = st.lists(
    st.one_of(
        # publish: tag number, priority, raw score (from a tiny set, to force ties) or None
        st.tuples(
            st.just("publish"),
            st.integers(0, 40),
            st.integers(-2, 2),
            st.one_of(st.none(), st.sampled_from([-5.0, 0.0, 3.0])),
        ),
        # claim: from which partition, batch size
        st.tuples(st.just("claim"), st.integers(0, 5), st.integers(1, 3)),
        st.tuples(st.just("delete"), st.integers(0, 40)),
        st.tuples(st.just("release"), st.integers(0, 40)),
    ),
    min_size=1,
    max_size=40,
)


@pytest.mark.parametrize("n", [2, 5])
def test_global_rank_matches_a_model(n: int, redis_client: redis.Redis, prefix: str) -> None:
    """After any sequence of publishes (with priority ties and equal raw scores),
    claims from any partition, deletes and releases: every ready job's rank is its index
    in the model's global order, each partition hands out its jobs in that order (the
    model predicts every claim), and priority bands hold across partitions."""

    @hsettings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(ops=OPS)
    def run(ops: list[tuple[Any, ...]]) -> None:
        q = Queue("m", QueueOptions(partitions=n), prefix=prefix, client=redis_client)
        q.clear()
        ready: dict[str, tuple[float, int]] = {}  # tag -> (score, partition)
        leased: dict[str, Any] = {}
        claimed_at: dict[str, float] = {}  # tag -> its ready score when claimed
        last_computed: dict[int, float] = {}  # partition -> last computed seq (FIFO)
        for op in ops:
            if op[0] == "publish":
                _, num, priority, raw = op
                tag = f"j{num}"
                if tag in ready or tag in leased:
                    with pytest.raises(DuplicateJob):
                        q.publish(num, tag=tag, priority=priority, score=raw)
                    continue
                q.publish(num, tag=tag, priority=priority, score=raw)
                p = partition_of(tag, n)
                score = q.score(tag)
                assert score is not None
                if raw is None:
                    seq = score + priority * BAND
                    assert 0 < seq < BAND  # in its priority's band, on every partition
                    assert seq > last_computed.get(p, 0)  # FIFO within the partition
                    last_computed[p] = seq
                else:
                    assert score == raw
                ready[tag] = (score, p)
            elif op[0] == "claim":
                _, part, batch = op
                p = part % n
                mine = [t for t in model_order(ready) if ready[t][1] == p][:batch]
                msgs = q.engine._scripts.run(q.engine._shards[p].claim(batch, "c")).messages
                assert [m.tag for m in msgs] == mine
                for m in msgs:
                    leased[m.tag] = m
                    claimed_at[m.tag] = ready.pop(m.tag)[0]
            elif op[0] == "delete":
                tag = f"j{op[1]}"
                assert q.delete(tag) == (tag in ready)
                ready.pop(tag, None)
            else:
                tag = f"j{op[1]}"
                msg = leased.pop(tag, None)
                if msg is None:
                    continue
                assert q.release(msg)
                score = q.score(tag)
                assert score == claimed_at[tag]  # back at its place in line
                ready[tag] = (score, partition_of(tag, n))
            order = model_order(ready)
            assert [q.rank(t) for t in order] == list(range(len(order)))
            assert q.total_count() == len(order)
            ranked = [(t, s, p) for t, (s, p) in ((t, ready[t]) for t in order)]
            assert q.read.page("ready", 0, 100) == ranked
        # draining in global order: a consumer taking, each time, the job of rank 0
        while ready:
            head = model_order(ready)[0]
            assert q.rank(head) == 0
            p = ready[head][1]
            msgs = q.engine._scripts.run(q.engine._shards[p].claim(1, "c")).messages
            assert [m.tag for m in msgs] == [head]
            del ready[head]
        q.clear()

    run()


def redis_ms(client: redis.Redis) -> int:
    secs, micros = client.time()
    return int(secs) * 1000 + int(micros) // 1000


def test_fifo_across_partitions_follows_redis_time(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    """Strict mode on a partitioned queue takes its sequence from Redis TIME (ms), so a
    job entering any partition a few ms after another ranks behind it; within one
    partition the sequence stays strictly increasing even inside one ms."""
    q = make_queue(partitions=4)
    early = [tag_in(0, 4, stem=f"e{i}-") for i in range(5)]
    q.publish_many(range(5), tags=early)  # one script call: five numbers within one ms
    seqs = [q.score(t) for t in early]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    last = max(s for s in seqs if s is not None)
    # let Redis' clock move past the last sequence number handed out (bounded wait)
    epoch_ms = 1735689600000
    for _ in range(1000):
        if redis_ms(redis_client) - epoch_ms > last + 2:
            break
        time.sleep(0.002)
    late = tag_in(1, 4, stem="late")
    q.publish("late", tag=late)
    assert q.rank(late) == 5
    assert [q.rank(t) for t in early] == list(range(5))


EPOCH_MS = 1735689600000  # the partitioned strict sequence counts ms from 2025-01-01 UTC


def test_every_entry_into_ready_takes_the_clock_sequence(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    """publish, promotion of due delayed jobs (claim and scan, batched), nack's retry and
    requeue_dead all score partitioned strict-mode jobs with the clock sequence: in the
    priority's band, near Redis' clock, strictly increasing per partition."""
    q = make_queue(partitions=3, max_retries=1)
    later = [tag_in(p, 3, stem=f"l{p}-") for p in range(3) for _ in range(1)]
    later += [tag_in(0, 3, stem="l0b-"), tag_in(0, 3, stem="l0c-")]
    q.publish_many(range(len(later)), tags=later, priority=2, delay=3600)
    for t in later:  # due now: run-at far in the past
        redis_client.zadd(q.engine._keys_for(t).delayed, {t: 1})
    q.scan()  # promotes, batched per partition
    now = redis_ms(redis_client) - EPOCH_MS

    def seq(tag: str, priority: int) -> float:
        score = q.score(tag)
        assert score is not None
        return score + priority * BAND

    seqs = {t: seq(t, 2) for t in later}
    assert all(abs(v - now) < 600_000 for v in seqs.values())  # ms since 2025, not 1, 2, …
    zero = [t for t in later if partition_of(t, 3) == 0]
    assert len({seqs[t] for t in zero}) == len(zero)  # strictly increasing in a partition
    msgs, _ = q.claim(10)
    assert len(msgs) == len(later)
    m = msgs[0]
    before = seqs[m.tag]
    assert q.nack(m, "again", retry_in=0) == "retry"
    assert seq(m.tag, 2) > before
    assert (
        q.nack(
            q.engine._scripts.run(q.engine._shard_for(m.tag).claim(1, "c")).messages[0],
            "dead now",
            dead=True,
        )
        == "dead"
    )
    assert q.requeue_dead(m.tag)
    assert abs(seq(m.tag, 2) - now) < 600_000


def test_clock_sequence_budget_is_enforced(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue(partitions=2)
    tag = tag_in(1, 2)
    q.publish("warm", tag=tag_in(1, 2, stem="w"))
    redis_client.hset(q.engine._part_keys[1].ctr, "tseq", BAND - 1)
    with pytest.raises(SequenceExhausted, match="ZQ_SEQUENCE_EXHAUSTED"):
        q.publish("x", tag=tag)
    # no number used, nothing written (the scores are computed before any write)
    assert redis_client.hget(q.engine._part_keys[1].ctr, "tseq") == str(BAND - 1).encode()
    assert q.state(tag) is None and q.rank(tag) is None and q.info(tag) is None
    q.publish("other partition", tag=tag_in(0, 2))  # each partition has its own clock


def test_rank_counts_ties_by_partition(make_queue: QueueFactory) -> None:
    q = make_queue(partitions=3)
    tags = [tag_in(p, 3, stem=f"s{p}-") for p in (2, 0, 1)]
    for t in tags:
        q.publish(t, tag=t, score=7)
    low = tag_in(1, 3, stem="low")
    q.publish(low, tag=low, score=6)
    by_partition = sorted(tags, key=lambda t: partition_of(t, 3))
    assert q.rank(low) == 0
    assert [q.rank(t) for t in by_partition] == [1, 2, 3]
    info = q.info(by_partition[2])
    assert info is not None and info.rank == 3


def test_aging_mode_ranks_across_partitions(make_queue: QueueFactory) -> None:
    q = make_queue(partitions=4, priority_mode="aging", priority_aging_seconds=3600)
    tags = q.publish_many(range(20))
    urgent = q.publish("u", priority=1)
    assert q.rank(urgent) == 0
    scores = {t: q.score(t) for t in tags}
    order = sorted(tags, key=lambda t: (scores[t], partition_of(t, 4), t.encode()))
    assert [q.rank(t) for t in order] == list(range(1, 21))


# ---------------------------------------------------------------- consuming


def test_claim_round_robin_fills_a_batch_from_several_partitions(
    make_queue: QueueFactory,
) -> None:
    q = make_queue(partitions=4)
    tags = [tag_in(p, 4, stem=f"p{p}-") for p in range(4)]
    for t in tags:
        q.publish(t, tag=t)
    msgs, hint = q.claim(3, "c")
    assert len(msgs) == 3 and hint is None
    rest, _ = q.claim(3, "c")
    assert len(rest) == 1
    assert {m.tag for m in msgs + rest} == set(tags)
    assert q.claim(1)[0] == [] and q.claim(1)[1] is None
    for m in msgs + rest:
        assert q.ack(m)
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    assert q.stats()["acked"] == 4


def test_claim_starts_round_robin(make_queue: QueueFactory) -> None:
    q = make_queue(partitions=3)
    for p in range(3):
        for i in range(3):
            t = tag_in(p, 3, stem=f"r{p}x{i}-")
            q.publish(t, tag=t)
    seen = [partition_of(q.claim(1)[0][0].tag, 3) for _ in range(6)]
    assert seen[:3] == [(seen[0] + i) % 3 for i in range(3)]
    assert seen[3:] == seen[:3]


def test_delayed_nack_scan_dead_letters_across_partitions(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue(partitions=3, max_retries=0, visibility_timeout=60)
    later = q.publish("later", delay=3600)
    assert q.state(later) == "delayed" and q.counts()["delayed"] == 1
    dead_tags = []
    for i in range(6):
        t = q.publish(i, tag=f"d{i}")
        msg = q.get()
        assert msg is not None
        assert q.nack(msg, f"boom {i}") == "dead"
        dead_tags.append(t)
    letters = q.dead_letters()
    assert [d.tag for d in letters] == dead_tags[::-1]  # most recent first, merged
    assert [d.last_error for d in letters[:2]] == ["boom 5", "boom 4"]
    assert [d.tag for d in q.dead_letters(offset=2, limit=2)] == dead_tags[::-1][2:4]
    with pytest.raises(InvalidArgument, match="at most"):
        q.dead_letters(offset=MAX_MERGED, limit=1)
    assert q.requeue_dead("d0") and q.state("d0") == "ready"
    # an expired lease in some partition is recovered by scan
    msg = q.get()
    assert msg is not None and msg.tag == "d0"
    k = q.engine._keys_for("d0")
    redis_client.zadd(k.leased, {"d0": 1})
    result = q.scan()
    assert result.buried == 1 and result.recovered == 0  # max_retries 0: it dies
    assert q.purge_dead() == 6 and q.counts()["dead"] == 0
    minutes = q.minutes(2)
    assert minutes[-1]["enqueued"] == 7 and minutes[-1]["dead"] >= 6
    q.clear()
    assert keys_with_jobs(redis_client, q.prefix) == set()


# ---------------------------------------------------------------- changing N


def test_changing_partitions_with_jobs_is_refused(prefix: str, redis_client: redis.Redis) -> None:
    def make(n: int) -> Queue:
        return Queue("q", QueueOptions(partitions=n), prefix=prefix, client=redis_client)

    plain = make(1)
    plain.publish("old", tag="old")
    before = snapshot(redis_client, prefix)
    with pytest.raises(PartitionMismatch, match="partitions=4 but its jobs in Redis use"):
        make(4).publish("new")
    assert snapshot(redis_client, prefix) == before  # nothing written
    plain.delete("old")
    four = make(4)
    four.publish_many(range(10))
    for other in (make(8), make(1)):
        with pytest.raises(PartitionMismatch):
            other.engine.layout.check()
    with pytest.raises(PartitionMismatch):
        make(8).claim(1)
    # drained: the new layout is taken
    for _ in range(10):
        four.ack_many(four.claim(10)[0])
    assert four.counts()["ready"] == 0
    eight = make(8)
    eight.publish("x")
    assert redis_client.get(layout_key(prefix, "q")) == b"8"
    eight.clear()
    assert redis_client.get(layout_key(prefix, "q")) is None
    make(1).engine.layout.check()


# ---------------------------------------------------------------- worker and admin


@pytest.fixture
def partitioned_project(prefix: str) -> Iterator[dict[str, Any]]:
    queues = {**settings.ZQUEUE["QUEUES"], "default": {"partitions": 4}}
    value = {
        **settings.ZQUEUE,
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "QUEUES": queues,
        "ENQUEUE_ON_COMMIT": False,
    }
    with override_settings(ZQUEUE=value):
        yield value
    conf.reset()


def test_burst_worker_runs_every_job_of_a_partitioned_queue(
    partitioned_project: dict[str, Any], tmp_path: Path
) -> None:
    from django_zqueue.worker import Worker
    from testproject.demo import tasks

    ledger = tmp_path / "ledger"
    jobs = [tasks.stamp.enqueue(str(ledger), i) for i in range(40)]
    q = get_queue("default")
    assert q.partitions == 4
    assert {partition_of(j.id, 4) for j in jobs} == {0, 1, 2, 3}
    assert sorted(j.rank() for j in jobs) == list(range(40))
    result = tasks.add.enqueue(2, 3)
    w = Worker(["default"], burst=True, concurrency=2, scan_interval=0.05)
    w.run()
    assert w.processed == 41
    assert sorted(int(line.split()[0]) for line in ledger.read_text().splitlines()) == list(
        range(40)
    )
    assert result.result() == 5
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    assert q.stats()["acked"] == 41


@pytest.mark.django_db
def test_admin_pages_render_for_a_partitioned_queue(
    partitioned_project: dict[str, Any],
) -> None:
    from django.contrib.auth.models import User

    q = get_queue("default")
    tags = q.publish_many([{"task": "t", "args": [i], "kwargs": {}} for i in range(60)])
    urgent = q.publish({"task": "urgent"}, priority=5)
    q.publish({"task": "later"}, delay=3600)
    msg = q.claim(1)[0][0]  # the urgent job's partition may not come first: any job
    doomed = q.publish({"task": "doomed"}, tag="doomed", priority=10)  # head of its partition
    m = None
    for _ in range(4):  # round-robin: its partition comes within 4 claims
        m = q.get()
        assert m is not None
        if m.tag == "doomed":
            break
        q.release(m)
    assert m is not None and m.tag == "doomed"
    assert q.nack(m, "RuntimeError: x", dead=True) == "dead"
    c = Client()
    c.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    base = "/admin/django_zqueue/queue/"
    overview = c.get(base)
    assert overview.status_code == 200
    summary = {row["s"].name: row["s"] for row in overview.context["rows"]}["default"]
    assert (summary.ready, summary.delayed, summary.inflight, summary.dead) == (
        q.counts()["ready"],
        1,
        1,
        1,
    )
    r = c.get(f"{base}q/default/")
    assert r.status_code == 200
    page = r.context["page"]
    expected = sorted(
        (t for t in [*tags, urgent] if q.rank(t) is not None), key=lambda t: q.rank(t) or 0
    )
    assert [row.tag for row in page.rows] == expected[:50]
    assert [row.rank for row in page.rows] == list(range(50))
    assert page.total == len(expected) and page.pages == 2
    last = c.get(f"{base}q/default/?page=2").context["page"]
    assert [row.tag for row in last.rows] == expected[50:]
    for state in ("delayed", "leased", "dead"):
        tab = c.get(f"{base}q/default/?state={state}")
        assert tab.status_code == 200 and len(tab.context["page"].rows) == 1
    job = c.get(f"{base}q/default/job/?id={doomed}")
    assert job.status_code == 200 and "RuntimeError: x" in job.content.decode()
    found = c.get(f"{base}search/?q={expected[10]}")
    assert found.status_code in (200, 302)
    (loc,) = dashboard.locate([q], expected[10])
    assert loc.rank == 10 and loc.state == "ready"
    assert dashboard.locate([q], msg.tag)[0].state == "leased"
    # deep pages of a partitioned queue stop at MAX_MERGED jobs
    deep = dashboard.page(q, "ready", 10**6, 200, payload=False)
    assert deep.number == deep.pages <= MAX_MERGED // 200


def test_periodic_schedule_on_a_partitioned_queue(
    partitioned_project: dict[str, Any], redis_client: redis.Redis
) -> None:
    from django_zqueue.tasks.schedules import Schedule, Scheduler

    q = get_queue("default")
    s = Schedule(name="every", task="testproject.demo.tasks.noop", interval=60, queue="default")
    sched = Scheduler(["default"], schedules={"every": s})
    sched.sync()
    redis_client.zadd(q.engine._sched_keys.sched, {"every": 1000})  # due long ago
    sched.step()
    jobs = q.read.page("ready", 0, 10)
    assert len(jobs) == 1 and jobs[0][0].startswith("cron:every:") and jobs[0][2] == 0
    assert q.engine._sched_keys.tag == q.engine._part_keys[0].tag
    assert json.loads(redis_client.hget(q.engine._sched_keys.sched_defs, "every") or "{}")["task"]
    assert q.rank(jobs[0][0]) == 0 and q.exists(jobs[0][0])


def test_a_queue_name_cannot_hold_the_partition_separator() -> None:
    _, problems = conf.parse({"QUEUES": {"a#1": {}}})
    assert [p.id for p in problems] == ["django_zqueue.E004"]


def test_stats_and_minutes_sum_the_partitions(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue(partitions=2)
    minute = redis_ms(redis_client) // 60000
    slot, before = minute % 64, (minute - 1) % 64
    p0, p1 = (k.stats for k in q.engine._part_keys)
    redis_client.hset(p0, mapping={"enqueued": 3, f"m{slot}": minute, f"e{slot}": 3})
    redis_client.hset(p0, mapping={f"m{before}": minute - 1, f"e{before}": 2})
    # partition 1's slot still counts for the minute 64 minutes ago: not summed in
    redis_client.hset(p1, mapping={"enqueued": 5, f"m{slot}": minute - 64, f"e{slot}": 100})
    redis_client.hset(p1, mapping={f"m{before}": minute - 1, f"e{before}": 7, "acked": 1})
    assert q.stats() == {"enqueued": 8, "acked": 1}
    rows = q.minutes(2)
    if rows[-1]["minute"] != minute:  # the minute turned between the two reads
        return
    assert [r["enqueued"] for r in rows] == [9, 3]
