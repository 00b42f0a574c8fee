"""The engine's verbs on the asyncio client (``AsyncEngine``, ``engine/aio.py``): the same
answers as the sync queue on one Redis, unpartitioned and partitioned; what one publish
call cannot hold refused before anything is written; the claim plan the worker's
event-loop lane sends with its outcomes (the engine's chunk, a fair queue's too); each
reply of a round trip in its own place; an outage as ``QueueUnavailable``. Against a real
Redis."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from redis.exceptions import ResponseError

from django_zqueue import conf
from django_zqueue.conf.bounds import PUBLISH_CALL_BYTES
from django_zqueue.engine import CLAIM_CHUNK, FAIR_CLAIM_CHUNK, PUBLISH_CHUNK
from django_zqueue.engine.aio import AsyncEngine
from django_zqueue.engine.keys import partition_of
from django_zqueue.engine.redis.aconnection import make_async_client
from django_zqueue.engine.scripts import Calls
from django_zqueue.exceptions import InvalidArgument, QueueUnavailable
from django_zqueue.queue import Queue

from .conftest import snapshot

T = TypeVar("T")


def on_engine(q: Queue, scenario: Callable[[AsyncEngine], Awaitable[T]]) -> T:
    """Run ``scenario`` with an AsyncEngine of ``q`` on an asyncio client of its own."""

    async def main() -> T:
        client = make_async_client(conf.get_config())  # a cluster client on a cluster
        try:
            return await scenario(AsyncEngine(q.engine, client))
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("partitions", [1, 3])
def test_the_async_verbs_answer_as_the_sync_queue_does(
    make_queue: Any, zqueue_settings: dict[str, Any], partitions: int
) -> None:
    q: Queue = make_queue("verbs", partitions=partitions)
    tags = q.publish_many([{"i": i} for i in range(12)])
    q.publish({"i": "later"}, tag="later", delay=600)

    async def reads(ae: AsyncEngine) -> list[tuple[Any, ...]]:
        out = []
        for t in [*tags, "later", "nothing"]:
            out.append((await ae.state(t), await ae.score(t), await ae.rank(t), await ae.info(t)))
        return out

    assert on_engine(q, reads) == [
        (q.state(t), q.score(t), q.rank(t), q.info(t)) for t in [*tags, "later", "nothing"]
    ]

    async def consume(ae: AsyncEngine) -> dict[str, Any]:
        msgs, hint = await ae.claim(5, "c1")
        got: dict[str, Any] = {"claimed": [m.tag for m in msgs], "hint": hint}
        got["ack"] = await ae.ack(msgs[0], {"r": 1}, 60)
        got["stale_ack"] = await ae.ack(msgs[0])
        got["result"] = await ae.result(msgs[0].tag)
        got["nack"] = await ae.nack(msgs[1], "boom", dead=True)
        got["release"] = await ae.release(msgs[2])
        got["touch"] = await ae.touch(msgs[3], extend=30, progress=0.5, note="half")
        got["stale_touch"] = await ae.touch(msgs[0])
        got["cancel"] = await ae.cancel(msgs[4].tag, 60_000)
        got["cancel_gone"] = await ae.cancel("nothing", 60_000)
        got["record"] = await ae.cancelled(msgs[4].tag)
        got["no_record"] = await ae.cancelled(msgs[0].tag)
        return got

    got = on_engine(q, consume)
    claimed = got["claimed"]
    assert len(claimed) == 5 and len(set(claimed)) == 5 and got["hint"] is None
    assert got["ack"] is True and got["stale_ack"] is False
    assert got["result"] == {"r": 1} == q.result(claimed[0])
    assert got["nack"] == "dead" and q.state(claimed[1]) == "dead"
    assert got["release"] is True and q.state(claimed[2]) == "ready"
    touched = q.info(claimed[3])
    assert touched is not None and touched.lease_deadline == got["touch"]
    assert touched.progress is not None and touched.progress["n"] == "half"
    assert got["stale_touch"] is None
    assert got["cancel"] is True and got["cancel_gone"] is False
    assert got["record"] == q.cancelled(claimed[4]) and got["record"] is not None
    assert got["record"].was == "leased" and got["no_record"] is None


def test_a_result_that_is_not_json_or_not_kept_raises_as_the_sync_one(
    make_queue: Any, redis_client: Any, zqueue_settings: dict[str, Any]
) -> None:
    q: Queue = make_queue("results")
    redis_client.set(q.engine._keys.result("bad"), b"\xff not json")
    for tag in ("bad", "none"):

        async def read(ae: AsyncEngine, tag: str = tag) -> Any:
            return await ae.result(tag)

        with pytest.raises(Exception) as sync_error:
            q.result(tag)
        with pytest.raises(Exception) as async_error:
            on_engine(q, read)
        assert type(async_error.value) is type(sync_error.value)
        assert str(async_error.value) == str(sync_error.value)


def test_publish_refuses_what_one_call_cannot_hold_and_writes_nothing(
    make_queue: Any, redis_client: Any, prefix: str, zqueue_settings: dict[str, Any]
) -> None:
    q: Queue = make_queue("pub", partitions=4)
    tags = [f"t{i}" for i in range(40)]
    apart = next(t for t in tags if partition_of(t, 4) != partition_of(tags[0], 4))
    together = [t for t in tags if partition_of(t, 4) == partition_of(tags[0], 4)]
    mixed = [q.prepare({"x": 1}, tags[0]), q.prepare({"x": 2}, apart)]
    one_shard = [q.prepare({"x": i}, t) for i, t in enumerate(together)]
    assert len(one_shard) >= 2
    many = [q.prepare({"x": i}) for i in range(PUBLISH_CHUNK + 1)]
    half = "h" * (PUBLISH_CALL_BYTES // 2)
    heavy = [q.prepare(half, together[0]), q.prepare(half, together[1])]  # past the bytes
    before = snapshot(redis_client, prefix)

    async def refused(ae: AsyncEngine) -> list[bool]:
        fits = [
            ae.fits_one_call(mixed),
            ae.fits_one_call(many),
            ae.fits_one_call(heavy),
            ae.fits_one_call(heavy[:1]),
            ae.fits_one_call(one_shard),
        ]
        for jobs in (mixed, many, heavy, []):
            with pytest.raises(InvalidArgument):
                await ae.publish(jobs)
        return fits

    assert on_engine(q, refused) == [False, False, False, True, True]
    assert snapshot(redis_client, prefix) == before
    found = on_engine(q, lambda ae: ae.publish(one_shard))
    assert found == [] and all(q.state(t) == "ready" for t in together)
    again = on_engine(q, lambda ae: ae.publish(one_shard[:1]))
    assert again == [(together[0], "ready")]  # a clash: nothing written, said by tag


@pytest.mark.parametrize(
    ("options", "chunk"), [({}, CLAIM_CHUNK), ({"fairness": "groups"}, FAIR_CLAIM_CHUNK)]
)
def test_the_lanes_claim_plan_leases_one_chunk_at_most(
    make_queue: Any, zqueue_settings: dict[str, Any], options: dict[str, Any], chunk: int
) -> None:
    """The event-loop lane sends the engine's claim plan with its outcomes: one call of at
    most the engine's chunk (40 on a fair queue, whose claim does more per job)."""
    q: Queue = make_queue("plan", **options)
    q.publish_many([{"i": i} for i in range(chunk + 20)])

    async def lane(ae: AsyncEngine) -> tuple[int, float | None, int]:
        plan = ae.plan_claim(1000, "lane")
        assert plan is not None and plan.batch == 1000
        calls = Calls()
        first = calls.add(plan.call)
        await ae.send_calls(calls)
        msgs, hint = await ae.claim_rest(plan, first.result())
        return len(msgs), hint, len({m.tag for m in msgs})

    assert on_engine(q, lane) == (chunk, None, chunk)
    assert q.counts()["inflight"] == chunk


def test_on_a_partitioned_queue_the_claim_goes_on_over_the_shards(
    make_queue: Any, zqueue_settings: dict[str, Any]
) -> None:
    q: Queue = make_queue("spread", partitions=3)
    q.publish_many([{"i": i} for i in range(30)])

    async def claims(ae: AsyncEngine) -> tuple[bool, int, int, float | None]:
        no_plan = ae.plan_claim(10, "lane") is None  # (its claim is ae.claim, after)
        plan = q.engine.consume.plan_claim(25, "lane")  # a first call on one shard, of 10 jobs
        calls = Calls()
        first = calls.add(plan.call)
        await ae.send_calls(calls)
        msgs, hint = await ae.claim_rest(plan, first.result())
        rest, rest_hint = await ae.claim(10, "lane")
        assert rest_hint is None
        return no_plan, len({m.tag for m in msgs}), len(rest), hint

    assert on_engine(q, claims) == (True, 25, 5, None)
    assert q.counts()["inflight"] == 30 and q.counts()["ready"] == 0
    _, hint = on_engine(q, lambda ae: ae.claim(5, "lane"))
    assert hint is None  # nothing ready, nothing delayed: no hint


def test_send_calls_puts_each_reply_in_its_place_an_error_in_its_own(
    make_queue: Any, redis_client: Any, zqueue_settings: dict[str, Any]
) -> None:
    good: Queue = make_queue("good")
    bad: Queue = make_queue("bad")
    tag = good.publish({"x": 1})
    redis_client.set(bad.engine._keys.ready, "not a sorted set")

    async def batch(ae: AsyncEngine) -> tuple[Any, ...]:
        calls = Calls()
        before = calls.add(good.engine.consume.state_call(tag))
        broken = calls.add(bad.engine._shards[0].claim(1, "lane"))
        after = calls.add(good.engine.consume.info_call(tag))
        await ae.send_calls(calls)
        return before.result(), broken.failed, after.result()

    state, failed, info = on_engine(good, batch)
    assert state == "ready" and info is not None and info.tag == tag
    assert isinstance(failed, ResponseError) and "WRONGTYPE" in str(failed)


def test_an_outage_is_queue_unavailable_for_every_verb(
    make_queue: Any, zqueue_settings: dict[str, Any]
) -> None:
    import redis.asyncio as aredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    q: Queue = make_queue("down")
    msg_tag = q.publish({"x": 1})
    (msg,), _ = q.claim(1)

    async def down() -> list[str]:
        dead = aredis.Redis(
            host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
        )
        ae = AsyncEngine(q.engine, dead)
        calls = Calls()
        calls.add(q.engine.consume.state_call(msg_tag))
        verbs: list[Callable[[], Awaitable[Any]]] = [
            lambda: ae.state(msg_tag),
            lambda: ae.score(msg_tag),
            lambda: ae.result(msg_tag),
            lambda: ae.cancelled(msg_tag),
            lambda: ae.info(msg_tag),
            lambda: ae.claim(1, "c"),
            lambda: ae.ack(msg),
            lambda: ae.send_calls(calls),
            lambda: ae.publish([q.prepare({"y": 1})]),
        ]
        said = []
        for verb in verbs:
            with pytest.raises(QueueUnavailable) as error:
                await verb()
            said.append(str(error.value))
        await dead.aclose()
        return said

    said = asyncio.run(down())
    assert len(said) == 9 and all(s.startswith("Redis is unavailable") for s in said)
    assert q.state(msg_tag) == "leased"  # nothing reached Redis
