"""ack_many.lua: a flush's acks in one script call, each exactly as ack.lua would do it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from django_zqueue.engine.records import Ack
from django_zqueue.engine.records.spec import pack_map
from django_zqueue.exceptions import InvalidArgument, ScriptArgumentError
from django_zqueue.queue import Message, Queue

from .conftest import QueueFactory, snapshot
from .records_util import to_json_layout


def claim(q: Queue, n: int, consumer: str = "") -> list[Message]:
    msgs, _ = q.claim(n, consumer)
    assert len(msgs) == n
    return msgs


def send(q: Queue, acks: list[Ack]) -> list[bool]:
    batch = q.engine.batch()
    parts = q.engine.consume.add_acks(batch, acks)
    q.engine.send(batch)
    return [p.result() for p in parts]


def test_acks_results_and_stats_like_single_acks(q: Queue, redis_client: redis.Redis) -> None:
    q.publish_many(range(4))
    a, b, c, d = claim(q, 4)
    acks = [
        q.engine.consume.make_ack(a, {"x": 1}, 60, run_ms=5),
        q.engine.consume.make_ack(b, run_ms=7),
        q.engine.consume.make_ack(c, [1, 2], 0.5, run_ms=None),
        Ack(d),
    ]
    assert send(q, acks) == [True, True, True, True]
    assert q.result(a.tag) == {"x": 1} and q.result(c.tag) == [1, 2]
    for kept_none in (b, d):
        with pytest.raises(LookupError):
            q.result(kept_none.tag)
    assert 0 < redis_client.pttl(q.engine._keys.result(c.tag)) <= 500
    assert 59_000 < redis_client.pttl(q.engine._keys.result(a.tag)) <= 60_000
    stats = q.stats()
    assert stats["acked"] == 4 and stats["run_ms"] == 12
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    for key in (
        q.engine._keys.body,
        q.engine._keys.meta,
        q.engine._keys.errors,
        q.engine._keys.progress,
    ):
        assert redis_client.hlen(key) == 0
    assert send(q, acks) == [False] * 4  # a replay is stale: nothing counted twice
    assert q.stats()["acked"] == 4


def test_a_stale_delivery_is_skipped_and_the_others_acked(q: Queue) -> None:
    q.publish_many(range(3))
    a, b, c = claim(q, 3)
    assert q.release(b)  # b is back in line: its delivery is stale
    (b2,) = claim(q, 1)
    assert b2.tag == b.tag and b2.token != b.token
    assert q.ack_many([a, b, c]) == [True, False, True]
    assert q.state(b.tag) == "leased" and q.stats()["acked"] == 2
    assert q.ack_many([b2]) == [True]


def test_a_job_listed_twice_is_acked_once(q: Queue) -> None:
    q.publish("x")
    (m,) = claim(q, 1)
    assert q.ack_many([m, m]) == [True, False]
    assert q.stats()["acked"] == 1


def test_a_token_that_is_a_prefix_of_the_real_one_is_stale(q: Queue) -> None:
    q.publish_many(range(12))
    msgs = claim(q, 12)
    last = msgs[-1]
    assert last.token >= 10
    fake = last._replace(token=int(str(last.token)[:-1]))  # 12 -> 1: a prefix of the text
    assert q.ack_many([fake]) == [False]
    assert q.state(last.tag) == "leased"


def test_a_consumer_id_cannot_fake_the_token(q: Queue) -> None:
    """The consumer id is free text kept in the record: a quote in it is escaped, so a
    crafted id cannot make `"t":<token>` appear as a field."""
    q.publish("x")
    (m,) = claim(q, 1, consumer='w","t":999999,"z":{"t":999999}')
    fake = m._replace(token=999999)
    assert q.ack_many([fake]) == [False]
    assert q.ack_many([m]) == [True]


def test_a_token_written_otherwise_is_read_by_decoding(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("x")
    (m,) = claim(q, 1)
    to_json_layout(redis_client, q.engine._keys, m.tag)  # a record of the JSON layout, read as text
    meta = json.loads(redis_client.hget(q.engine._keys.meta, m.tag))  # type: ignore[arg-type]
    text = json.dumps(meta).replace(f'"t": {m.token}', f'"t": {m.token}.0')
    redis_client.hset(q.engine._keys.meta, m.tag, text)  # same number, other text
    assert q.ack_many([m]) == [True]


@pytest.mark.parametrize("meta", [b"not json", b"[1,2]", b'{"a":1}', b""])
def test_a_corrupt_record_is_stale_and_left_for_the_scanner(
    q: Queue, redis_client: redis.Redis, meta: bytes
) -> None:
    q.publish_many(range(2))
    a, b = claim(q, 2)
    redis_client.hset(q.engine._keys.meta, a.tag, meta)
    assert q.ack_many([a, b]) == [False, True]
    assert redis_client.zscore(q.engine._keys.leased, a.tag) is not None


def test_more_than_a_chunk_goes_in_several_calls(q: Queue) -> None:
    q.publish_many(range(250))
    msgs = [m for _ in range(3) for m in q.claim(100)[0]]
    assert len(msgs) == 250
    assert q.ack_many(msgs) == [True] * 250
    assert q.stats()["acked"] == 250


def test_partitioned_queue_acks_per_shard(make_queue: QueueFactory) -> None:
    q = make_queue("parts", partitions=3)
    tags = q.publish_many(range(30))
    msgs, _ = q.claim(30)
    assert len(msgs) == 30
    assert q.ack_many(list(reversed(msgs))) == [True] * 30
    assert all(q.state(t) is None for t in tags)


def test_bad_result_ttl_is_refused_before_anything_is_sent(q: Queue) -> None:
    q.publish("x")
    (m,) = claim(q, 1)
    for ttl in (0, -1, float("nan"), 10 * 365 * 86400 + 1, "1"):
        with pytest.raises(InvalidArgument):
            q.engine.consume.make_ack(m, {"r": 1}, ttl)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        q.ack(m, {"r": 1}, 0)
    assert q.state(m.tag) == "leased"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda keys, job: (keys, job[:1]),  # no job
        lambda keys, job: (keys, [*job[:1], b"x"]),  # columns that are not a map
        lambda keys, job: (keys, [*job[:1], job[1], job[1]]),  # two column maps
        lambda keys, job: (keys, cols_with(job, id=None)),  # no id column
        lambda keys, job: (keys, cols_with(job, token=None)),  # no token column
        lambda keys, job: (keys, cols_with(job, id=[7])),  # an id that is not a text
        lambda keys, job: (keys, cols_with(job, id="abc")),  # a column that is not a list
        lambda keys, job: (keys, cols_with(job, token=["x"])),  # token not a number
        lambda keys, job: (keys, cols_with(job, token=[1.5])),  # token not an integer
        lambda keys, job: (keys, cols_with(job, token=[1, 2])),  # a column too long
        lambda keys, job: (keys, cols_with(job, run_ms=[])),  # a column too short
        lambda keys, job: (keys, cols_with(job, result=[7])),  # a result that is not a text
        lambda keys, job: (keys, cols_with(job, ttl_ms=None)),  # results without TTLs
        lambda keys, job: ([*keys[:7], *keys[8:]], job[:2]),  # a result key missing
        lambda keys, job: (keys[:-1], job[:2]),  # a history key missing
        lambda keys, job: (keys, [b"x", job[1]]),  # a policy that is not a map
        lambda keys, job: (keys, cols_with(job, ttl_ms=[0])),  # TTL 0
        lambda keys, job: (keys, cols_with(job, run_ms=[1.5])),  # run time not an integer
        lambda keys, job: (keys, cols_with(job, run_ms=[-2])),  # run time below -1
        lambda keys, job: (keys, cols_with(job, run_ms=[False])),  # run time not a number
        lambda keys, job: (keys, cols_with(job, id=["a"] * 101, token=[1] * 101)),  # 101 jobs
    ],
)
def test_malformed_arguments_write_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str, mutate: Any
) -> None:
    q.publish("x")
    (m,) = claim(q, 1)
    ack = q.engine.consume.make_ack(m, {"r": 1}, 60, 3)
    call = q.engine._shards[0].ack_many([ack])
    columns = {
        "id": [m.tag],
        "token": [m.token],
        "result": [ack.result],
        "ttl_ms": [60_000],
        "run_ms": [3],
    }
    assert call.args[1] == pack_map(columns)  # the jobs' columns, by name
    # the call's args, then the columns to change (cols_with reads them from the end)
    keys, args = mutate(list(call.keys), [*call.args, columns])
    before = snapshot(redis_client, prefix)
    with pytest.raises(ScriptArgumentError):
        q.engine.run(call._replace(keys=tuple(keys), args=tuple(args)))
    assert snapshot(redis_client, prefix) == before


def cols_with(job: list[Any], **change: Any) -> list[Any]:
    """The call's args (``job[:2]``: the policy, the jobs) with the jobs' columns made of
    ``job[2]``'s and ``change`` (None: the column left out)."""
    columns = {n: v for n, v in {**job[2], **change}.items() if v is not None}
    return [*job[:1], pack_map(columns)]


def test_the_columns_leave_out_what_no_job_has(q: Queue) -> None:
    """No result and no run time in the batch: the call sends only ids and tokens; a
    batch that mixes jobs with and without them sends their columns with placeholders
    ('' and 0 for no result, -1 for a run time not measured), and each job gets its own."""
    q.publish_many(range(3))
    a, b, c = claim(q, 3)
    plain = q.engine._shards[0].ack_many([Ack(a), Ack(b)])
    assert plain.args[1] == pack_map({"id": [a.tag, b.tag], "token": [a.token, b.token]})
    mixed = q.engine._shards[0].ack_many([Ack(a), Ack(b, '"r"', 60_000, 4), Ack(c, run_ms=7)])
    assert mixed.args[1] == pack_map(
        {
            "id": [a.tag, b.tag, c.tag],
            "token": [a.token, b.token, c.token],
            "result": ["", '"r"', ""],
            "ttl_ms": [0, 60_000, 0],
            "run_ms": [-1, 4, 7],
        }
    )
    assert q.engine.run(mixed) == [1, 1, 1]
    assert q.result(b.tag) == "r"
    for other in (a, c):
        with pytest.raises(LookupError):
            q.result(other.tag)
    assert q.stats()["run_ms"] == 11


def test_worker_flush_uses_one_call_per_shard(q: Queue) -> None:
    """What a worker's flush sends: the acks of a batch in one script call."""
    q.publish_many(range(20))
    msgs = claim(q, 20)
    batch = q.engine.batch()
    parts = q.engine.consume.add_acks(batch, [q.engine.consume.make_ack(m, run_ms=1) for m in msgs])
    assert len(batch) == 1
    q.engine.send(batch)
    assert [p.result() for p in parts] == [True] * 20


def test_a_record_only_ack_lua_handles_is_acked_by_it(q: Queue, redis_client: redis.Redis) -> None:
    """A unique_for job (record field `u`): ack_many leaves it untouched (code 2) and
    settle_acks acks it with ack.lua, which writes the reservation."""
    q.publish("plain", tag="p")
    q.publish("once", tag="u", unique_for=60)
    p, u = claim(q, 2)
    call = q.engine._shards[0].ack_many([Ack(p), Ack(u)])
    assert q.engine.run(call) == [1, 2]
    assert q.state("u") == "leased" and not redis_client.exists(q.engine._keys.unique("u"))
    assert q.ack_many([u]) == [True]
    assert 0 < redis_client.pttl(q.engine._keys.unique("u")) <= 60_000
    assert q.stats()["acked"] == 2


def test_the_worker_path_settles_what_ack_many_left(q: Queue, redis_client: redis.Redis) -> None:
    q.publish_many(range(3))
    q.publish("once", tag="u", unique_for=60)
    msgs = claim(q, 4)
    batch = q.engine.batch()
    replies = q.engine.consume.add_acks(
        batch, [q.engine.consume.make_ack(m, {"r": m.tag}, 60) for m in msgs]
    )
    q.engine.send(batch)
    q.engine.consume.settle_acks(replies)
    assert [r.result() for r in replies] == [True] * 4
    assert q.result("u") == {"r": "u"} and redis_client.exists(q.engine._keys.unique("u"))
    assert q.stats()["acked"] == 4


def test_a_field_name_inside_a_string_is_not_a_field(q: Queue) -> None:
    """A consumer id holding `,"u":` does not send a plain job to ack.lua."""
    q.publish("x")
    (m,) = claim(q, 1, consumer='w,"u":1,"k":1')
    assert q.engine.run(q.engine._shards[0].ack_many([Ack(m)])) == [1]
