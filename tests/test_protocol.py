"""The wire protocol (docs/protocol.md): jobs published with raw ``FCALL zq1_publish``, as
a producer in another language sends them, run by a Django worker; options honoured;
every refusal writes nothing; ``zq1_position``; the library's loading rule (never
replaced by an older release) and its return after a restart without persistence."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_zqueue import conf, get_queue
from django_zqueue.engine.keys import QueueKeys, queue_keys
from django_zqueue.engine.records import NewJob
from django_zqueue.engine.scripts import load_protocol, loaded_protocol, package_version
from django_zqueue.engine.scripts.source import PROTOCOL_LIBRARY, protocol_library
from django_zqueue.queue import Queue
from django_zqueue.worker import Worker

from .conftest import QueueFactory, snapshot
from .redis_private import PrivateRedis
from .redis_server import TOPOLOGY

DOCS = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
ADD = "testproject.demo.tasks.add"
RECORD = "testproject.demo.tasks.record"


def publish_keys(k: QueueKeys) -> list[str]:
    """zq1_publish's 14 keys, in the order docs/protocol.md gives them."""
    names = "ready delayed body meta ctr notify stats dead leased wait expiry expired gjobs proto"
    return [f"{k.tag}:{name}" for name in names.split()]


def position_keys(k: QueueKeys) -> list[str]:
    names = ["ready", "delayed", "leased", "dead", "wait", "expired"]
    return [f"{k.tag}:{name}" for name in names]


def body(task: str, *args: Any, **kwargs: Any) -> str:
    return json.dumps({"task": task, "args": list(args), "kwargs": kwargs})


def publish(
    client: redis.Redis, k: QueueKeys, text: str, options: str = "", version: str = "1"
) -> list[Any]:
    reply = client.execute_command(
        "FCALL", "zq1_publish", 14, *publish_keys(k), version, text, options
    )
    return [x.decode() if isinstance(x, bytes) else x for x in reply]


def position(client: redis.Redis, k: QueueKeys, tag: str) -> list[Any]:
    reply = client.execute_command("FCALL_RO", "zq1_position", 6, *position_keys(k), "1", tag)
    return [x.decode() if isinstance(x, bytes) else x for x in reply]


@pytest.fixture
def pq(q: Queue) -> Queue:
    """A queue set up for producers (the library loaded, its proto hash written)."""
    q.engine.protocol.publish()
    return q


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PrivateRedis]:
    s = PrivateRedis(tmp_path / "proto")
    yield s
    s.stop()


# ------------------------------------------------------------------ publish, run


def test_jobs_published_by_fcall_run_in_a_django_worker(
    project: dict[str, str], redis_client: redis.Redis
) -> None:
    call_command("zqueue_protocol")
    q = get_queue("default")
    tags = [publish(redis_client, q.engine._keys, body(ADD, i, 10 * i))[1] for i in range(1, 4)]
    tags.append(publish(redis_client, q.engine._keys, body(ADD, a=5, b=7), '{"id": "mine"}')[1])
    assert tags[3] == "mine" and len(set(tags)) == 4
    assert [q.state(t) for t in tags] == ["ready"] * 4
    Worker(["default"], burst=True, scan_interval=0.05).run()
    assert [q.result(t) for t in tags] == [11, 22, 33, 12]
    stats = q.stats()
    assert stats["enqueued"] == 4 and stats["acked"] == 4


def test_priority_order_delay_and_group_are_honoured(
    project: dict[str, str], redis_client: redis.Redis, tmp_path: Path
) -> None:
    call_command("zqueue_protocol")
    q = get_queue("default")
    ledger = str(tmp_path / "ledger")
    for value, options in [
        ("low", '{"priority": -5}'),
        ("mid", "{}"),
        ("high", '{"priority": 9}'),
        ("later", '{"delay_ms": 600000}'),
        ("mid2", '{"priority": 0, "max_retries": 3, "group": null}'),
    ]:
        assert (
            publish(redis_client, q.engine._keys, body(RECORD, ledger, value), options)[0] == "ok"
        )
    Worker(["default"], burst=True, scan_interval=0.05).run()
    ran = [line.split()[0] for line in Path(ledger).read_text().splitlines()]
    assert ran == ["high", "mid", "mid2", "low"]
    assert q.counts()["delayed"] == 1


def test_options_reach_the_job_record(make_queue: QueueFactory, redis_client: redis.Redis) -> None:
    q = make_queue("fq", fairness="groups")
    q.engine.protocol.publish()
    options = {
        "id": "j1",
        "priority": 3,
        "max_retries": 4,
        "visibility_timeout_ms": 90000,
        "group": "tenant-7",
        "weight": 2.5,
        "expires_in_ms": 3600000,
    }
    assert publish(redis_client, q.engine._keys, body(ADD, 1, 2), json.dumps(options)) == [
        "ok",
        "j1",
    ]
    info = q.info("j1")
    assert info is not None and info.state == "ready"
    assert (info.priority, info.max_retries, info.group) == (3, 4, "tenant-7")
    assert info.expires_at is not None
    assert info.body == {"task": ADD, "args": [1, 2], "kwargs": {}}
    when = int(time.time() * 1000) + 3_600_000
    publish(redis_client, q.engine._keys, body(ADD, 1, 2), f'{{"id": "j2", "run_at_ms": {when}}}')
    assert q.state("j2") == "delayed"


def test_ids_made_by_the_server_are_unique(pq: Queue, redis_client: redis.Redis) -> None:
    tags = [publish(redis_client, pq.engine._keys, body(ADD, 1, 1))[1] for _ in range(30)]
    assert len(set(tags)) == 30 and all(re.fullmatch(r"zq1-\d+-\d+", t) for t in tags)
    assert [int(t.rsplit("-", 1)[1]) for t in tags] == list(range(1, 31))
    assert pq.total_count() == 30


def test_a_duplicate_id_is_a_clash_and_writes_nothing(pq: Queue, redis_client: redis.Redis) -> None:
    assert publish(redis_client, pq.engine._keys, body(ADD, 1, 1), '{"id": "x"}') == ["ok", "x"]
    before = snapshot(redis_client, pq.prefix)
    assert publish(redis_client, pq.engine._keys, body(ADD, 2, 2), '{"id": "x"}') == [
        "clash",
        "x",
        "ready",
    ]
    assert snapshot(redis_client, pq.prefix) == before
    pq.claim(1, "c")
    assert publish(redis_client, pq.engine._keys, body(ADD, 2, 2), '{"id": "x"}') == [
        "clash",
        "x",
        "leased",
    ]


def test_the_json_layout_of_the_queue_is_followed(
    make_queue: QueueFactory, redis_client: redis.Redis, zqueue_settings: dict[str, Any]
) -> None:
    with override_settings(ZQUEUE={**zqueue_settings, "COMPACT_RECORDS": False}):
        conf.reset()
        try:
            q = make_queue()
            q.engine.protocol.publish()
            assert redis_client.hget(q.engine._keys.proto, "layout") == b"json"
            text = body(ADD, 1, 2)
            tag = publish(redis_client, q.engine._keys, text)[1]
            assert redis_client.hget(q.engine._keys.body, tag) == text.encode()
            assert redis_client.hget(q.engine._keys.meta, tag)[:1] == b"{"  # type: ignore[index]
            (msg,), _ = q.claim(1, "c")
            assert msg.body == {"task": ADD, "args": [1, 2], "kwargs": {}}
        finally:
            conf.reset()


# ------------------------------------------------------------------ refusals


GOOD = body(ADD, 1, 2)
REFUSED = [
    ("2", GOOD, "", "ZQ_PROTOCOL: unknown protocol version 2; this server speaks 1"),
    ("", GOOD, "", "ZQ_PROTOCOL: unknown protocol version ; this server speaks 1"),
    ("1.0", GOOD, "", "ZQ_PROTOCOL: unknown protocol version 1.0"),
    ("1", "not json", "", "ZQ_BAD_ARGUMENT: the body must be a JSON object"),
    ("1", "[1, 2]", "", "ZQ_BAD_ARGUMENT: the body must be a JSON object"),
    ("1", '{"task": "", "args": [], "kwargs": {}}', "", "non-empty string task"),
    ("1", '{"task": 5, "args": [], "kwargs": {}}', "", "non-empty string task"),
    ("1", '{"task": "a.b", "kwargs": {}}', "", "args, a JSON array"),
    ("1", '{"task": "a.b", "args": {"x": 1}, "kwargs": {}}', "", "args, a JSON array"),
    ("1", '{"task": "a.b", "args": [], "kwargs": [1]}', "", "kwargs, a JSON object"),
    ("1", '{"task": "a.b", "args": []}', "", "kwargs, a JSON object"),
    ("1", '{"task": "a.b", "args": [], "kwargs": {}, "x": 1}', "", "unknown body field 'x'"),
    ("1", GOOD, '{"prio": 1}', "ZQ_BAD_ARGUMENT: unknown option 'prio'"),
    ("1", GOOD, '{"layout": "json"}', "unknown option 'layout'"),
    ("1", GOOD, '{"score": 1}', "unknown option 'score'"),
    ("1", GOOD, "[1]", "unknown option '1'"),
    ("1", GOOD, '"x"', "ZQ_BAD_ARGUMENT: options must be a JSON object"),
    ("1", GOOD, "{", "ZQ_BAD_ARGUMENT: options must be a JSON object"),
    ("1", GOOD, '{"priority": 1001}', "ZQ_BAD_ARGUMENT: job 1: priority must be"),
    ("1", GOOD, '{"priority": 1.5}', "priority must be an integer"),
    ("1", GOOD, '{"max_retries": -1}', "max_retries must be"),
    ("1", GOOD, '{"visibility_timeout_ms": 10}', "visibility_timeout_ms must be"),
    ("1", GOOD, '{"id": 7}', "needs an id of 1 to 256 bytes"),
    ("1", GOOD, '{"id": ""}', "needs an id of 1 to 256 bytes"),
    ("1", GOOD, '{"group": ""}', "group must be 1 to 200 bytes"),
    ("1", GOOD, '{"delay_ms": "soon"}', "delay_ms must be"),
]


@pytest.mark.parametrize(("version", "text", "options", "error"), REFUSED)
def test_a_refused_publish_writes_nothing(
    pq: Queue, redis_client: redis.Redis, version: str, text: str, options: str, error: str
) -> None:
    publish(redis_client, pq.engine._keys, GOOD, '{"id": "before"}')
    before = snapshot(redis_client, pq.prefix)
    with pytest.raises(redis.ResponseError, match=re.escape(error)):
        publish(redis_client, pq.engine._keys, text, options, version)
    assert snapshot(redis_client, pq.prefix) == before


def test_a_queue_not_set_up_is_refused_with_the_fix(q: Queue, redis_client: redis.Redis) -> None:
    load_protocol(redis_client)
    with pytest.raises(redis.ResponseError) as caught:
        publish(redis_client, q.engine._keys, GOOD)
    assert (
        f"ZQ_PROTOCOL: queue {q.engine._keys.tag} is not set up for producers: run manage.py "
        "zqueue_protocol (or start a worker)"
    ) in str(caught.value)
    assert snapshot(redis_client, q.prefix) == {}


def test_keys_of_another_order_or_queue_are_refused(
    pq: Queue, make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    other = make_queue("other")
    other.engine.protocol.publish()
    before = snapshot(redis_client, pq.prefix)
    keys = publish_keys(pq.engine._keys)
    cases = [
        [keys[1], keys[0], *keys[2:]],  # ready and delayed swapped
        keys[:13],  # one key short
    ]
    if TOPOLOGY == "standalone":  # a cluster client refuses keys of two slots itself
        cases += [
            [*keys[:13], publish_keys(other.engine._keys)[13]],  # another queue's proto hash
            [*keys[:3], publish_keys(other.engine._keys)[3], *keys[4:]],  # another queue's meta
        ]
    for case in cases:
        with pytest.raises(redis.ResponseError, match=r"ZQ_PROTOCOL: (KEYS|zq1_publish takes)"):
            redis_client.execute_command("FCALL", "zq1_publish", len(case), *case, "1", GOOD, "")
    with pytest.raises(redis.ResponseError, match="takes 14 keys and 3 arguments"):
        redis_client.execute_command("FCALL", "zq1_publish", 14, *keys, "1", GOOD)
    assert snapshot(redis_client, pq.prefix) == before


def test_a_partitioned_queue_is_refused(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue("parts", partitions=4)
    q.engine.protocol.publish()
    assert redis_client.hget(q.engine._keys.proto, "partitions") == b"4"
    before = snapshot(redis_client, q.prefix)
    with pytest.raises(redis.ResponseError, match="has 4 partitions: protocol 1 publishes"):
        publish(redis_client, q.engine._keys, GOOD)
    assert snapshot(redis_client, q.prefix) == before


def test_a_full_queue_is_refused(make_queue: QueueFactory, redis_client: redis.Redis) -> None:
    q = make_queue("small", max_length=2)
    q.engine.protocol.publish()
    publish(redis_client, q.engine._keys, GOOD)
    publish(redis_client, q.engine._keys, GOOD, '{"delay_ms": 60000}')
    before = snapshot(redis_client, q.prefix)
    with pytest.raises(redis.ResponseError, match="ZQ_QUEUE_FULL"):
        publish(redis_client, q.engine._keys, GOOD)
    assert snapshot(redis_client, q.prefix) == before


def test_a_body_over_max_payload_bytes_is_refused(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue("tight", max_payload_bytes=120)
    q.engine.protocol.publish()
    fits = body(ADD, "x" * 40, 1)
    assert len(fits) <= 120 and publish(redis_client, q.engine._keys, fits)[0] == "ok"
    before = snapshot(redis_client, q.prefix)
    big = body(ADD, "x" * 100, 1)
    with pytest.raises(redis.ResponseError, match=f"the body is {len(big)} bytes, more than"):
        publish(redis_client, q.engine._keys, big)
    assert snapshot(redis_client, q.prefix) == before


def test_a_proto_hash_of_the_wrong_type_or_values_is_refused(
    pq: Queue, redis_client: redis.Redis
) -> None:
    redis_client.hset(pq.engine._keys.proto, "mode", "random")
    before = snapshot(redis_client, pq.prefix)
    with pytest.raises(redis.ResponseError, match="holds no valid policy"):
        publish(redis_client, pq.engine._keys, GOOD)
    redis_client.delete(pq.engine._keys.proto)
    redis_client.set(pq.engine._keys.proto, "x")
    with pytest.raises(redis.ResponseError, match=r"ZQ_CORRUPT_KEY: .*proto is a string"):
        publish(redis_client, pq.engine._keys, GOOD)
    redis_client.delete(pq.engine._keys.proto)
    assert {k: v for k, v in snapshot(redis_client, pq.prefix).items() if b"proto" not in k} == {
        k: v for k, v in before.items() if b"proto" not in k
    }


# ------------------------------------------------------------------ max_retries


def test_an_absent_max_retries_takes_the_queues(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    """As from Python (max_retries=None): the queue's max_retries, from its proto hash;
    a job that fails is retried, not dead at once."""
    q = make_queue("retrying", max_retries=4)
    q.engine.protocol.publish()
    assert redis_client.hget(q.engine._keys.proto, "max_retries") == b"4"
    publish(redis_client, q.engine._keys, GOOD, '{"id": "absent"}')
    publish(redis_client, q.engine._keys, GOOD, '{"id": "null", "max_retries": null}')
    publish(redis_client, q.engine._keys, GOOD, '{"id": "none", "max_retries": 0}')
    publish(redis_client, q.engine._keys, GOOD, '{"id": "own", "max_retries": 9}')
    retries = {}
    for tag in ("absent", "null", "none", "own"):
        info = q.info(tag)
        assert info is not None
        retries[tag] = info.max_retries
    assert retries == {"absent": 4, "null": 4, "none": 0, "own": 9}
    assert retries["absent"] == q.info(q.publish({"task": ADD})).max_retries  # type: ignore[union-attr]
    msgs, _ = q.claim(10, "w")
    for m in msgs:
        q.nack(m, "boom")
    assert {t: q.state(t) for t in retries} == {
        "absent": "delayed",
        "null": "delayed",
        "none": "dead",
        "own": "delayed",
    }


def test_an_old_policy_without_max_retries_stores_0(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    """A proto hash an older release wrote has no max_retries: the job gets 0 (no retry),
    as it did then, until a worker start or zqueue_protocol writes the hash again."""
    q = make_queue("older", max_retries=4)
    q.engine.protocol.publish()
    redis_client.hdel(q.engine._keys.proto, "max_retries")
    assert publish(redis_client, q.engine._keys, GOOD, '{"id": "old"}') == ["ok", "old"]
    info = q.info("old")
    assert info is not None and info.max_retries == 0
    q.engine.protocol.publish()
    publish(redis_client, q.engine._keys, GOOD, '{"id": "new"}')
    info = q.info("new")
    assert info is not None and info.max_retries == 4


@pytest.mark.parametrize("bad", ["x", "-1", "1001", "1.5", ""])
def test_a_policy_max_retries_out_of_bounds_is_refused(
    pq: Queue, redis_client: redis.Redis, bad: str
) -> None:
    redis_client.hset(pq.engine._keys.proto, "max_retries", bad)
    before = snapshot(redis_client, pq.prefix)
    with pytest.raises(redis.ResponseError, match="holds no valid policy"):
        publish(redis_client, pq.engine._keys, GOOD)
    assert snapshot(redis_client, pq.prefix) == before


# ------------------------------------------------------------------ position


def test_position_of_each_state(pq: Queue, redis_client: redis.Redis) -> None:
    for i in range(5):
        publish(redis_client, pq.engine._keys, GOOD, json.dumps({"id": f"r{i}", "priority": i % 3}))
    for i in range(5):
        state, rank, score = position(redis_client, pq.engine._keys, f"r{i}")
        assert state == "ready" and rank == pq.rank(f"r{i}")
        info = pq.info(f"r{i}")
        assert info is not None and float(score) == info.score
    publish(redis_client, pq.engine._keys, GOOD, '{"id": "d", "delay_ms": 60000}')
    assert position(redis_client, pq.engine._keys, "d") == ["delayed"]
    assert position(redis_client, pq.engine._keys, "nope") == [""]
    (msg,), _ = pq.claim(1, "c")
    assert position(redis_client, pq.engine._keys, msg.tag) == ["leased"]
    assert position(redis_client, pq.engine._keys, "r0")[1] == pq.rank("r0")
    with pytest.raises(redis.ResponseError, match="unknown protocol version 9"):
        redis_client.execute_command(
            "FCALL_RO", "zq1_position", 6, *position_keys(pq.engine._keys), "9", "d"
        )
    swapped = position_keys(pq.engine._keys)[::-1]
    with pytest.raises(redis.ResponseError, match=r"ZQ_PROTOCOL: KEYS\[1\]"):
        redis_client.execute_command("FCALL_RO", "zq1_position", 6, *swapped, "1", "d")


# ------------------------------------------------------------------ the library


def _fake(build: str) -> str:
    """The protocol library as release ``build`` would load it."""
    return protocol_library(build).code


def test_the_library_is_replaced_only_by_a_newer_version(server: PrivateRedis) -> None:
    client = server.client()
    ours = package_version()
    client.function_load(_fake("0.0.1"))
    done = load_protocol(client)
    assert (done.action, done.found) == ("replaced", "0.0.1")
    assert client.execute_command("FCALL_RO", "zq1_build", 0) == ours.encode()
    assert load_protocol(client).action == "current"
    client.function_load(_fake("99.1.0"), replace=True)
    done = load_protocol(client)
    assert (done.action, done.found) == ("kept", "99.1.0")
    assert client.execute_command("FCALL_RO", "zq1_build", 0) == b"99.1.0"
    # an older release finds it too, and keeps it
    assert load_protocol(client, "0.0.1").action == "kept"
    # a release with more numbers or a suffix compares by its numbers
    assert load_protocol(client, "99.1.0.1").action == "replaced"
    assert load_protocol(client, "99.1.0rc1").action == "kept"
    # same version, other text (a development build): the loader's own
    client.function_load(
        _fake(ours).replace("-- django_zqueue: wire", "-- other build: wire"), replace=True
    )
    assert load_protocol(client).action == "replaced"
    held = loaded_protocol(client)
    assert held is not None and held.code == _fake(ours)
    names = [lib[1].decode() for lib in client.function_list()]
    assert names == [PROTOCOL_LIBRARY]


def test_zq1_build_and_the_flags(server: PrivateRedis) -> None:
    client = server.client()
    load_protocol(client)
    (lib,) = client.function_list(library=PROTOCOL_LIBRARY)
    entry = dict(zip(lib[0::2], lib[1::2], strict=True))
    flags = {}
    for fn in entry[b"functions"]:
        f = dict(zip(fn[0::2], fn[1::2], strict=True))
        flags[f[b"name"].decode()] = sorted(x.decode() for x in f[b"flags"])
    assert flags == {"zq1_build": ["no-writes"], "zq1_position": ["no-writes"], "zq1_publish": []}


def _private_settings(server: PrivateRedis) -> dict[str, Any]:
    return {
        "REDIS_URL": server.url,
        "PREFIX": "pp",
        "QUEUES": {"default": {}, "big": {"partitions": 2}},
    }


def test_a_restart_without_persistence_is_set_up_again(
    server: PrivateRedis, capsys: pytest.CaptureFixture[str]
) -> None:
    client = server.client()
    with override_settings(ZQUEUE=_private_settings(server)):
        conf.reset()
        try:
            call_command("zqueue_protocol")
            out = capsys.readouterr().out
            assert "queue default: zqueue_protocol_1 loaded" in out and "{pp:default}:proto" in out
            assert "queue big: zqueue_protocol_1 already loaded" in out and "2 partitions" in out
            k = get_queue("default").engine._keys
            assert publish(client, k, GOOD, '{"id": "a"}') == ["ok", "a"]
            call_command("zqueue_protocol", "--check")
            out = capsys.readouterr().out
            assert (
                f"queue default: {PROTOCOL_LIBRARY} {package_version()}; "
                "{pp:default}:proto set up" in out
            )
            server.stop()
            server.start()
            with pytest.raises(redis.ResponseError, match="Function not found"):
                publish(client, k, GOOD)
            with pytest.raises(CommandError, match="not set up for producers: default, big"):
                call_command("zqueue_protocol", "--check")
            assert "not loaded" in capsys.readouterr().out
            Worker(["default"], burst=True, scan_interval=0.05).run()  # its start sets it up
            assert publish(client, k, GOOD, '{"id": "b"}') == ["ok", "b"]
            server.stop()
            server.start()
            call_command("zqueue_protocol")
            assert publish(client, k, GOOD, '{"id": "c"}') == ["ok", "c"]
        finally:
            conf.reset()


def _until(done: Callable[[], Any], seconds: float = 30.0) -> Any:
    """``done()``'s first true value, polled until ``seconds`` have passed (then its last)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = done()
        except (redis.ResponseError, LookupError):  # not yet: no library, no result
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_a_running_worker_puts_the_protocol_back_after_a_restart(server: PrivateRedis) -> None:
    """A server restarted without persistence under a running worker: the worker's next
    script call finds its library gone (Function not found) and loads it again, and with
    it the protocol library and the proto hashes its start wrote, so producers in other
    languages publish again without a worker restart."""
    client = server.client()
    with override_settings(ZQUEUE=_private_settings(server)):
        conf.reset()
        try:
            q, big = get_queue("default"), get_queue("big")
            w = Worker(["default", "big"], concurrency=1, scan_interval=0.05)
            runner = threading.Thread(target=w.run)
            runner.start()
            try:
                assert _until(
                    lambda: client.exists(q.engine._keys.proto, big.engine._keys.proto) == 2
                )
                written = {
                    key: client.hgetall(key)
                    for key in (q.engine._keys.proto, big.engine._keys.proto)
                }
                server.stop()
                server.start()  # --save '', no AOF: the server comes back empty
                sent = _until(lambda: publish(client, q.engine._keys, GOOD, '{"id": "after"}'))
                assert sent == ["ok", "after"]
                assert _until(lambda: q.result("after")) == 3  # the worker ran it
                assert {key: client.hgetall(key) for key in written} == written
                held = loaded_protocol(client)
                assert held is not None and held.build == package_version()
            finally:
                w.stop()
                runner.join(15)
            assert not runner.is_alive()
        finally:
            conf.reset()


def test_a_running_worker_puts_the_protocol_back_when_another_process_reloaded_first(
    server: PrivateRedis,
) -> None:
    """After the restart, a web process's publish (another client) finds the scripts'
    library missing and loads it first: the worker's own calls never meet `Function not
    found`, and its next registration (every 10 s) sees its proto hash gone and puts the
    protocol back."""
    client = server.client()
    settings = _private_settings(server)
    with override_settings(ZQUEUE=settings):
        conf.reset()
        try:
            q = get_queue("default")
            w = Worker(["default"], concurrency=1, scanner=False)  # no script call when idle
            runner = threading.Thread(target=w.run)
            runner.start()
            try:
                assert _until(lambda: client.exists(q.engine._keys.proto))
                written = client.hgetall(q.engine._keys.proto)
                server.stop()
                server.start()
                web = Queue("default", q.options, prefix="pp", client=server.client())
                web.publish({"task": ADD, "args": [1, 1], "kwargs": {}}, tag="web")
                assert _until(lambda: q.result("web")) == 2
                sent = _until(lambda: publish(client, q.engine._keys, GOOD, '{"id": "after"}'))
                assert sent == ["ok", "after"]
                assert client.hgetall(q.engine._keys.proto) == written
            finally:
                w.stop()
                runner.join(15)
            assert not runner.is_alive()
        finally:
            conf.reset()


def test_check_sees_changed_settings(
    server: PrivateRedis, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _private_settings(server)
    with override_settings(ZQUEUE=settings):
        conf.reset()
        try:
            call_command("zqueue_protocol")
        finally:
            conf.reset()
    changed = {
        **settings,
        "QUEUES": {"default": {"priority_mode": "aging"}, "big": {"partitions": 2}},
    }
    with override_settings(ZQUEUE=changed):
        conf.reset()
        try:
            capsys.readouterr()
            call_command("zqueue_protocol", "--check")
            out = capsys.readouterr().out
            assert "queue default:" in out and "set up with other settings" in out
            assert "mode=strict" in out
            call_command("zqueue_protocol")
            call_command("zqueue_protocol", "--check")
            out = capsys.readouterr().out
            assert "mode=aging" in out and "other settings" not in out
        finally:
            conf.reset()


def test_a_worker_start_writes_the_policy_of_its_queues(
    project: dict[str, str], redis_client: redis.Redis
) -> None:
    q, reports = get_queue("default"), get_queue("reports")
    assert not redis_client.exists(q.engine._keys.proto)
    Worker(["default", "reports"], burst=True, scan_interval=0.05).run()
    assert redis_client.hgetall(reports.engine._keys.proto) == {
        b"v": b"1",
        b"mode": b"aging",
        b"aging_us": str(reports.engine.policy.aging_us).encode(),
        b"notify_cap": b"64",
        b"max_length": b"0",
        b"group_max_length": b"0",
        b"layout": b"compact",
        b"partitions": b"1",
        b"max_payload_bytes": str(1 << 20).encode(),
        b"max_retries": b"3",
    }
    assert redis_client.hget(q.engine._keys.proto, "mode") == b"strict"
    q.clear()  # every key of the queue: producers wait for the next setup
    assert not redis_client.exists(q.engine._keys.proto)
    with pytest.raises(redis.ResponseError, match="is not set up for producers"):
        publish(redis_client, q.engine._keys, GOOD)


# ------------------------------------------------------------------ the docs


def test_the_keys_are_those_the_internal_scripts_take(q: Queue) -> None:
    """zq1_publish's keys are publish.lua's (as Scripts.publish passes them) and the proto
    hash; zq1_position's are positions.lua's."""
    call = q.engine._shards[0].publish([NewJob("t", b"{}")])
    assert publish_keys(q.engine._keys) == [*call.keys, q.engine._keys.proto]
    assert position_keys(q.engine._keys) == list(q.engine._shards[0].positions(["t"]).keys)


def test_the_docs_name_the_keys_in_the_order_the_functions_take_them() -> None:
    text = DOCS.read_text()
    listed = re.findall(r"^\| `KEYS\[(\d+)\]` \| `\{<PREFIX>:<queue>\}:(\w+)` \|", text, re.M)
    k = queue_keys("zq", "default")
    assert [int(i) for i, _ in listed] == [*range(1, 15), *range(1, 7)]
    assert [n for _, n in listed[:14]] == [key.split(":")[-1] for key in publish_keys(k)]
    assert [n for _, n in listed[14:]] == [key.split(":")[-1] for key in position_keys(k)]
