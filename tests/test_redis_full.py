"""Redis at maxmemory (an ``OOM`` reply) is a :class:`RedisFull` with the fix, from a
script, a pipeline or a plain command; and ``resume`` either resumed (and says so when its
wake-up was refused) or raises having done nothing. On a private server (never the shared
one): its ``maxmemory`` is set to 1 byte, so that every write that may grow memory is
refused."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aredis
from django.test import override_settings

from django_zqueue import RedisFull, ZQueueError, conf
from django_zqueue.conf import queue_options
from django_zqueue.engine.redis.outages import FullNotice, as_error
from django_zqueue.engine.scripts import SCRIPT_NAMES
from django_zqueue.engine.scripts.source import ALLOW_OOM, flags, library, source
from django_zqueue.queue import Queue, get_queue
from django_zqueue.queue.aio import AsyncQueue
from django_zqueue.worker import Worker
from testproject.demo import ledger, tasks

from .redis_private import PrivateRedis


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PrivateRedis]:
    s = PrivateRedis(tmp_path / "full")
    yield s
    s.stop()


@pytest.fixture
def full(server: PrivateRedis) -> Iterator[tuple[Queue, redis.Redis]]:
    """A queue with a job waiting, on a server then set to refuse writes."""
    client = server.client()
    q = Queue("q", queue_options("q"), prefix="full", client=client)
    q.publish({"task": "x", "args": [], "kwargs": {}}, tag="waiting")
    client.config_set("maxmemory", 1)  # (noeviction: the default policy)
    yield q, client
    client.config_set("maxmemory", 0)
    client.close()


def assert_full(exc: BaseException) -> None:
    assert isinstance(exc, RedisFull) and isinstance(exc, ZQueueError)
    assert "maxmemory" in str(exc) and "raise maxmemory" in str(exc)


def test_a_script_refused_at_maxmemory_raises_redis_full(full: tuple[Queue, redis.Redis]) -> None:
    q, _ = full
    with pytest.raises(RedisFull) as publish:
        q.publish({"task": "x", "args": [], "kwargs": {}}, tag="more")
    assert_full(publish.value)
    with pytest.raises(RedisFull) as priority:
        q.set_priority("waiting", 5)
    assert_full(priority.value)


def test_a_pipeline_reply_at_maxmemory_is_redis_full(full: tuple[Queue, redis.Redis]) -> None:
    _, client = full
    pipe = client.pipeline(transaction=False)
    pipe.set("{full:q}:x", "1")
    (reply,) = pipe.execute(raise_on_error=False)
    assert_full(as_error(reply))


def test_pause_at_maxmemory_raises_and_did_nothing(full: tuple[Queue, redis.Redis]) -> None:
    q, _ = full
    with pytest.raises(RedisFull) as got:
        q.pause()
    assert_full(got.value)
    assert q.is_paused() is False


def test_resume_at_maxmemory_resumes_and_says_its_wake_up_was_refused(
    server: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    client = server.client()
    q = Queue("q", queue_options("q"), prefix="full", client=client)
    q.pause()
    client.config_set("maxmemory", 1)
    try:
        with caplog.at_level(logging.WARNING, logger="django_zqueue"):
            q.resume()  # the resume is done: no error
        assert q.is_paused() is False
        assert any("event=resume_wake_failed" in r.getMessage() for r in caplog.records)
    finally:
        client.config_set("maxmemory", 0)
        client.close()


# ------------------------------------------------------------------ draining a full Redis


@pytest.fixture(params=["functions", "evalsha"])
def drain(request: pytest.FixtureRequest, server: PrivateRedis) -> Iterator[str]:
    """The settings of a worker on the private server: its scripts as a Functions library
    (FCALL), or as EVALSHA (``LUA_FUNCTIONS`` False: as on a Redis Cluster)."""
    value = {
        "REDIS_URL": server.url,
        "PREFIX": "drain",
        "QUEUES": {"default": {"keep_finished": 1000}},
        "LUA_FUNCTIONS": request.param == "functions",
    }
    with override_settings(ZQUEUE=value):
        conf.reset()
        yield request.param
    conf.reset()


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_an_eval_script_carries_the_flags_of_its_function(name: str) -> None:
    first = source(name).split("\n", 1)[0]
    assert first == ("#!lua flags=" + ",".join(flags(name)) if flags(name) else "#!lua")
    assert ("allow-oom" in first) == (name in ALLOW_OOM)
    assert f"'{first.partition('=')[2]}'" in library(SCRIPT_NAMES).code or not flags(name)


def test_what_a_worker_drains_with_runs_at_maxmemory() -> None:
    assert {"claim", "claim_fair", "ack", "ack_many", "nack", "release", "touch", "scan"} <= (
        ALLOW_OOM
    )
    assert (
        not {"publish", "publish_lean", "publish_once", "fire", "sched_put", "wf_publish"}
        & ALLOW_OOM
    )


@pytest.mark.parametrize("fairness", ["fifo", "groups"])
def test_jobs_of_every_state_drain_at_one_byte_of_maxmemory(
    drain: str, server: PrivateRedis, fairness: str
) -> None:
    """claim (claim_fair), ack, nack, release, touch, scan, purge_dead and delete run at
    maxmemory; publish and set_priority are refused, writing nothing."""
    client = server.client()
    q = Queue(
        "q", queue_options("q", fairness=fairness, keep_finished=10), prefix="f", client=client
    )
    ready = [q.publish(f"r{i}", group=f"g{i % 2}") for i in range(5)]
    [held], _ = q.claim(1, "gone")  # its lease runs out
    client.zadd(q.engine._keys.leased, {held.tag: 1}, xx=True)
    lapsing = q.publish("lapsing", priority=10, expires=0.05)  # ended by a claim
    corrupt = q.publish("corrupt", priority=10)
    client.hset(q.engine._keys.meta, corrupt, b"garbage")  # buried by a claim
    due = q.publish("due", delay=0.01)  # due by then: promoted
    dead = q.publish("dead")
    time.sleep(0.08)  # past the expiry, and the delay (Redis' clock runs with ours here)
    client.config_set("maxmemory", 1)
    try:
        before = {k: client.dump(k) for k in client.keys("*")}
        with pytest.raises(RedisFull):
            q.publish("more")
        with pytest.raises(RedisFull):  # (an EVAL script without flags: let through)
            q.set_priority(ready[1], 9)
        assert {k: client.dump(k) for k in client.keys("*")} == before  # refused whole
        assert q.scan().recovered == 1  # the lease that ran out: back in line
        got: list[str] = []
        released: list[str] = []
        for _ in range(20):
            msgs, _ = q.claim(3, "w")
            if not msgs:
                break
            for m in msgs:
                assert q.touch(m) is not None
                if m.tag == dead:
                    assert q.nack(m, "no", dead=True) == "dead"
                elif m.tag == due and m.attempt == 1:
                    assert q.nack(m, "again", retry_in=0) == "retry"
                elif m.tag == ready[2] and not released:
                    assert q.release(m) is True
                    released.append(m.tag)
                else:
                    assert q.ack(m) is True
                    got.append(m.tag)
        assert sorted(got) == sorted([*ready, due])
        assert q.state(lapsing) == "expired" and q.state(corrupt) == "dead"
        assert q.state(dead) == "dead"
        assert q.purge_dead() == 2
        assert q.delete(lapsing) is True
    finally:
        client.config_set("maxmemory", 0)
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}


def test_a_worker_drains_a_redis_at_maxmemory(
    drain: str, server: PrivateRedis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    keys = [str(i) for i in range(60)]
    tasks.fault_run.using(queue="default").enqueue_many([(path, k) for k in keys])
    client = server.client()
    client.config_set("maxmemory", 1)  # every write that may grow memory is refused
    try:
        with pytest.raises(RedisFull):
            tasks.fault_run.using(queue="default").enqueue(path, "refused")
        with caplog.at_level(logging.INFO, logger="django_zqueue"):
            worker = Worker(["default"], burst=True, scan_interval=0.05, concurrency=2)
            assert worker.run() == len(keys)
        runs = ledger.runs(path)
        assert sorted(r.key for r in runs) == sorted(keys)  # each accepted job ran once
        assert all(r.finished is not None for r in runs)
    finally:
        client.config_set("maxmemory", 0)
    q = get_queue("default")
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    assert q.stats()["acked"] == len(keys)
    lines = [r.getMessage() for r in caplog.records]
    said = [line for line in lines if line.startswith("event=redis_full ")]
    kinds = [line.split(" refused=")[1].split(" ")[0] for line in said]
    # what the drain went on without, each said once, with the fix
    assert sorted(kinds) == ["roll_up", "schedules", "task_statistics", "worker_registration"], said
    assert all('fix="raise maxmemory' in line for line in said)
    assert not [line for line in lines if "redis_lost" in line]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


def test_a_full_notice_says_each_kind_once(
    full: tuple[Queue, redis.Redis], caplog: pytest.LogCaptureFixture
) -> None:
    q, client = full
    notice = FullNotice(logging.getLogger("django_zqueue.worker"), worker="w")
    with caplog.at_level(logging.WARNING, logger="django_zqueue"):
        for limit in (1, 0, 1):  # full, then not, then full again: still one line a kind
            client.config_set("maxmemory", limit)
            for _ in range(3):
                with notice.refusing("statistics"):
                    q.publish("x")
                with notice.refusing("registration"):
                    client.hset("{full:q}:workers", "w", "x")  # (redis-py's OutOfMemoryError)
        with pytest.raises(ValueError), notice.refusing("statistics"):
            raise ValueError("not a refusal: raised")
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 2 and all(line.startswith("event=redis_full ") for line in said)
    assert "refused=statistics" in said[0] and "refused=registration" in said[1]
    assert all('fix="raise maxmemory' in line for line in said)
    client.config_set("maxmemory", 0)
    assert q.counts()["ready"] == 1 + 3  # the one waiting, and those accepted


def test_a_full_notice_says_a_kind_again_after_its_interval(
    full: tuple[Queue, redis.Redis], caplog: pytest.LogCaptureFixture
) -> None:
    q, _ = full
    notice = FullNotice(logging.getLogger("django_zqueue.worker"), every=0, worker="w")
    with caplog.at_level(logging.WARNING, logger="django_zqueue"):
        for _ in range(2):
            with notice.refusing("statistics"):
                q.publish("x")
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 2


def topology_nodes() -> list[redis.Redis]:
    """The servers of the session's private cluster or sentinel setup (never the shared
    standalone server, whose maxmemory this file must not change)."""
    from . import redis_server

    setup = redis_server._private
    if redis_server.TOPOLOGY == "cluster":
        return [redis.Redis(port=p) for p in setup.ports]
    host, port = setup.current_master()
    return [redis.Redis(host=host, port=port)]


def test_a_queue_drains_at_maxmemory_on_the_session_topology(
    make_queue: Callable[..., Queue],
) -> None:
    from . import redis_server

    if redis_server.TOPOLOGY == "standalone":
        pytest.skip("the shared server's maxmemory is never changed (private servers above)")
    q = make_queue()
    tags = [q.publish(i) for i in range(6)]
    nodes = topology_nodes()
    for node in nodes:
        node.config_set("maxmemory", 1)
    try:
        with pytest.raises(RedisFull):
            q.publish("more")
        q.scan()
        got: list[str] = []
        for _ in range(10):
            msgs, _ = q.claim(2, "c")
            if not msgs:
                break
            for m in msgs:
                assert q.touch(m) is not None
                assert q.ack(m) is True
                got.append(m.tag)
        assert sorted(got) == sorted(tags)
    finally:
        for node in nodes:
            node.config_set("maxmemory", 0)
            node.close()
    assert q.total_count() == 0


def test_a_worker_whose_library_a_full_redis_lacks_drains_it_by_evalsha(
    server: PrivateRedis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A release deployed while Redis is full: FUNCTION LOAD is refused at maxmemory,
    SCRIPT LOAD is not, so the worker's calls go as EVALSHA and it drains the queue."""
    value = {"REDIS_URL": server.url, "PREFIX": "drain", "QUEUES": {"default": {}}}
    path = str(tmp_path / "ledger.sqlite3")
    keys = [str(i) for i in range(20)]
    client = server.client()
    with override_settings(ZQUEUE=value):
        conf.reset()
        try:
            tasks.fault_run.using(queue="default").enqueue_many([(path, k) for k in keys])
            client.function_flush()  # (the library of the release that published them)
            client.config_set("maxmemory", 1)
            q = get_queue("default")
            assert q.total_count() == len(keys)  # (reads need no script)
            with caplog.at_level(logging.INFO, logger="django_zqueue"):
                worker = Worker(["default"], burst=True, scan_interval=0.05)
                assert worker.run() == len(keys)
            assert sorted(r.key for r in ledger.runs(path)) == sorted(keys)
            assert client.function_list() == []  # nothing loaded: it ran as EVALSHA
        finally:
            client.config_set("maxmemory", 0)
            conf.reset()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


@pytest.mark.parametrize("calls", ["one", "pipelined"])
def test_an_async_queue_whose_library_a_full_redis_lacks_drains_it(
    server: PrivateRedis, calls: str
) -> None:
    client = server.client()
    q = Queue("q", queue_options("q"), prefix="full", client=client)
    tags = [q.publish(i) for i in range(4)]
    client.function_flush()
    client.config_set("maxmemory", 1)
    fresh = Queue("q", queue_options("q"), prefix="full", client=server.client())

    async def drain() -> list[str]:
        aclient = aredis.Redis.from_url(server.url)
        try:
            aq = AsyncQueue(fresh, client=aclient)
            got: list[str] = []
            for _ in range(10):
                msgs, _ = await aq.claim(2 if calls == "pipelined" else 1)
                if not msgs:
                    break
                if calls == "pipelined":
                    oks = await aq.engine.run_all([fresh.engine.consume.ack_call(m) for m in msgs])
                else:
                    oks = [await aq.ack(m) for m in msgs]
                assert oks == [True] * len(msgs)
                got += [m.tag for m in msgs]
            return got
        finally:
            await aclient.aclose()

    try:
        assert sorted(asyncio.run(drain())) == sorted(tags)
    finally:
        client.config_set("maxmemory", 0)
    assert q.total_count() == 0 and client.function_list() == []


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_the_outbox_relay_at_maxmemory_waits_and_says_so_once(
    server: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    from django.db import transaction

    from django_zqueue.models import OutboxEntry
    from django_zqueue.worker.scanner import Scanner

    value = {"REDIS_URL": server.url, "PREFIX": "ob", "QUEUES": {"default": {}}, "OUTBOX": True}
    client = server.client()
    with override_settings(ZQUEUE=value):
        conf.reset()
        try:
            with transaction.atomic():
                job = tasks.add.enqueue(20, 22)
            client.config_set("maxmemory", 1)
            scanner = Scanner([get_queue("default")])
            with caplog.at_level(logging.WARNING, logger="django_zqueue"):
                for _ in range(3):
                    assert scanner.relay_tick() > 0  # never raises: backs off
                scanner.step()  # a step's relay is refused too: the step goes on
            # still waiting (not set aside as a row that cannot be published)
            assert [(r.tag, r.last_error) for r in OutboxEntry.objects.all()] == [(job.id, "")]
            assert get_queue("default").state(job.id) is None  # nothing published
            client.config_set("maxmemory", 0)
            assert Scanner([get_queue("default")]).relay_tick() > 0
            assert not OutboxEntry.objects.exists()
            assert get_queue("default").state(job.id) == "ready"
        finally:
            client.config_set("maxmemory", 0)
            conf.reset()
    # (WARNING and above: another test may have left the logger at INFO)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert all(line.startswith("event=redis_full ") for line in said), said
    # the relay, said once; the step's roll-up of the charts' rings is refused too
    kinds = sorted(line.split(" refused=")[1].split(" ")[0] for line in said)
    assert kinds == ["outbox_relay", "roll_up"], said


def test_a_workflow_at_maxmemory_waits_for_room_and_says_so_once(
    server: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """A parent job drains; telling its dependent (which adds a job to the line) is
    refused at maxmemory, said once by the worker and once by a scanner; the dependent
    runs once there is room."""
    from django_zqueue import chain
    from django_zqueue.worker.scanner import Scanner

    value = {"REDIS_URL": server.url, "PREFIX": "wf", "QUEUES": {"default": {}}}
    client = server.client()
    with override_settings(ZQUEUE=value):
        conf.reset()
        try:
            flow = chain(tasks.add.s(1, 2), tasks.add.s(10)).enqueue()
            client.config_set("maxmemory", 1)
            with caplog.at_level(logging.INFO, logger="django_zqueue"):
                worker = Worker(["default"], burst=True, scanner=False)
                assert worker.run() == 1  # the worker's own dispatch is refused
                scanner = Scanner([get_queue("default")])
                for _ in range(3):  # the scanner's drain of the outbox is refused too
                    scanner.tick(0.05)
            assert flow.statuses()[1] == "waiting"
            client.config_set("maxmemory", 0)
            assert Worker(["default"], burst=True, scan_interval=0.05).run() == 1
            assert flow.result() == 13
        finally:
            client.config_set("maxmemory", 0)
            conf.reset()
    said = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "protocol_not_set_up" not in r.getMessage()
    ]
    kinds = sorted(line.split(" refused=")[1].split(" ")[0] for line in said)
    assert all(line.startswith("event=redis_full ") for line in said), said
    assert {"workflow_dispatch", "workflow_outbox"} <= set(kinds)
    assert len(kinds) == len(set(kinds))  # each once
