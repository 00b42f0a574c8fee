"""Every script is all-or-nothing for every key it touches: with any one of its keys of
the wrong type, or a counter it reads that is not a number, a script either works or
raises before its first write (Redis does not roll a script back).

Each script has a scenario that builds one real call of it; the test corrupts each of
that call's KEYS in turn (so a key added to a script is covered without a new test),
then the counters of ``ctr``, ``stats`` and ``rate``, and compares every key of the
queue before and after a call that raised.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from django_zqueue.engine import schedstore
from django_zqueue.engine.joblogs import pack_line
from django_zqueue.engine.records import Ack
from django_zqueue.engine.records.links import FlowJob, Kid, Ref, Resolution
from django_zqueue.engine.records.spec import JobOptions, JobSpec
from django_zqueue.engine.scripts import SCRIPT_NAMES, Call
from django_zqueue.engine.shard import Shard
from django_zqueue.queue import Queue
from django_zqueue.queue import durable_calls as dc
from django_zqueue.queue.flow import publish_flow

from .conftest import QueueFactory, snapshot
from .records_util import to_json_layout

Scenario = Callable[[Queue], Call[Any]]


def _leased(q: Queue) -> Any:
    q.publish("a", tag="a")
    q.publish("b", tag="b", delay=60)
    msg = q.get()
    assert msg is not None
    return msg


def _stepped(q: Queue) -> Any:
    """A leased job with one durable step recorded."""
    msg = _leased(q)
    assert q.engine.run(dc.step_call(q.engine._shards[0], msg, "s:a", "1", 60_000))
    return msg


def _dead(q: Queue) -> str:
    q.publish("d", tag="d")
    msg = q.get()
    assert msg is not None
    q.nack(msg, "boom", dead=True)
    return "d"


def _flow(q: Queue) -> tuple[str, str]:
    parent, child = q.prepare("p", "p"), q.prepare("c", "c")
    publish_flow(
        [
            (q, FlowJob(parent, kids=(Kid(q.name, "c", 1),))),
            (q, FlowJob(child, parents=(Ref(q.name, "p"),))),
        ]
    )
    return "p", "c"


def _flow_ended(q: Queue) -> bytes:
    _flow(q)
    msg = q.get()
    assert msg is not None and msg.tag == "p"
    q.engine.run(q.engine._shard_for("p").ack(msg, "", 60_000, None, "1"))  # its end in the outbox
    seen = q.engine._client.hget(q.engine._keys.wf_res, "p")
    assert seen is not None
    return bytes(seen)


def _expired_lease(q: Queue) -> None:
    q.publish("a", tag="a", visibility_timeout=1, expires=60)
    q.publish("b", tag="b", delay=60)
    q.get()
    q.engine._client.zadd(q.engine._keys.leased, {"a": 1})  # its lease ran out
    q.engine._client.zadd(q.engine._keys.delayed, {"b": 1})  # due


def _scan(q: Queue) -> Call[Any]:
    _expired_lease(q)
    _dead(q)
    return q.engine._shards[0].scan(100)


SCENARIOS: dict[str, Scenario] = {
    "publish": lambda q: q.engine._shards[0].publish([q.prepare("x", "x", expires=60)]),
    "publish_lean": lambda q: q.engine._shards[0].publish(
        [q.prepare({"task": "t", "args": [1], "kwargs": {"k": 2}}, "x", priority=3)]
    ),
    "publish_once": lambda q: q.engine._shards[0].publish_once(
        q.prepare("x", "x")._replace(spec=JobSpec(unique_ms=60_000, max_retries=1))
    ),
    "claim": lambda q: (
        q.publish("a", tag="a", expires=60),
        q.publish("b", tag="b", delay=0.001),
        q.engine._shards[0].claim(5, "c"),
    )[-1],
    "ack": lambda q: q.engine._shards[0].ack(_leased(q), '"r"', 60_000, 5),
    "ack_many": lambda q: q.engine._shards[0].ack_many([Ack(_leased(q), '"r"', 60_000, 5)]),
    "release": lambda q: q.engine._shards[0].release(_leased(q)),
    "nack": lambda q: q.engine._shards[0].nack(_leased(q), "boom", 0, False),
    "touch": lambda q: q.engine._shards[0].touch(_leased(q), 60_000, '{"v":0.5}'),
    "scan": _scan,
    "delete": lambda q: (q.publish("a", tag="a"), q.engine._shards[0].delete("a", False))[-1],
    "requeue_dead": lambda q: q.engine._shards[0].requeue_dead(_dead(q)),
    "purge_dead": lambda q: (_dead(q), q.engine._shards[0].purge_dead(100))[-1],
    "range_after": lambda q: (
        _dead(q),
        q.engine._shards[0].range_after(q.engine._keys.dead, (0.0, ""), 2.0**60, 10),
    )[-1],
    "search": lambda q: (
        q.publish({"a": 1}, tag="a"),
        q.engine._shards[0].search("ready", b"a", ("0", ""), 1000, 10),
    )[-1],
    "info": lambda q: (q.publish("a", tag="a"), q.engine._shards[0].info("a"))[-1],
    "state": lambda q: (q.publish("a", tag="a"), q.engine._shards[0].state("a"))[-1],
    "positions": lambda q: (q.publish("a", tag="a"), q.engine._shards[0].positions(["a"]))[-1],
    "rank_key": lambda q: (
        q.publish_prepared([q.prepare("a", "a", options=JobOptions(ordering_key="A"))]),
        q.engine._shards[0].rank_key("a", 10),
    )[-1],
    "fire": lambda q: (
        q.engine._client.zadd(q.engine._sched_keys.sched, {"s": 1000}),
        q.engine._shards[0].fire("s", 1000, 2000, q.prepare("tick", "cron:s:1000")),
    )[-1],
    "sched_put": lambda q: (
        q.engine._client.zadd(q.engine._sched_keys.sched, {"s": 1000}),
        q.engine._client.hset(q.engine._sched_keys.sched_defs, "s", '{"digest": "d"}'),
        schedstore.put_call(q.engine._sched_keys, "s", "d", '{"digest": "e"}', 2000, "set"),
    )[-1],
    "cancel": lambda q: (_leased(q), q.engine._shards[0].cancel("a", 60_000))[-1],
    "run_now": lambda q: (
        q.publish("a", tag="a", delay=60),
        q.engine._shards[0].run_now("a", None),
    )[-1],
    "set_priority": lambda q: (q.publish("a", tag="a"), q.engine._shards[0].set_priority("a", 5))[
        -1
    ],
    "wf_publish": lambda q: q.engine._shards[0].wf_publish(
        [
            FlowJob(q.prepare("p", "p"), kids=(Kid(q.name, "c", 1),)),
            FlowJob(q.prepare("c", "c"), parents=(Ref(q.name, "p"),)),
        ]
    ),
    "wf_link": lambda q: (
        q.publish("p", tag="p"),
        q.engine._shards[0].wf_link("p", '["q", "c", 1]', 100),
    )[-1],
    "wf_resolve": lambda q: (
        _flow(q),
        q.engine._shards[0].wf_resolve([Resolution("c", 1, "1", '"r"', "p")]),
    )[-1],
    "wf_clear": lambda q: q.engine._shards[0].wf_clear("p", _flow_ended(q)),
    "steps": lambda q: dc.steps_call(q.engine._shards[0], _stepped(q), 60_000),
    "step": lambda q: dc.step_call(q.engine._shards[0], _stepped(q), "s:b", "2", 60_000),
    "park": lambda q: dc.park_call(q.engine._shards[0], _stepped(q), "z:nap", 60_000, 60_000),
    "signal": lambda q: (
        q.publish("a", tag="a", delay=60),
        dc.signal_call(q.engine._shards[0], "a", "ev", '"go"', 60_000),
    )[-1],
    "parked": lambda q: (
        q.publish("a", tag="a", delay=60),
        dc.parked_call(q.engine._shards[0], "a"),
    )[-1],
    "log_append": lambda q: Call(
        "log_append", (q.engine._keys.logs,), ("a", 10, pack_line(1, 1, "INFO", "x")), list
    ),
}
FAIR = {"claim_fair", "group_check"}

#: more calls of a script whose key checks depend on the path it takes (claim.lua checks
#: all its keys only on the paths that may write any of them; ack_many checks `body` only
#: for a record of the JSON layout; publish checks each key only when a job goes there)
PATHS: dict[str, Scenario] = {
    "publish, a ready job": lambda q: q.engine._shards[0].publish([q.prepare("x", "x")]),
    "publish, a job with its own score": lambda q: q.engine._shards[0].publish(
        [q.prepare("x", "x")._replace(spec=JobSpec(score=5.0))]
    ),
    "publish, a delayed job": lambda q: q.engine._shards[0].publish(
        [q.prepare("x", "x", delay=60), q.prepare("y", "y")]
    ),
    "publish, the JSON layout": lambda q: Shard(
        q.name, 0, q.engine._keys, dataclasses.replace(q.engine.policy, compact=False)
    ).publish([q.prepare("x", "x")]),
    "claim, every record claimed": lambda q: (
        q.publish("a", tag="a"),
        q.publish("b", tag="b"),
        q.engine._shards[0].claim(5, "c"),
    )[-1],
    "claim, a corrupt record": lambda q: (
        q.publish("a", tag="a"),
        q.publish("b", tag="b"),
        q.engine._client.hset(q.engine._keys.meta, "a", "junk"),
        q.engine._shards[0].claim(5, "c"),
    )[-1],
    "ack_many, a record of the JSON layout": lambda q: (
        msg := _leased(q),
        to_json_layout(q.engine._client, q.engine._keys, msg.tag),
        q.engine._shards[0].ack_many([Ack(msg, '"r"', 60_000, 5)]),
    )[-1],
    "claim, an expired job": lambda q: (
        q.publish("a", tag="a", expires=0.001),
        q.publish("b", tag="b"),
        time.sleep(0.01),
        q.engine._shards[0].claim(5, "c"),
    )[-1],
}


def scenario(name: str, make_queue: QueueFactory, n: int) -> tuple[Queue, Call[Any]]:
    if name == "claim_fair":
        q = make_queue(f"f{n}", fairness="groups", group_concurrency=1)
        q.publish("a", tag="a", group="g", expires=60)
        q.publish("b", tag="b", group="g")
        q.publish("d", tag="d", delay=0.001)
        return q, q.engine._shards[0].claim(5, "c")
    if name == "group_check":  # a group past the index's count: its entries are read
        q = make_queue(f"g{n}", fairness="groups", group_max_length=2)
        q.publish("a", tag="a", group="g")
        q.publish("b", tag="b", group="g", delay=60)
        return q, q.engine._shards[0].group_check([("g", 1)])
    q = make_queue(f"q{n}")
    return q, (PATHS.get(name) or SCENARIOS[name])(q)


def test_every_script_has_a_scenario() -> None:
    assert set(SCENARIOS) | FAIR == set(SCRIPT_NAMES)


def wrong_type(client: redis.Redis, key: str) -> None:
    """Make ``key`` a value of another type than the script expects."""
    if client.type(key) == b"string":
        client.delete(key)
        client.hset(key, "junk", "1")
    else:
        client.delete(key)
        client.set(key, "junk")


def check(q: Queue, call: Call[Any], client: redis.Redis, prefix: str, what: str) -> bool:
    """Run the call: it works, or raises having written nothing. Returns whether it
    raised."""
    before = snapshot(client, prefix)
    error: Exception | None = None
    try:
        q.engine._scripts.run(call)
    except Exception as exc:  # any error: then nothing may have been written
        error = exc
    if error is None:
        return False
    after = snapshot(client, prefix)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"{what} raised {error!r} after writing {changed}"
    return True


@pytest.mark.parametrize("name", [*SCRIPT_NAMES, *PATHS])
def test_a_key_of_the_wrong_type_never_stops_a_script_half_way(
    name: str, make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    _, first = scenario(name, make_queue, 0)
    for i in range(len(first.keys)):
        q, call = scenario(name, make_queue, i + 1)
        key = call.keys[i]
        wrong_type(redis_client, key)
        check(q, call, redis_client, prefix, f"{name} with KEYS[{i + 1}] {key} corrupt")


COUNTER_FIELDS = {
    "ctr": [
        "tok",
        "tseq",
        "seq",
        "clock",
        "dclock",
        "vt",
        "gmin",
        "fsweep",
        "gsweep",
        "qsweep",
        "g:",
        "g:g",
    ],
    "stats": [
        "enqueued",
        "claimed",
        "acked",
        "failed",
        "retried",
        "dead",
        "expired",
        "deleted",
        "requeued",
        "released",
        "cancelled",
        "run_ms",
        "corrupt",
        "jobs_expired",
    ],
    "rate": ["tokens", "ts"],
}


@pytest.mark.parametrize("name", [*SCRIPT_NAMES, *PATHS])
@pytest.mark.parametrize("hash_key", [*sorted(COUNTER_FIELDS), "wf"])
@pytest.mark.parametrize("junk", ["x", "1.5", ""])
def test_a_counter_that_is_not_a_number_never_stops_a_script_half_way(
    name: str,
    hash_key: str,
    junk: str,
    make_queue: QueueFactory,
    redis_client: redis.Redis,
    prefix: str,
) -> None:
    q, call = scenario(name, make_queue, 0)
    if hash_key == "wf":  # every workflow link hash the call names
        for key in call.keys:
            if ":wf:" in key:
                redis_client.hset(key, mapping={"need": junk, "got": junk})
    else:
        key = getattr(q.engine._shards[0].keys, hash_key)
        redis_client.hset(key, mapping=dict.fromkeys(COUNTER_FIELDS[hash_key], junk))
    check(q, call, redis_client, prefix, f"{name} with {hash_key} fields {junk!r}")


def test_the_scripts_know_the_type_of_every_key() -> None:
    """lua/_guard.lua's KEY_TYPES agrees with keys.KEY_TYPES (the doctor's), and names
    every fixed key but those whose writes cannot stop a script (stats, notify, errors,
    progress, logs), paused (only its presence is read) and wctl (no script's)."""
    import re
    from importlib import resources

    from django_zqueue.engine.keys import KEY_TYPES

    text = (resources.files("django_zqueue.engine") / "lua" / "_guard.lua").read_text()
    table = re.search(r"^local KEY_TYPES = \{(.*?)\}", text, re.M | re.S)
    assert table
    lua = dict(re.findall(r"(\w+) = '(zset|hash|string)'", table[1]))
    assert len(lua) == table[1].count("=")
    assert {k: v for k, v in lua.items() if k in KEY_TYPES} == {
        k: v for k, v in KEY_TYPES.items() if k in lua
    }
    # logs: its writes are soft (a history trim, a delete or a scan never fails on it);
    # wctl: no script touches it (a worker's orders, read and written by the engine's
    # pipelines)
    assert set(KEY_TYPES) - set(lua) == {
        "stats",
        "notify",
        "paused",
        "errors",
        "progress",
        "logs",
        "wctl",
    }
