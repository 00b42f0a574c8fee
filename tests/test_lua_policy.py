"""A queue's policy travels to the scripts as one argument, a MessagePack map read by name
(``lua/_policy.lua``, ``Policy.packed``): what the scripts read is the policy's fields,
and a policy that is not one is refused before any write."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

import django_zqueue.engine
from django_zqueue.engine.records import Ack
from django_zqueue.engine.records.links import FlowJob, Resolution
from django_zqueue.engine.records.spec import pack_map
from django_zqueue.engine.scripts import POLICY_FIELDS, Call, Policy, policy_fields, source
from django_zqueue.engine.scripts.source import helper_order, lua_file
from django_zqueue.exceptions import QueueFull, ScriptArgumentError
from django_zqueue.queue import Queue

from .conftest import QueueFactory, snapshot

#: the fields of a policy as read_policy gives them, as JSON
READ = """
local p, out = read_policy(ARGV[1]), {}
for name in pairs(POLICY_KINDS) do
  local ok, x = pcall(function() return p[name] end)
  if ok then
    out[name] = x
  end
end
return cjson.encode(out)
"""


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
    """The Lua table of the policy's fields and their kinds is the dataclass's fields."""
    lua = lua_file("_policy")
    kinds = {"mode": "string", "compact": "boolean"}
    for name in POLICY_FIELDS:
        assert f"{name} = '{kinds.get(name, 'number')}'" in lua, name
    assert len(re.findall(r"\w+ = '(?:number|string|boolean)'", lua)) == len(POLICY_FIELDS)


@pytest.mark.parametrize(
    "bad",
    [
        b"x",
        b"",
        pack_map({"mode": "strict", "bogus": 1}),  # a name that is no field
        pack_map({"mode": 5}),  # a mode that is no text
        pack_map({"compact": 1}),  # a flag that is no boolean
        b"\x92\x01\x02",  # a MessagePack list, no map
        "negative",
        "nan",
    ],
)
def test_a_bad_policy_is_refused(q: Queue, redis_client: redis.Redis, bad: Any) -> None:
    fields = _fields(q.engine.policy)
    if bad == "negative":
        bad = pack_map({**fields, "notify_cap": -1})
    elif bad == "nan":
        bad = pack_map({**fields, "qps": float("nan")})
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
    packed = q.engine.policy.packed_for(script)
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


@pytest.mark.parametrize("script", sorted(CALLS))
def test_a_script_is_sent_only_the_fields_it_reads(script: str, make_queue: QueueFactory) -> None:
    """Each call carries the fields its source names (``Policy.packed_for``), fewer than
    the whole policy, and the call runs with them (a field read but not sent raises)."""
    q = make_queue(f"pof{script}", **OPTIONS.get(script, {}))
    call = CALLS[script](q)
    sent = q.engine.policy.packed_for(script)
    assert sent in call.args
    names = policy_fields(script, POLICY_FIELDS)
    assert names and len(names) < len(POLICY_FIELDS)
    assert sent == pack_map({n: getattr(q.engine.policy, n) for n in names})
    q.engine.run(call)


def test_reading_a_field_not_sent_is_refused(q: Queue, redis_client: redis.Redis) -> None:
    """A script that reads a field its caller did not send fails loudly: never a nil
    taken for "no limit"."""
    lua = _policy_lua() + "\nreturn read_policy(ARGV[1]).max_length\n"
    assert redis_client.eval(lua, 0, pack_map({"max_length": 7})) == 7
    with pytest.raises(
        redis.ResponseError, match="ZQ_BAD_ARGUMENT: the queue policy sent holds no max_length"
    ):
        redis_client.eval(lua, 0, pack_map({"mode": "strict"}))


def test_a_field_a_helper_reads_is_sent() -> None:
    """The fields are found in the source the server runs, helpers included: a script
    that reads the policy through a helper (the history's trim in ack) is sent what the
    helper reads."""
    assert "keep_finished" in policy_fields("ack", POLICY_FIELDS)
    assert "group_concurrency" in policy_fields("claim_fair", POLICY_FIELDS)
    assert "group_concurrency" not in policy_fields("claim", POLICY_FIELDS)


def test_a_policy_kept_by_the_library_is_the_one_sent(make_queue: QueueFactory) -> None:
    """The library keeps each policy it decoded, by its bytes (``lua/_policy.lua``): two
    queues with different policies, called in turn, each get their own, past the bound
    of kept policies (the table is emptied and built again)."""
    small = make_queue("polkept1", max_length=2)
    large = make_queue("polkept2", max_length=1000)
    for q in (small, large):
        q.publish("x", tag="a")
        q.publish("x", tag="b")
    with pytest.raises(QueueFull):
        small.publish("x", tag="c")
    large.publish("x", tag="c")  # its own max_length, not the small queue's
    # more distinct policies than the library keeps: the first still reads as its own
    others = [make_queue(f"polkept{i}", max_length=10 + i) for i in range(3, 60)]
    for q in others:
        q.publish("x", tag="a")
    with pytest.raises(QueueFull):
        small.publish("x", tag="d")
    large.publish("x", tag="d")
    assert small.counts()["ready"] == 2 and large.counts()["ready"] == 4


def test_a_kept_policy_cannot_be_changed(redis_client: redis.Redis) -> None:
    """Every call shares a kept policy: a script that writes a field of it, one sent or
    not, raises, and the policy reads unchanged after."""
    write = "\nlocal p = read_policy(ARGV[1])\np[ARGV[2]] = 1\nreturn 0\n"
    read = "\nlocal p = read_policy(ARGV[1])\npcall(function() p.max_length = 1 end)\n"
    packed = pack_map({"max_length": 7})
    for name in ("max_length", "qps"):
        with pytest.raises(redis.ResponseError, match="ZQ_BAD_ARGUMENT: the queue policy is"):
            redis_client.eval(_policy_lua() + write, 0, packed, name)
    got = redis_client.eval(_policy_lua() + read + "return p.max_length\n", 0, packed)
    assert got == 7


def test_no_script_writes_to_its_policy() -> None:
    """The policy map is shared by every call (kept by the library): an assignment to a
    field of it in any script or helper would change the next call's policy. Existing
    fields would raise at run time (the previous test); this finds one in a script that no
    test runs down that path."""
    lua_dir = Path(django_zqueue.engine.__file__).parent / "lua"
    names = {path.stem for path in lua_dir.glob("*.lua")}
    found = []
    for name in sorted(names):
        text = lua_file(name)
        holders = set(re.findall(r"local\s+(\w+)\s*=\s*read_policy\(", text))
        holders |= set(re.findall(r"(\w+)\s*=\s*read_policy\(", text))
        holders |= {"policy", "p"} if "read_policy(" in text else set()
        for h in holders:
            if re.search(rf"\b{h}\.\w+\s*=[^=]|\b{h}\[[^\]]+\]\s*=[^=]", text):
                found.append(f"{name}: {h}")
    assert found == []
