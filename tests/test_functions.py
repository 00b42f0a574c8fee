"""The scripts as one Redis Functions library (``luasource.library``): what it registers,
that its helpers keep no state between calls, that a server which lost it (restarted
without persistence) gets it again with each call run once, that two releases' libraries
live side by side, the flags (read-only, allowed at ``maxmemory``), and the EVALSHA
fallback (``LUA_FUNCTIONS = False``, a Redis Cluster client)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_zqueue import RedisFull, conf
from django_zqueue.conf import queue_options
from django_zqueue.engine.scripts import SCRIPT_NAMES, Scripts
from django_zqueue.engine.scripts.source import (
    ALLOW_OOM,
    PROTOCOL_CORES,
    PROTOCOL_FUNCTIONS,
    READ_ONLY,
    helper_order,
    library,
    lua_file,
)
from django_zqueue.queue import Queue

from .redis_private import PrivateRedis

BODY = {"task": "x", "args": [], "kwargs": {}}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PrivateRedis]:
    s = PrivateRedis(tmp_path / "fn")
    yield s
    s.stop()


def libraries(client: redis.Redis) -> dict[str, dict[str, list[str]]]:
    """Library name -> function name -> its flags (FUNCTION LIST)."""
    out: dict[str, dict[str, list[str]]] = {}
    for lib in client.function_list():
        entry = dict(zip(lib[0::2], lib[1::2], strict=True))
        functions = {}
        for fn in entry[b"functions"]:
            f = dict(zip(fn[0::2], fn[1::2], strict=True))
            functions[f[b"name"].decode()] = sorted(x.decode() for x in f[b"flags"])
        out[entry[b"library_name"].decode()] = functions
    return out


def commandstat(client: redis.Redis, name: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0))


def test_the_library_registers_every_script_with_its_flags(server: PrivateRedis) -> None:
    client = server.client()
    q = Queue("q", queue_options("q"), prefix="fn", client=client)
    q.publish(BODY)  # the first call loads it
    lib = library(SCRIPT_NAMES)
    assert list(libraries(client)) == [lib.name]
    registered = libraries(client)[lib.name]
    assert set(registered) == set(lib.functions.values())
    for script, function in lib.functions.items():
        want = ["no-writes"] if script in READ_ONLY else []
        want = ["allow-oom"] if script in ALLOW_OOM else want
        assert registered[function] == want, script
    # its name is the hash of its text: a changed script is another library
    assert re.fullmatch(r"zqueue_[0-9a-f]{12}", lib.name)
    assert all(f == f"zq_{lib.name[7:]}_{s}" for s, f in lib.functions.items())


def test_helpers_keep_no_state_between_calls() -> None:
    """A helper's top-level locals live as long as the library: each must be a function
    or a constant, never assigned again nor (a table) written into."""
    protocol = (*PROTOCOL_CORES, *PROTOCOL_FUNCTIONS)
    for helper in dict.fromkeys(helper_order(SCRIPT_NAMES) + helper_order(protocol)):
        text = lua_file(f"_{helper}")
        for name in re.findall(r"^local (?!function)(\w+)\s*=", text, re.MULTILINE):
            for line in text.splitlines():
                code = line.split("--")[0]
                assert not re.search(rf"(?<![\w.]){name}\s*(\[[^\]]*\]|\.\w+)?\s*=(?!=)", code) or (
                    code.lstrip().startswith(f"local {name}")
                ), (helper, name, line)
        # and no top-level local without a value (one filled in later)
        assert not re.findall(r"^local \w+(\s*,\s*\w+)*\s*$", text, re.MULTILINE), helper


def test_a_mutated_constant_would_be_caught() -> None:
    """The check above is not blind: a helper that writes into its table is found."""
    bad = "local SEEN = {}\nlocal function mark(x)\n  SEEN[x] = true\nend\n"
    name = "SEEN"
    hits = [
        line
        for line in bad.splitlines()
        if re.search(rf"(?<![\w.]){name}\s*(\[[^\]]*\]|\.\w+)?\s*=(?!=)", line)
        and not line.lstrip().startswith(f"local {name}")
    ]
    assert hits == ["  SEEN[x] = true"]


def test_a_restarted_server_gets_the_library_again_and_runs_each_call_once(
    server: PrivateRedis,
) -> None:
    """No persistence: a restart loses the data and the library. The next call and the
    next pipeline get ``Function not found`` (Redis ran nothing), load it, and run once."""
    client = server.client()
    q = Queue("q", queue_options("q"), prefix="fn", client=client)
    q.publish(BODY)
    server.stop()
    server.start()
    assert libraries(client) == {}
    q.publish(BODY, tag="one")  # a single call
    assert q.total_count() == 1 and q.stats()["enqueued"] == 1
    server.stop()
    server.start()
    q.publish_many([BODY, BODY])  # a pipeline of calls
    msgs, _ = q.claim(2)
    assert len(msgs) == 2
    server.stop()
    server.start()
    q.publish_many([BODY] * 3)
    msgs, _ = q.claim(3)
    client.function_flush()  # lost between the claim and the acks
    assert q.ack_many(msgs) == [True, True, True]
    assert q.stats()["acked"] == 3  # each ack ran exactly once


def test_two_releases_libraries_live_side_by_side(server: PrivateRedis) -> None:
    """Another release's library (another hash) is neither replaced nor used: each
    process calls only its own functions."""
    client = server.client()
    ours = library(SCRIPT_NAMES)
    theirs = ours.code.replace(ours.name[7:], "0" * 12)  # same text, other release
    client.function_load(theirs)
    q = Queue("q", queue_options("q"), prefix="fn", client=client)
    q.publish(BODY)  # loads ours (its first FCALL got "Function not found")
    before = commandstat(client, "fcall")
    tag = q.publish(BODY)
    assert q.state(tag) == "ready"
    assert sorted(libraries(client)) == sorted([ours.name, "zqueue_000000000000"])
    assert commandstat(client, "fcall") == before + 1
    assert commandstat(client, "fcall_ro") >= 1  # state() is read-only


def test_at_maxmemory_workers_drain_and_publishes_are_refused_whole(
    server: PrivateRedis,
) -> None:
    """``allow-oom`` on the scripts that finish work: a full server still takes acks,
    nacks and deletes; a publish is refused before it runs (nothing written)."""
    client = server.client()
    q = Queue("q", queue_options("q"), prefix="fn", client=client)
    q.publish_many([BODY] * 2)
    msgs, _ = q.claim(2)
    q.publish(BODY, tag="waiting")
    client.config_set("maxmemory", 1)
    try:
        assert q.ack(msgs[0])
        assert q.nack(msgs[1], "boom", dead=True) == "dead"
        assert q.delete("waiting")
        before = client.dbsize(), client.hgetall(q.engine._keys.stats)
        with pytest.raises(RedisFull):
            q.publish(BODY, tag="more")
        assert (client.dbsize(), client.hgetall(q.engine._keys.stats)) == before
        assert not q.exists("more")
    finally:
        client.config_set("maxmemory", 0)
    assert q.stats()["acked"] == 1 and q.counts()["dead"] == 1


def test_lua_functions_off_sends_evalsha(server: PrivateRedis, settings: Any) -> None:
    settings.ZQUEUE = {**settings.ZQUEUE, "LUA_FUNCTIONS": False}
    conf.reset()
    try:
        client = server.client()
        q = Queue("q", queue_options("q"), prefix="fn", client=client)
        assert q.engine._scripts.library is None
        tag = q.publish(BODY)
        assert q.state(tag) == "ready"
        assert commandstat(client, "evalsha") >= 2 and commandstat(client, "fcall") == 0
        assert libraries(client) == {}
    finally:
        conf.reset()


def test_a_read_only_function_refuses_to_write(server: PrivateRedis) -> None:
    """The ``no-writes`` flag is Redis' promise, not ours: a write from such a function is
    refused, so the flag cannot hide a script that writes."""
    client = server.client()
    code = "#!lua name=zqtest_ro\n" + (
        "redis.register_function{function_name='zqtest_ro_write', flags={'no-writes'},"
        "callback=function(KEYS, ARGV) return redis.call('SET', KEYS[1], 'x') end}"
    )
    client.function_load(code)
    with pytest.raises(redis.ResponseError, match=r"(?i)write"):
        client.execute_command("FCALL", "zqtest_ro_write", 1, "k")
    assert client.get("k") is None


def test_a_cluster_client_keeps_evalsha() -> None:
    """redis-py asks a cluster node for an FCALL's keys before each call: a cluster
    client sends EVALSHA (routed by its first key, locally)."""
    from redis.cluster import RedisCluster

    fake: Any = RedisCluster.__new__(RedisCluster)  # never connects: only its type counts
    scripts = Scripts(fake)
    assert scripts.library is None
    assert all(verb == "EVALSHA" for verb, _ in scripts.heads.values())
