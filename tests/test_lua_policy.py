"""A queue's policy travels to the scripts as one argument, a MessagePack map read by name
(``lua/_policy.lua``, ``Policy.packed``): what the scripts read is the policy's fields,
and a policy that is not one is refused before any write."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
import redis

from django_zqueue.engine.records import Ack
from django_zqueue.engine.records.links import FlowJob, Resolution
from django_zqueue.engine.records.spec import pack_map
from django_zqueue.engine.scripts import Call, Policy, source
from django_zqueue.engine.scripts.source import helper_order, lua_file
from django_zqueue.exceptions import ScriptArgumentError
from django_zqueue.queue import Queue

from .conftest import QueueFactory, snapshot

READ = "\nreturn cjson.encode(read_policy(ARGV[1]))\n"


def _policy_lua() -> str:
    return "\n".join([*(lua_file(f"_{h}") for h in helper_order(["_policy"])), lua_file("_policy")])


def _fields(policy: Policy) -> dict[str, Any]:
    return {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy) if f.init}


def test_the_scripts_read_every_field_by_name(q: Queue, redis_client: redis.Redis) -> None:
    policy = dataclasses.replace(q.engine.policy, qps=2.5, notify_cap=7, mode="aging")
    got = json.loads(redis_client.eval(_policy_lua() + READ, 0, policy.packed))
    want = _fields(policy)
    assert got == want


def test_every_number_of_the_policy_is_checked() -> None:
    """The Lua list of the policy's numbers is the dataclass's numeric fields."""
    lua = lua_file("_policy")
    numbers = [
        f.name for f in dataclasses.fields(Policy) if f.init and f.name not in ("mode", "compact")
    ]
    for name in numbers:
        assert f"'{name}'" in lua, name


@pytest.mark.parametrize(
    "bad",
    [
        b"x",
        b"",
        pack_map({"mode": "strict"}),  # its numbers missing
        "negative",
        "nan",
        "no mode",
    ],
)
def test_a_bad_policy_is_refused(q: Queue, redis_client: redis.Redis, bad: Any) -> None:
    fields = _fields(q.engine.policy)
    if bad == "negative":
        bad = pack_map({**fields, "notify_cap": -1})
    elif bad == "nan":
        bad = pack_map({**fields, "qps": float("nan")})
    elif bad == "no mode":
        bad = pack_map({k: v for k, v in fields.items() if k != "mode"})
    with pytest.raises(redis.ResponseError, match="ZQ_BAD_ARGUMENT: the queue policy"):
        redis_client.eval(_policy_lua() + READ, 0, bad)


def _leased(q: Queue) -> Any:
    q.publish("x", tag="a")
    msg = q.get()
    assert msg is not None
    return msg


#: each script that takes the policy: a call of it, made by the shard
CALLS: dict[str, Callable[[Queue], Call[Any]]] = {
    "release": lambda q: q.engine._shards[0].release(_leased(q)),
    "nack": lambda q: q.engine._shards[0].nack(_leased(q), "boom", 0, False),
    "touch": lambda q: q.engine._shards[0].touch(_leased(q), 1000, ""),
    "run_now": lambda q: (
        q.publish("x", tag="a", delay=60),
        q.engine._shards[0].run_now("a", None),
    )[-1],
    "set_priority": lambda q: (
        q.publish("x", tag="a"),
        q.engine._shards[0].set_priority("a", 5),
    )[-1],
    "requeue_dead": lambda q: q.engine._shards[0].requeue_dead("a"),
    "wf_clear": lambda q: q.engine._shards[0].wf_clear("a", b"x"),
    "ack": lambda q: q.engine._shards[0].ack(_leased(q), "", 1000, 3),
    "ack_many": lambda q: q.engine._shards[0].ack_many([Ack(_leased(q), '"r"', 60_000, 5)]),
    "cancel": lambda q: (q.publish("x", tag="a"), q.engine._shards[0].cancel("a", 60_000))[-1],
    "wf_resolve": lambda q: q.engine._shards[0].wf_resolve([Resolution("c", 1, "1", "1", "p")]),
    "group_check": lambda q: q.engine._shards[0].group_check([("a", 1)]),
    "claim": lambda q: (q.publish("x"), q.engine._shards[0].claim(10, "me"))[-1],
    "claim_fair": lambda q: (q.publish("x", group="g"), q.engine._shards[0].claim(10, "me"))[-1],
    "scan": lambda q: (q.publish("x"), q.engine._shards[0].scan(100))[-1],
    "fire": lambda q: q.engine._shards[0].fire("s", 0, None, None),
    "publish": lambda q: q.engine._shards[0].publish([q.prepare("x", tag="p1")]),
    "publish_once": lambda q: q.engine._shards[0].publish_once(q.prepare("x", tag="p1")),
    "wf_publish": lambda q: q.engine._shards[0].wf_publish([FlowJob(q.prepare("x", tag="p1"))]),
}
#: the options of the queue a script is called on (default: none)
OPTIONS: dict[str, dict[str, Any]] = {
    "group_check": {"fairness": "groups", "group_max_length": 5},
    "claim_fair": {"fairness": "groups", "group_concurrency": 2},
    "ack": {"keep_finished": 10},
    "cancel": {"keep_finished": 10},
}


@pytest.mark.parametrize("script", sorted(CALLS))
def test_a_script_given_a_bad_policy_writes_nothing(
    script: str, make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    q = make_queue(f"pol{script}", **OPTIONS.get(script, {}))
    call = CALLS[script](q)
    packed = q.engine.policy.packed
    assert call.args.count(packed) == 1, "the policy travels as one argument"
    before = snapshot(redis_client, prefix)
    broken = pack_map({**_fields(q.engine.policy), "aging_us": -5})
    for bad in (b"x", broken):
        args = tuple(bad if a == packed else a for a in call.args)
        with pytest.raises(ScriptArgumentError, match="queue policy"):
            q.engine.run(call._replace(args=args))
        with pytest.raises(redis.ResponseError, match="queue policy"):
            redis_client.eval(source(script), len(call.keys), *call.keys, *args)
    assert snapshot(redis_client, prefix) == before
    q.engine.run(call)  # and the call as made runs
