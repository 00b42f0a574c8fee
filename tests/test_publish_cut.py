"""A publish of many jobs is cut into script calls that each stay short (``cut_calls``:
``MAX_PUBLISH_JOBS`` jobs or ``PUBLISH_CALL_BYTES`` of bodies, whichever comes first), sent
``PUBLISH_WINDOW`` calls a round trip; a failed call stops the publish at the end of its
round trip, and the error says which jobs were written.

The calls are counted, and their Redis time read, on a private redis-server of this
module (its ``INFO commandstats`` and ``SLOWLOG`` are this test's alone)."""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Iterator

import pytest
import redis
from django.test import override_settings

from django_zqueue import conf
from django_zqueue.conf import queue_options
from django_zqueue.conf.bounds import MAX_PUBLISH_JOBS, PUBLISH_CALL_BYTES, PUBLISH_WINDOW
from django_zqueue.engine import cut_calls
from django_zqueue.exceptions import QueueUnavailable, RedisFull
from django_zqueue.queue import Queue

from .redis_private import PrivateRedis

# ---------------------------------------------------------------- the cut itself


def _sizes(parts: list[list[int]]) -> list[tuple[int, int]]:
    return [(len(p), sum(p)) for p in parts]


def test_cut_by_count_and_by_bytes_whichever_first() -> None:
    small = [10] * (2 * MAX_PUBLISH_JOBS + 1)
    assert _sizes([list(p) for p in cut_calls(small, lambda n: b"x" * n)]) == [
        (MAX_PUBLISH_JOBS, 10 * MAX_PUBLISH_JOBS),
        (MAX_PUBLISH_JOBS, 10 * MAX_PUBLISH_JOBS),
        (1, 10),
    ]
    third = PUBLISH_CALL_BYTES // 3
    big = [third] * 7
    assert _sizes([list(p) for p in cut_calls(big, lambda n: b"x" * n)]) == [
        (3, 3 * third),
        (3, 3 * third),
        (1, third),
    ]
    # a body larger than the bound alone: a call of its own, never an empty call
    huge = [5, PUBLISH_CALL_BYTES + 1, 5]
    assert _sizes([list(p) for p in cut_calls(huge, lambda n: b"x" * n)]) == [
        (1, 5),
        (1, PUBLISH_CALL_BYTES + 1),
        (1, 5),
    ]
    assert cut_calls([], lambda n: b"") == []


def test_cut_keeps_every_job_in_order_within_both_bounds() -> None:
    rng = random.Random(7)
    for _ in range(200):
        jobs = [rng.choice([0, 1, 100, 5000, 40_000, PUBLISH_CALL_BYTES]) for _ in range(400)]
        parts = cut_calls(jobs, lambda n: b"x" * n)
        assert [j for p in parts for j in p] == jobs
        for p in parts:
            assert 1 <= len(p) <= MAX_PUBLISH_JOBS
            assert len(p) == 1 or sum(p) <= PUBLISH_CALL_BYTES
        for a, b in itertools.pairwise(parts):  # cut only when the next did not fit
            assert len(a) == MAX_PUBLISH_JOBS or sum(a) + b[0] > PUBLISH_CALL_BYTES


# ---------------------------------------------------------------- on a private Redis


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    s = PrivateRedis(tmp_path_factory.mktemp("redis-cut"))
    assert s.process is not None
    yield s
    s.stop()


@pytest.fixture
def client(server: PrivateRedis) -> Iterator[redis.Redis]:
    c = server.client()
    c.flushall()  # the module's own server
    c.config_set("maxmemory", 0)
    c.config_set("client-query-buffer-limit", 1 << 30)
    yield c
    c.config_set("maxmemory", 0)
    c.config_set("client-query-buffer-limit", 1 << 30)


def _queue(client: redis.Redis, **options: object) -> Queue:
    p = f"zqc-{uuid.uuid4().hex[:8]}"
    return Queue("q", queue_options("q", **options), prefix=p, client=client)


def _script_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("fcall", "evalsha"))


def test_a_large_enqueue_many_is_cut_into_calls_of_max_publish_jobs(
    server: PrivateRedis, client: redis.Redis
) -> None:
    """50,000 calls of ``enqueue_many``: one script call per MAX_PUBLISH_JOBS jobs, every
    job written once. (How long each call holds Redis is a figure of the benchmarks, not
    a test: ``python -m bench`` reports the longest script call SLOWLOG saw.)"""
    from testproject.demo import tasks

    prefix = f"zqc-{uuid.uuid4().hex[:8]}"
    value = {"REDIS_URL": server.url, "PREFIX": prefix, "QUEUES": {"default": {}}}
    with override_settings(ZQUEUE=value):
        try:
            tasks.add.enqueue(0, 0)  # the layout checked, the library loaded
            before = _script_calls(client)
            jobs = tasks.add.enqueue_many([(i, i) for i in range(50_000)])
            calls = _script_calls(client) - before
        finally:
            conf.reset()
    assert len(jobs) == 50_000 and len({j.id for j in jobs}) == 50_000
    assert calls == 50_000 // MAX_PUBLISH_JOBS
    q = Queue("default", queue_options("default"), prefix=prefix, client=client)
    assert q.total_count() == 50_001


def test_big_bodies_are_cut_by_bytes(client: redis.Redis) -> None:
    q = _queue(client, max_payload_bytes=1 << 20)
    q.publish("warm")
    bodies = ["x" * 10_000 for _ in range(40)]
    before = _script_calls(client)
    tags = q.publish_many(bodies)
    calls = _script_calls(client) - before
    per_call = PUBLISH_CALL_BYTES // (10_000 + 16)  # an encoded body: the text and a few bytes
    assert calls == -(-40 // per_call) and calls > 1
    assert q.counts()["ready"] == 41 and [q.info(t).body for t in tags] == bodies  # type: ignore[union-attr]


def test_a_failed_call_stops_the_publish_and_names_what_was_written(
    client: redis.Redis,
) -> None:
    """Redis refuses the writes part way (maxmemory reached): the error is raised at the
    end of the round trip that met it, its ``published`` exactly the jobs Redis holds,
    and no later round trip is sent."""
    q = _queue(client)
    q.publish("warm")
    n = MAX_PUBLISH_JOBS * PUBLISH_WINDOW * 3
    jobs = [q.prepare({"i": i, "pad": "y" * 200}) for i in range(n)]
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", used + 2_000_000)  # room for a few thousand jobs
    with pytest.raises(RedisFull) as err:
        q.publish_prepared(jobs)
    client.config_set("maxmemory", 0)
    published = list(err.value.published)
    held = {j.tag for j in jobs if q.state(j.tag) is not None}
    assert 0 < len(published) < n - MAX_PUBLISH_JOBS * PUBLISH_WINDOW  # stopped early
    assert set(published) == held and len(published) % MAX_PUBLISH_JOBS == 0
    assert published == [j.tag for j in jobs if j.tag in held]  # in the order given
    assert list(err.value.unconfirmed) == []
    assert "were written (.published)" in "".join(err.value.__notes__)


def test_a_round_trip_without_an_answer_is_named_unconfirmed(
    server: PrivateRedis, client: redis.Redis
) -> None:
    """Redis drops the connection in the second round trip (a call's argument past its
    ``client-query-buffer-limit``): the first round trip's jobs are ``published``, the
    second's ``unconfirmed``, the third's never sent."""
    q = _queue(client, max_payload_bytes=4 << 20)
    q.publish("warm")
    window = MAX_PUBLISH_JOBS * PUBLISH_WINDOW
    jobs = [q.prepare(i) for i in range(window)]
    jobs.append(q.prepare("z" * (2 << 20)))  # the second round trip's first call
    jobs += [q.prepare(i) for i in range(window * 2)]
    client.config_set("client-query-buffer-limit", 1 << 20)
    with pytest.raises(QueueUnavailable) as err:
        q.publish_prepared(jobs)
    client.config_set("client-query-buffer-limit", 1 << 30)
    first, second = jobs[:window], jobs[window : window + 1 + window - MAX_PUBLISH_JOBS]
    assert list(err.value.published) == [j.tag for j in first]
    assert list(err.value.unconfirmed) == [j.tag for j in second]
    third = jobs[window + 1 + window - MAX_PUBLISH_JOBS :]
    assert all(q.state(j.tag) is None for j in third)  # not sent
    assert all(q.state(j.tag) == "ready" for j in first)


def test_sets_of_a_commit_share_a_call_only_within_both_bounds(client: redis.Redis) -> None:
    """A transaction's sets share publish calls, whole sets only, up to
    MAX_PUBLISH_JOBS jobs and PUBLISH_CALL_BYTES of bodies."""
    from django_zqueue.queue.sets import publish_sets

    q = _queue(client, max_payload_bytes=1 << 20)
    q.publish("warm")
    small = [(q, [q.prepare(i)]) for i in range(3)]
    big = [(q, [q.prepare("b" * (PUBLISH_CALL_BYTES // 2))]) for _ in range(3)]
    before = _script_calls(client)
    assert publish_sets(small) == [None] * 3
    assert _script_calls(client) - before == 1  # three small sets: one call
    before = _script_calls(client)
    assert publish_sets(big) == [None] * 3
    assert _script_calls(client) - before == 3  # two halves and their keys pass the bytes
    assert q.counts()["ready"] == 7


def test_bench_cost_divides_each_phase_by_its_jobs(
    client: redis.Redis, server: PrivateRedis
) -> None:
    """``python -m bench --peers``' Redis cost table: the CPU read at each phase line of
    the harness, divided by the jobs of the phase's RESULT rows."""
    from bench._cost import per_job
    from bench._harness import PhaseCpu

    cpu = PhaseCpu(server.port)
    for line in ["== ceiling: redis-py\n", "== p enqueue.py (1s elapsed)\n"]:
        cpu.line(line)
    client.eval("for i = 1, 200000 do redis.call('PING') end", 0)  # some CPU in the phase
    cpu.line("== p process.py (2s elapsed)\n")
    cpu.line("== memory per queued job (RESTORE of each peer's snapshot into db 15)\n")
    phases = cpu.phases()
    assert set(phases) == {"p enqueue", "p process"} and phases["p enqueue"] > 0
    rows = [
        {"peer": "p", "phase": "enqueue", "mode": "single", "n": 100},
        {"peer": "p", "phase": "enqueue", "mode": "bulk", "n": 100},
        {"peer": "p", "phase": "process", "done": 40, "done_after_kill": 50},
        {"peer": "p", "phase": "latency", "count": 7},
    ]
    res = {"rows": rows, "redis_cpu": {"p enqueue": 0.001, "p process": 0.002}}
    got = per_job({**res, "memory": {"p": {"bytes_per_job": 123.0}}})["p"]
    assert got["publish_us"] == pytest.approx(5.0) and got["claim_ack_us"] == pytest.approx(40.0)
    assert got["bytes"] == 123.0 and (got["published"], got["drained"]) == (200, 50)
    assert per_job({"rows": rows})["p"]["publish_us"] is None  # no CPU read: no figure
