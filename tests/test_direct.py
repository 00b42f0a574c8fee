"""A script call sent straight on a kept connection (``engine/redis/direct.py``): the
connection is reused, shared by the queues of one client, survives a killed connection
and a restarted server with one retry, is never retried after a timeout, stays usable
after a script's error reply, is not shared with a forked child, and is only taken for
a plain client."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import redis
from redis._parsers.encoders import Encoder
from redis.connection import PythonRespSerializer

from django_zqueue.conf import Config, queue_options
from django_zqueue.engine.redis.connection import make_client
from django_zqueue.engine.redis.direct import Direct, direct_for
from django_zqueue.exceptions import CorruptKey, QueueUnavailable
from django_zqueue.queue import Queue

from . import redis_server
from .conftest import QueueFactory
from .redis_private import PrivateRedis

pytestmark = pytest.mark.skipif(
    redis_server.TOPOLOGY != "standalone", reason="a Cluster or Sentinel client keeps its own path"
)


def _direct(q: Queue) -> Direct:
    direct = q.engine._scripts.direct
    assert direct is not None
    return direct


def _client_ids(client: redis.Redis, name: str) -> set[int]:
    return {c["id"] for c in client.client_list() if c.get("name") == name}


def _kill_kept(q: Queue, server: PrivateRedis) -> tuple[object, int]:
    """Kill, from the server's side, the connection the direct path keeps; returns it and
    its client id."""
    conn = _direct(q).idle[-1]
    conn.send_command("CLIENT", "SETNAME", "zq-direct-victim")
    conn.read_response()
    admin = server.client()
    (victim,) = _client_ids(admin, "zq-direct-victim")
    admin.client_kill_filter(_id=victim)
    return conn, victim


def _queue(url: str, prefix: str, **options: object) -> Queue:
    return Queue(
        "q", queue_options("q"), prefix=prefix, client=make_client(Config(redis_url=url, **options))
    )


def test_one_connection_carries_the_calls_of_every_queue_of_a_client(
    make_queue: QueueFactory,
) -> None:
    a, b = make_queue("a"), make_queue("b")
    assert _direct(a) is _direct(b)  # one per client, whatever the number of queues
    a.publish("x")
    conn = _direct(a).idle[-1]
    for i in range(20):
        (a if i % 2 else b).publish(i)
    assert _direct(a).idle == [conn]  # sequential calls reuse the one connection
    assert a.total_count() + b.total_count() == 21


def test_a_killed_connection_is_retried_once_and_the_job_written_once(
    tmp_path: Path, prefix: str
) -> None:
    server = PrivateRedis(tmp_path)
    try:
        q = _queue(server.url, prefix)
        q.publish("first")
        conn, victim = _kill_kept(q, server)
        admin = server.client()
        tag = q.publish("second")
        assert q.state(tag) == "ready" and q.total_count() == 2
        assert _direct(q).idle == [conn] and victim not in _client_ids(admin, "zq-direct-victim")
    finally:
        server.stop()


def test_a_restarted_server_is_reached_again_and_a_dead_one_reported(
    tmp_path: Path, prefix: str
) -> None:
    server = PrivateRedis(tmp_path)
    try:
        q = _queue(server.url, prefix, socket_connect_timeout=1.0)
        q.publish("before")
        server.kill()
        with pytest.raises(QueueUnavailable):
            q.publish("while down")
        assert _direct(q).idle == []  # the failed connection went back to the pool, closed
        server.start()
        tag = q.publish("after")  # the server lost everything (no persistence)
        assert q.state(tag) == "ready" and q.total_count() == 1
    finally:
        server.stop()


def test_a_timed_out_call_is_not_sent_again(tmp_path: Path, prefix: str) -> None:
    """The call reached Redis and ran after the timeout: it is sent once (a second send
    of a claim or an ack would run it twice)."""
    server = PrivateRedis(tmp_path, "--enable-debug-command", "yes")
    try:
        q = _queue(server.url, prefix, socket_timeout=0.3)
        q.publish("warm")  # the library is loaded, the connection open
        admin = server.client()
        admin.config_resetstat()
        busy = threading.Thread(target=lambda: server.client().execute_command("DEBUG", "SLEEP", 1))
        busy.start()
        time.sleep(0.1)
        with pytest.raises(QueueUnavailable, match=r"[Tt]imeout"):
            q.publish("slow")
        busy.join()
        assert _direct(q).idle == []
        assert admin.info("commandstats")["cmdstat_fcall"]["calls"] == 1
        assert q.total_count() == 2  # "slow" ran, after the sleep
    finally:
        server.stop()


def test_an_error_reply_leaves_the_connection_in_use(make_queue: QueueFactory) -> None:
    q = make_queue()
    q.publish("x")
    conn = _direct(q).idle[-1]
    client = q.engine._client
    ready = q.engine._keys.ready
    kept = client.dump(ready)
    client.delete(ready)
    client.set(ready, "not a sorted set")
    try:
        with pytest.raises(CorruptKey):
            q.publish("y")
        assert _direct(q).idle == [conn]
    finally:
        client.delete(ready)
        assert kept is not None
        client.restore(ready, 0, kept)
    tag = q.publish("z")
    assert q.state(tag) == "ready" and _direct(q).idle == [conn]


def test_threads_share_connections_without_mixing_replies(make_queue: QueueFactory) -> None:
    q = make_queue()
    errors: list[BaseException] = []
    tags: list[list[str]] = [[] for _ in range(8)]

    def run(i: int) -> None:
        try:
            for n in range(100):
                tags[i].append(q.publish({"t": i, "n": n}))
                info = q.info(tags[i][-1])
                assert info is not None and info.body == {"t": i, "n": n}
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert q.total_count() == 800 and len({t for ts in tags for t in ts}) == 800
    assert 1 <= len(_direct(q).idle) <= 8


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_connection(make_queue: QueueFactory) -> None:
    q = make_queue()
    q.publish("parent")
    parent_conn = _direct(q).idle[-1]
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 only if it wrote on a socket of its own
        code = 1
        try:
            q.publish("child")
            code = 0 if _direct(q).idle[-1] is not parent_conn else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    tag = q.publish("parent again")  # the parent's connection was not disturbed
    assert q.state(tag) == "ready" and q.total_count() == 3 and _direct(q).idle[-1] is parent_conn


def test_only_a_plain_client_takes_the_direct_path(redis_client: redis.Redis) -> None:
    url = redis_server.redis_url()

    class Counting(redis.Redis):
        pass

    assert direct_for(redis_client) is not None
    assert direct_for(Counting.from_url(url)) is None
    assert direct_for(redis.Redis.from_url(url, single_connection_client=True)) is None
    blocking = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(url))
    assert direct_for(blocking) is None


def test_a_batch_gets_the_replies_of_redis_pys_pipeline(make_queue: QueueFactory) -> None:
    """Script calls and plain commands (their response callbacks: BLPOP's tuple,
    HGETALL's dict), error replies in place, read the same with and without the direct
    path; the connection stays in use after an error reply."""
    q = make_queue()
    engine, direct = q.engine, _direct(q)
    client = engine._client
    wrong = f"{engine._keys.ready}-not-a-list"
    client.set(wrong, "x")

    def one_batch() -> list[object]:
        for n in range(3):
            q.publish(n)
        client.rpush(engine._keys.notify, "1")
        client.hset(f"{engine._keys.ready}-h", mapping={"a": "1"})
        batch = engine.batch()
        batch.command("blpop", [engine._keys.notify], timeout=1)
        batch.command("hgetall", f"{engine._keys.ready}-h")
        batch.command("lpush", wrong, "y")  # WRONGTYPE
        batch.add(engine.consume.plan_claim(2, "me").call)
        replies = engine.send(batch)
        q.clear()
        return [r if not isinstance(r, Exception) else type(r).__name__ for r in replies]

    try:
        ours = one_batch()
        conn = direct.idle[-1]
        q.engine._scripts.direct = None
        theirs = one_batch()
    finally:
        q.engine._scripts.direct = direct
        client.delete(wrong, f"{engine._keys.ready}-h")
    assert (
        ours[:3]
        == theirs[:3]
        == [(engine._keys.notify.encode(), b"1"), {b"a": b"1"}, "ResponseError"]
    )
    assert type(ours[3]) is type(theirs[3]) and len(ours[3]) == len(theirs[3])  # type: ignore[arg-type]
    assert direct.idle[-1] is conn


def test_a_batch_on_a_killed_connection_is_sent_again_once(tmp_path: Path, prefix: str) -> None:
    server = PrivateRedis(tmp_path)
    try:
        q = _queue(server.url, prefix)
        engine = q.engine
        batch = engine.batch()
        batch.command("set", "k", "1")
        engine.send(batch)
        _kill_kept(q, server)
        admin = server.client()
        batch = engine.batch()
        batch.command("incr", "k")
        batch.add(engine.consume.plan_claim(1, "me").call)
        replies = engine.send(batch)
        assert replies[0] == 2 and admin.get("k") == b"2"  # sent once more, run once
        server.kill()
        batch = engine.batch()
        batch.command("incr", "k")
        with pytest.raises(QueueUnavailable):
            engine.send(batch)
        assert _direct(q).idle == []
    finally:
        server.stop()


def test_a_bounded_pool_gets_its_connections_back(prefix: str) -> None:
    """The direct path keeps an eighth of a bounded pool idle (at least one): the rest go
    back to the pool, where plain commands find them."""
    client = redis.Redis.from_url(redis_server.redis_url(), max_connections=16)
    q = Queue("q", queue_options("q"), prefix=prefix, client=client)
    direct = _direct(q)
    assert direct.keep == 2
    start = threading.Barrier(6)

    def run() -> None:
        start.wait(10)
        for n in range(50):
            q.publish(n)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert q.total_count() == 300
    assert len(direct.idle) <= 2
    pool = client.connection_pool
    assert len(pool._in_use_connections) == len(direct.idle)  # the others are available
    assert [client.ping() for _ in range(3)] == [True] * 3


def test_a_batch_answered_readonly_drops_its_connection(tmp_path: Path, prefix: str) -> None:
    """A node that became a replica answers a batch's writes READONLY: the replies are
    returned as they came, and the connection is not kept (after a failover behind one
    address, a new connection reaches the new primary)."""
    from .test_bad_input import _pair

    primary, replica = _pair(tmp_path)
    try:
        q = _queue(replica.url, prefix)
        engine = q.engine
        batch = engine.batch()
        batch.command("get", "k")
        batch.command("set", "k", "1")
        replies = engine.send(batch)
        assert replies[0] is None and isinstance(replies[1], redis.ReadOnlyError)
        assert _direct(q).idle == []
    finally:
        replica.stop()
        primary.stop()


def test_an_instrumented_redis_py_keeps_its_own_path(
    monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    """A tracer that wraps redis-py's command path (as OpenTelemetry's redis
    instrumentation does) sees every call: the direct path is not taken."""
    import functools

    url = redis_server.redis_url()
    original = redis.Redis.execute_command
    seen: list[object] = []

    @functools.wraps(original)
    def traced(self: redis.Redis, *args: object, **options: object) -> object:
        seen.append(args[0])
        return original(self, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", traced)
    client = redis.Redis.from_url(url)
    assert direct_for(client) is None
    q = Queue("q", queue_options("q"), prefix=prefix, client=client)
    q.publish("x")
    assert "FCALL" in seen or "EVALSHA" in seen
    patched = redis.Redis.from_url(url)
    monkeypatch.undo()
    patched.execute_command = lambda *a, **o: None  # type: ignore[method-assign]
    assert direct_for(patched) is None and direct_for(redis.Redis.from_url(url)) is not None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_another_thread_holds_the_pool_lock_does_not_hang(
    prefix: str,
) -> None:
    """A worker forks an isolated job's child while its heartbeat thread may be inside
    the pool (holding its lock): the child's first command resets the pool, which takes
    that lock first. The child gets fresh locks and finishes (a hang is killed at 15 s)."""
    client = redis.Redis.from_url(redis_server.redis_url())
    q = Queue("q", queue_options("q"), prefix=prefix, client=client)
    q.publish("parent")
    pool: object = client.connection_pool
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with pool._lock:  # type: ignore[attr-defined]
            held.set()
            done.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                _direct(q).idle.clear()  # the child's first call goes to the pool
                q.publish("child")
                code = 0
            finally:
                os._exit(code)
        deadline = time.monotonic() + 15
        status = None
        while time.monotonic() < deadline:
            done_pid, status = os.waitpid(pid, os.WNOHANG)
            if done_pid:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on a lock held at the fork")
    finally:
        done.set()
        holder.join(10)
    assert status is not None and os.waitstatus_to_exitcode(status) == 0
    assert q.total_count() == 2


PACKED_ARGS = [
    ("FCALL", "f", 2, "{p}:a", "{p}:b", b"\x00\xff", "é€", 0, -7, 1.5, 2**62),
    ("CLIENT SETNAME", "x"),  # a name of two words: redis-py splits it
    ("SET", memoryview(b"view"), bytearray(b"array")),  # views: bytes first
    (b"GET", "k"),
]


@pytest.mark.parametrize("args", PACKED_ARGS, ids=["fcall", "two-words", "views", "bytes-name"])
def test_a_command_is_packed_byte_for_byte_as_redis_py_packs_it(
    redis_client: redis.Redis, args: tuple[object, ...]
) -> None:
    direct = Direct(redis_client)
    conn = redis_client.connection_pool.get_connection()
    try:
        ours = direct._pack(conn, args)
        theirs = conn.pack_command(*args)
    finally:
        redis_client.connection_pool.release(conn)
    as_bytes = ours if isinstance(ours, bytes) else b"".join(ours)
    assert as_bytes == b"".join(theirs)


def test_an_argument_redis_py_refuses_is_refused_with_its_error(make_queue: QueueFactory) -> None:
    q = make_queue()
    with pytest.raises(redis.DataError):
        _direct(q).execute("SET", f"{q.engine._keys.ready}:x", True)
    assert _direct(q).execute("PING") == b"PONG"  # the connection kept is still in step


def test_a_packer_of_the_users_packs_every_call() -> None:
    packed: list[tuple[object, ...]] = []

    class Recording(PythonRespSerializer):
        def pack(self, *args: object) -> list[bytes]:
            packed.append(args)
            return super().pack(*args)  # type: ignore[no-any-return]

    client = redis.Redis.from_url(
        redis_server.redis_url(),
        command_packer=Recording(6000, Encoder("utf-8", "strict", False).encode),
    )
    direct = Direct(client)
    assert direct.execute("ECHO", "hello") == b"hello"
    assert ("ECHO", "hello") in packed
