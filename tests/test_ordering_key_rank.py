"""``rank(within_key=True)``: a waiting job's place among the waiting jobs of its own
ordering key (``engine.order.rank``, ``lua/rank_key.lua``, the index ``{p:q}:okeyed``),
checked against the order the claim then runs them in, against a real Redis (single or
Cluster: ``ZQUEUE_TEST_TOPOLOGY=cluster``)."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest
import redis

from django_zqueue.engine.records import Record
from django_zqueue.engine.records.spec import JobOptions
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue

from .conftest import snapshot
from .test_ordering_key import claim_all, publish


def key_ranks(q: Queue, tags: list[str]) -> dict[str, dict[int, str]]:
    """Each key's waiting jobs by their rank within the key (None ranks left out)."""
    out: dict[str, dict[int, str]] = defaultdict(dict)
    for tag in tags:
        key = key_of(q, tag)
        rank = None if key is None else q.rank(tag, within_key=True)
        if key is not None and rank is not None:
            assert rank not in out[key], f"two jobs of {key} at rank {rank}"
            out[key][rank] = tag
    return out


def run_order(q: Queue, most: int = 500) -> dict[str, list[str]]:
    """Claim and ack until nothing is left; each key's jobs in the order they ran."""
    ran: dict[str, list[str]] = defaultdict(list)
    for _ in range(most):
        msgs = claim_all(q)
        if not msgs:
            if not _waiting(q):
                break
            for tag in q.engine._client.zrange(q.engine._keys.delayed, 0, 99):
                q.run_now(tag.decode())  # a retry's backoff, made due
            continue
        for m in msgs:
            key = key_of(q, m.tag)
            if key is not None:
                ran[key].append(m.tag)
            q.ack(m)
    return ran


def key_of(q: Queue, tag: str) -> str | None:
    raw = q.engine._client.hget(q.engine._keys.meta, tag)
    record = Record.decode(raw) if raw is not None else None
    return None if record is None else record.ordering_key


def _waiting(q: Queue) -> bool:
    c, k = q.engine._client, q.engine._keys
    return bool(c.zcard(k.ready) or c.zcard(k.wait) or c.zcard(k.delayed))


def assert_ranks_match_the_run(q: Queue, tags: list[str]) -> dict[str, dict[int, str]]:
    ranks = key_ranks(q, tags)
    for key, by_rank in ranks.items():
        assert sorted(by_rank) == list(range(len(by_rank))), f"{key}: ranks 0..n-1"
    ran = run_order(q)
    for key, by_rank in ranks.items():
        expected = [by_rank[i] for i in range(len(by_rank))]
        assert ran[key][-len(expected) :] == expected, key
    return ranks


# ------------------------------------------------------------------ the answer


def test_ranks_within_each_key_follow_enqueue_order(q: Queue) -> None:
    tags = []
    for i in range(3):
        tags += [publish(q, f"a{i}", "A"), publish(q, f"b{i}", "B"), publish(q, f"n{i}", None)]
    a = tags[0::3]
    assert [q.rank(t, within_key=True) for t in a] == [0, 1, 2]
    assert q.rank(tags[1], within_key=True) == 0  # b0
    assert q.rank(tags[4], within_key=True) == 1  # b1
    assert_ranks_match_the_run(q, tags)


def test_set_aside_jobs_are_ranked_and_a_running_holder_is_not(q: Queue) -> None:
    tags = [publish(q, f"a{i}", "A") for i in range(4)]
    (m,) = claim_all(q)  # a0 runs, a1..a3 set aside
    assert q.state(tags[1]) == "waiting" and q.rank(tags[1]) is None
    assert q.rank(tags[0], within_key=True) is None  # running: as rank() says
    assert [q.rank(t, within_key=True) for t in tags[1:]] == [0, 1, 2]
    q.ack(m)
    assert q.rank(tags[0], within_key=True) is None  # finished
    assert [q.rank(t, within_key=True) for t in tags[1:]] == [0, 1, 2]
    assert_ranks_match_the_run(q, tags)


def test_job_rank_within_key_and_its_errors(
    redis_client: redis.Redis, prefix: str, project: dict[str, str]
) -> None:
    from django_zqueue.queue import get_queue
    from django_zqueue.tasks.job import Job

    q = get_queue("default")
    keyed = publish(q, 1, "A")
    plain = q.publish(2)
    job = Job(keyed, q.name)
    assert job.rank(within_key=True) == 0 and job.rank() == 0
    assert Job(plain, q.name).rank() == 1
    before = snapshot(redis_client, prefix)
    with pytest.raises(InvalidArgument, match="has no ordering key"):
        q.rank(plain, within_key=True)
    assert snapshot(redis_client, prefix) == before  # a read: nothing written
    assert q.rank("nosuch", within_key=True) is None


def test_priorities_order_a_keys_waiting_jobs_but_never_pass_the_holder(q: Queue) -> None:
    tags = [publish(q, f"a{i}", "A") for i in range(3)]
    (m,) = claim_all(q)  # a0 holds the key
    urgent = publish(q, "urgent", "A", priority=10)
    tags.append(urgent)
    assert q.rank(urgent, within_key=True) == 0  # ahead of a1, a2 (not of the holder)
    assert q.rank(tags[1], within_key=True) == 1
    q.ack(m)
    assert_ranks_match_the_run(q, tags)


def test_a_retried_holder_back_in_line_comes_first(q: Queue) -> None:
    tags = [publish(q, f"a{i}", "A", max_retries=3) for i in range(3)]
    (m,) = claim_all(q)
    q.nack(m, "boom")  # retried after a backoff: delayed, still the key's holder
    assert q.state(tags[0]) == "delayed"
    assert q.rank(tags[0], within_key=True) is None  # not waiting in line
    assert [q.rank(t, within_key=True) for t in tags[1:]] == [0, 1]
    q.run_now(tags[0])  # back in ready, in no index (claimed once): still its key's holder
    later = publish(q, "a3", "A", priority=50)  # ahead of the holder in the line ...
    assert q.rank(later) == 0 and q.rank(tags[0]) == 1
    assert q.rank(tags[0], within_key=True) == 0  # ... never in its key's
    assert q.rank(later, within_key=True) == 1
    assert_ranks_match_the_run(q, [*tags, later])


def test_a_job_set_aside_then_brought_back(q: Queue) -> None:
    tags = [publish(q, f"a{i}", "A") for i in range(3)]
    (m,) = claim_all(q)
    q.ack(m)  # the holder ended: the first job set aside counts as the key's next
    assert [q.rank(t, within_key=True) for t in tags[1:]] == [0, 1]
    first = q.publish("first", priority=100)
    msgs, _ = q.claim(1, "c")  # brings a1 back to ready, leases `first`
    assert [x.tag for x in msgs] == [first]
    assert q.state(tags[1]) == "ready" and q.state(tags[2]) == "waiting"
    assert [q.rank(t, within_key=True) for t in tags[1:]] == [0, 1]
    q.ack(msgs[0])
    assert_ranks_match_the_run(q, tags)


def test_cancelled_and_deleted_jobs_do_not_count_and_leave_the_index(
    q: Queue, redis_client: redis.Redis
) -> None:
    tags = [publish(q, f"a{i}", "A") for i in range(5)]
    assert q.cancel(tags[1]) and q.delete(tags[3])
    assert q.rank(tags[1], within_key=True) is None
    assert [q.rank(t, within_key=True) for t in (tags[0], tags[2], tags[4])] == [0, 1, 2]
    (m,) = claim_all(q)
    assert q.cancel(tags[2])  # cancelled while set aside
    assert q.rank(tags[4], within_key=True) == 0
    q.ack(m)
    assert_ranks_match_the_run(q, tags)
    k = q.engine._keys
    for _ in range(200):  # the claim sweeps a few random entries each call (bounded)
        if not redis_client.exists(k.okeyed):
            break
        q.claim(1, "c")
    assert not redis_client.exists(k.okeyed, k.ohold, k.oaside)


def test_delayed_jobs_join_their_keys_line_when_due(q: Queue) -> None:
    a0 = publish(q, "a0", "A")
    later = publish(q, "later", "A", delay=60)
    assert q.rank(later, within_key=True) is None
    q.run_now(later)  # due now, at the head of the line: its key's next
    assert [q.rank(later, within_key=True), q.rank(a0, within_key=True)] == [0, 1]
    assert_ranks_match_the_run(q, [a0, later])


def test_a_publish_without_a_key_writes_no_index(q: Queue, redis_client: redis.Redis) -> None:
    q.publish(1)
    q.publish_prepared([q.prepare(2), q.prepare(3)])
    assert not redis_client.exists(q.engine._keys.okeyed)
    shard = q.engine._shards[0]
    call = shard.publish([q.prepare(4)])
    assert q.engine._keys.okeyed not in call.keys  # no extra key, no extra command
    keyed = shard.publish([q.prepare(5), q.prepare(6, options=JobOptions(ordering_key="A"))])
    assert keyed.keys[-1] == q.engine._keys.okeyed


def test_publish_once_indexes_a_keyed_job(q: Queue, redis_client: redis.Redis) -> None:
    a0 = publish(q, "a0", "A")
    job = q.prepare("x", tag="once", options=JobOptions(ordering_key="A"))
    q.publish_once(job, unique_for=60)
    assert redis_client.zscore(q.engine._keys.okeyed, "A\0once") == 0
    assert q.rank("once", within_key=True) == 1 and q.rank(a0, within_key=True) == 0
    q.publish_once(job, debounce=60)  # debounced: delayed, not waiting in line
    assert q.rank("once", within_key=True) is None


def test_a_job_written_before_the_index_is_unknown_not_wrong(
    q: Queue, redis_client: redis.Redis
) -> None:
    a0 = publish(q, "a0", "A")
    old = publish(q, "old", "A")
    redis_client.zrem(q.engine._keys.okeyed, f"A\0{old}")  # as an older release wrote it
    assert q.rank(a0, within_key=True) == 0
    with pytest.raises(LookupError, match="unknown: it is in no index"):
        q.rank(old, within_key=True)
    (m,) = claim_all(q)  # once set aside behind its key, its place is known again
    assert q.rank(old, within_key=True) == 0
    q.ack(m)


def test_a_key_past_the_bound_is_unknown(q: Queue) -> None:
    tags = [publish(q, i, "A") for i in range(3)]
    shard = q.engine._shards[0]
    assert q.engine.run(shard.rank_key(tags[2], 3)) == [0, 2]
    assert q.engine.run(shard.rank_key(tags[2], 2)) == [4]
    with pytest.raises(Exception, match="most must be an integer"):
        q.engine.run(shard.rank_key(tags[2], 0))


@pytest.mark.parametrize("seed", [7, 8])
def test_random_histories_rank_as_they_run(q: Queue, seed: int) -> None:
    """Adversarial: random publishes (keys, priorities, delays made due), claims that set
    aside, retries, cancels and deletes; then every waiting job's rank within its key is
    the order the claim runs them in."""
    rng = random.Random(seed)
    for round_ in range(4):
        tags: list[str] = []
        held: list[Any] = []
        for i in range(30):
            op = rng.random()
            if op < 0.6 or not tags:
                key = rng.choice(["A", "B", "C"])
                prio = rng.choice([0, 0, 0, 5, -5])
                delay = rng.choice([None, None, None, 60])
                tags.append(
                    publish(q, f"{round_}.{i}", key, priority=prio, delay=delay, max_retries=9)
                )
            elif op < 0.75:
                held += claim_all(q, rng.choice([1, 3, 10]))
            elif op < 0.85 and held:
                m = held.pop(rng.randrange(len(held)))
                if rng.random() < 0.5:
                    q.ack(m)
                else:
                    q.nack(m, "boom", retry_in=rng.choice([0, 60]))
            elif op < 0.92:
                q.cancel(rng.choice(tags))
            else:
                q.delete(rng.choice(tags))
        for t in tags:
            if q.state(t) == "delayed":
                q.run_now(t)
        for m in held:
            q.ack(m)
        assert_ranks_match_the_run(q, tags)


def test_arank_within_key_from_asyncio(project: dict[str, str]) -> None:
    from asgiref.sync import async_to_sync

    from django_zqueue.queue import get_queue
    from django_zqueue.tasks.job import Job

    q = get_queue("default")
    tags = [publish(q, i, "A") for i in range(3)]
    (m,) = claim_all(q)  # the first runs: the others are set aside, out of the line
    jobs = [Job(t, q.name) for t in tags]
    assert [async_to_sync(j.arank)(within_key=True) for j in jobs] == [None, 0, 1]
    assert async_to_sync(jobs[1].arank)() is None  # set aside: not in the queue's line
    with pytest.raises(InvalidArgument, match="has no ordering key"):
        async_to_sync(Job(q.publish(9), q.name).arank)(within_key=True)
    q.ack(m)
