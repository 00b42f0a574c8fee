"""Contracts of the Lua scripts themselves: headers, keys, return codes, bounded work."""

from __future__ import annotations

import dataclasses
import math
import re
from importlib import resources
from typing import Any

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from django_zqueue.engine import schedstore
from django_zqueue.engine.keys import SCRIPT_ROLES
from django_zqueue.engine.records import NewJob
from django_zqueue.engine.records.codec import read_fields
from django_zqueue.engine.records.spec import JobOptions, JobSpec
from django_zqueue.engine.scripts import (
    ERRORS,
    SCRIPT_NAMES,
    Batch,
    Call,
    ScriptError,
    Scripts,
    SequenceExhausted,
    includes,
    script_error,
    source,
)
from django_zqueue.engine.scripts.source import (
    PROTOCOL_CORES,
    PROTOCOL_FUNCTIONS,
    protocol_library,
    script_text,
)
from django_zqueue.engine.shard import Shard
from django_zqueue.exceptions import CorruptKey, QueueFull, ZQueueError
from django_zqueue.queue import Queue
from django_zqueue.queue import durable_calls as dc

from .conftest import QueueFactory

LUA = resources.files("django_zqueue.engine") / "lua"


def op_source(name: str) -> str:
    return (LUA / f"{name}.lua").read_text(encoding="utf-8")


LUA_FILES = sorted(p.name[:-4] for p in LUA.iterdir() if p.name.endswith(".lua"))
HELPERS = [name for name in LUA_FILES if name.startswith("_")]


#: the wire protocol's scripts (lua/proto_*.lua): functions of the protocol library only
PROTOCOL_SCRIPTS = tuple(PROTOCOL_FUNCTIONS)


def test_every_lua_file_is_registered() -> None:
    """Each script is one of SCRIPT_NAMES (the package's library, EVALSHA) or one of the
    wire protocol's (its own library, under a stable name), never both."""
    scripts = {n for n in LUA_FILES if not n.startswith("_")}
    assert scripts == set(SCRIPT_NAMES) | set(PROTOCOL_SCRIPTS)
    assert not set(SCRIPT_NAMES) & set(PROTOCOL_SCRIPTS)
    assert all(n.startswith("proto_") for n in PROTOCOL_SCRIPTS)
    assert not [n for n in SCRIPT_NAMES if n.startswith("proto_")]


def _code(text: str) -> str:
    """Lua code without comments and string literals."""
    text = re.sub(r"--[^\n]*", "", text)
    return re.sub(r"'[^'\n]*'", "''", text)  # the scripts quote with ' only


def _defines(helper: str) -> set[str]:
    """The top-level names a helper file defines (functions and constants)."""
    return set(re.findall(r"^local (?:function )?(\w+)", _code(op_source(helper)), re.MULTILINE))


def _uses(name: str) -> set[str]:
    """The helpers whose names file ``name`` uses (calls a function, reads a constant):
    a bare word, not a table field (``k.notify``) nor a table constructor key."""
    code = _code(op_source(name))
    own = _defines(name) if name.startswith("_") else set()
    used = set()
    for helper in HELPERS:
        if helper == name:
            continue
        for word in _defines(helper) - own:
            if re.search(rf"(?<![.\w]){word}\b(?!\s*=[^=])", code):
                used.add(helper[1:])
    return used


@pytest.mark.parametrize("name", LUA_FILES)
def test_includes_are_exactly_the_helpers_used(name: str) -> None:
    """Every script and helper includes the helpers it uses, and no other."""
    assert sorted(includes(name)) == sorted(_uses(name))
    assert len(set(includes(name))) == len(includes(name))  # none twice


@pytest.mark.parametrize("helper", HELPERS)
def test_each_helper_defines_names_no_other_does(helper: str) -> None:
    assert _defines(helper), helper
    for other in HELPERS:
        if other != helper:
            assert not _defines(helper) & _defines(other), (helper, other)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_source_holds_each_helper_once_after_its_own_helpers(name: str) -> None:
    text = source(name)
    for helper in HELPERS:
        assert text.count(f"-- {helper}.lua:") <= 1
    for helper in includes(name):
        at = text.index(f"-- _{helper}.lua:")
        assert at < text.index(f"-- {name}.lua")
        for inner in includes(f"_{helper}"):
            assert text.index(f"-- _{inner}.lua:") < at


def test_protocol_library_holds_each_helper_once_before_the_cores() -> None:
    """The protocol library: every helper its scripts and the cores include, once, after
    the helpers it uses; then each core (an internal script's whole text, as a local
    function), then the protocol's functions."""
    text = protocol_library("0.0.0").code
    for helper in HELPERS:
        assert text.count(f"-- {helper}.lua:") <= 1
    first_core = text.index("local function publish_core(KEYS, ARGV)")
    for name in (*PROTOCOL_CORES, *PROTOCOL_SCRIPTS):
        at = text.index(f"-- {name}.lua")
        for helper in includes(name):
            h = text.index(f"-- _{helper}.lua:")
            assert h < first_core < at
            for inner in includes(f"_{helper}"):
                assert text.index(f"-- _{inner}.lua:") < h
        assert text.count(script_text(name)) == 1  # the file's text as run, not a copy
    assert text.index("local function positions_core(KEYS, ARGV)") < text.index(
        "-- proto_publish.lua"
    )


def test_lua_bounds_are_generated_from_bounds_py() -> None:
    """lua/_bounds.lua is bounds.py's table as Lua, to the letter (regenerate it with
    ``python -m django_zqueue.conf.bounds``)."""
    from django_zqueue.conf import bounds

    assert op_source("_bounds") == bounds.lua_source()
    text = op_source("_bounds")
    assert f"local MAX_DELAY_MS = {bounds.MAX_DELAY * 1000}" in text
    for name, (lo, hi, _) in bounds.JOB_BOUNDS.items():
        lua = [bounds.lua_number(lo), bounds.lua_number(hi)]
        line = rf"^  if name == '{name}' then return {lua[0]}, {lua[1]}, (true|false) end$"
        assert re.search(line, text, re.M), name


def test_lua_reads_the_generated_bounds(q: Queue) -> None:
    """The scripts use the generated table: each bound of a job option, one past it, is
    refused by publish.lua with the option's name."""
    from django_zqueue.conf import bounds
    from django_zqueue.engine.records.spec import pack_map

    for name in ("priority", "max_retries", "visibility_timeout_ms", "weight"):
        lo, hi, whole = bounds.JOB_BOUNDS[name]
        for bad in (lo - (1 if whole else lo / 2), hi + 1):
            arg = pack_map({"id": "t", "body": b"1", name: bad})
            keys = q.engine._shards[0].publish([NewJob("t", b"1")]).keys
            with pytest.raises(redis.ResponseError, match=f"ZQ_BAD_ARGUMENT.*{name}"):
                q.engine._client.eval(
                    source("publish"), len(keys), *keys, q.engine.policy.packed, arg
                )
    assert q.counts()["ready"] == 0


#: the number options publish.lua reads (the others are read by the scripts that take them)
PUBLISH_NUMBERS = (
    "priority",
    "score",
    "delay_ms",
    "run_at_ms",
    "max_retries",
    "visibility_timeout_ms",
    "weight",
    "expires_in_ms",
    "expires_at_ms",
)


@pytest.mark.parametrize("name", PUBLISH_NUMBERS)
def test_publish_checks_each_number_option(q: Queue, name: str) -> None:
    """Each number option of a job: refused (ZQ_BAD_ARGUMENT naming it, nothing written)
    when not a number, NaN, infinite, past either bound or, for an integer option,
    fractional; its bounds themselves are taken."""
    from django_zqueue.conf import bounds
    from django_zqueue.engine.records.spec import pack_map

    lo, hi, whole = bounds.JOB_BOUNDS[name]
    keys = q.engine._shards[0].publish([NewJob("t", b"1")]).keys

    def publish(value: object, tag: str = "t") -> object:
        arg = pack_map({"id": tag, "body": b"1", name: value})
        return q.engine._client.eval(
            source("publish"), len(keys), *keys, q.engine.policy.packed, arg
        )

    # one past each bound (by as much as the bound itself where 1 would round away)
    bad: list[object] = ["1", math.nan, math.inf, -math.inf]
    bad += [lo - max(1, abs(lo)), hi + max(1, abs(hi))]
    if whole:
        bad.append(max(lo, 0) + 0.5)  # within the bounds, not whole
    for value in bad:
        with pytest.raises(redis.ResponseError, match=f"ZQ_BAD_ARGUMENT.*{name} must be"):
            publish(value)
    assert not q.engine._client.hlen(q.engine._keys.meta), name
    if name == "run_at_ms":  # the horizon: a run-at far past now is refused on its own
        hi = 0
    for i, value in enumerate((lo, hi)):
        assert publish(value, f"ok{i}") == [0], (name, value)


FMT_CHECK = """
local x = tonumber(ARGV[1])
local out = fmt(x)
return {out, string.format('%.17g', x), tostring(tonumber(out) == x)}
"""


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(-(2**53) - 4, 2**53 + 4).map(float),
        st.integers(-(2**42), 2**42).map(lambda i: i * 1024.0),  # a band's sequence
    )
)
def test_fmt_writes_what_reads_back(redis_client: redis.Redis, x: float) -> None:
    """_fmt.lua: every number is written as text that Redis parses back to it exactly,
    the same text '%.17g' writes (whole numbers take the cheaper '%d')."""
    fmt = op_source("_bounds") + op_source("_fmt")  # (fmt names MAX_EXACT)
    got, g17, same = redis_client.eval(fmt + FMT_CHECK, 0, repr(x))
    assert same == b"true", (x, got)
    assert got == (b"0" if x == 0 else g17), x


@pytest.mark.parametrize("name", SCRIPT_NAMES + PROTOCOL_SCRIPTS)
def test_header_states_keys_argv_returns(name: str) -> None:
    header = op_source(name).split("\n\n")[0]
    assert header.startswith(f"-- {name}.lua")
    keys = "KEYS by role" if name in SCRIPT_ROLES else "KEYS[1]"  # _keys.lua
    assert keys in header and "ARGV[1]" in header
    assert "Returns:" in header
    assert "Work:" in header


KEY_ARG = re.compile(r"redis\.call\('(\w+)',\s*([^,)]+)")
COMMANDS_WITHOUT_KEYS = {"TIME"}


@pytest.mark.parametrize("name", LUA_FILES)
def test_keys_come_from_keys_never_built(name: str) -> None:
    """Every key a script touches is KEYS[i] or a name taken from KEYS (no concatenation)."""
    text = op_source(name)
    for cmd, key in KEY_ARG.findall(text):
        if cmd in COMMANDS_WITHOUT_KEYS:
            continue
        key = key.strip()
        assert ".." not in key and not key.startswith(("'", '"')), (name, cmd, key)
        assert re.fullmatch(r"KEYS\[(\d+|i)\]|[kK]\[?\.?\w+\]?|[a-z_]+", key), (name, cmd, key)


#: scripts whose last key is passed only when a job of the call has an ordering key
OPTIONAL_LAST = ("publish", "publish_once")
KEYED = (*OPTIONAL_LAST, "rank_key")


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_header_key_count_matches_the_call(name: str, q: Queue, make_queue: QueueFactory) -> None:
    """The KEYS listed in the header are exactly the keys scripts.py passes."""
    if name == "claim_fair":
        q = make_queue("fairq", fairness="groups")
    if name == "group_check":  # the check before a publish of several calls
        q = make_queue("fairg", fairness="groups", group_max_length=500)
    declared = {int(i) for i in re.findall(r"KEYS\[(\d+)\]", op_source(name).split("\n\n")[0])}
    declared |= set(range(1, len(SCRIPT_ROLES.get(name, ())) + 1))  # KEYS by role, first
    seen: list[int] = []
    scripts = q.engine._scripts
    original_run, original_batch = scripts.run, Batch.add

    def spy(call):  # type: ignore[no-untyped-def]
        if call.script == name:
            seen.append(len(call.keys))
        return original_run(call)

    def batch_spy(self, call):  # type: ignore[no-untyped-def]
        if call.script == name:
            seen.append(len(call.keys))
        return original_batch(self, call)

    scripts.run = spy  # type: ignore[method-assign]
    Batch.add = batch_spy  # type: ignore[method-assign]
    try:
        tag = q.publish("x")
        q.engine.joblogs.append(tag, [(1, 1, "INFO", "x")], max_lines=5, max_line_bytes=100)
        q.state(tag)
        q.info(tag)
        q.engine.run(q.engine._shards[0].positions([tag]))
        q.read.search("x")  # search.lua
        msg = q.get()
        assert msg is not None
        q.touch(msg)
        q.release(msg)
        msg = q.get()
        assert msg is not None
        q.nack(msg, "e", dead=True)
        q.requeue_dead_all()  # range_after, and requeue_dead
        q.requeue_dead(tag)
        q.delete(tag)
        q.publish("y")
        q.ack(q.get())  # type: ignore[arg-type]
        q.publish("z")
        q.ack_many([q.get()])  # type: ignore[list-item]
        q.scan()
        q.purge_dead()
        schedstore.fire(q, "no-such-schedule", 1, None, None)
        schedstore.put(q, "no-such-schedule", None, expect=schedstore.ANY)
        waiting = q.publish("w")
        q.set_priority(waiting, 2)
        q.run_now(waiting)
        q.cancel(waiting)
        q.publish("o", tag="once", debounce=5, unique_for=5)
        parent = q.publish("p")  # workflows: one job, one link, one entry per call
        q.publish("c", depends_on=[parent])
        q.ack(q.get())  # type: ignore[arg-type]
        q.dispatch([parent])
        durable = q.publish("d", priority=9)  # durable tasks: a read, a step, an event, a park
        msg = q.get()
        assert msg is not None and msg.tag == durable
        q.engine.run(dc.steps_call(q.engine._shards[0], msg, 60_000))
        q.engine.run(dc.step_call(q.engine._shards[0], msg, "s:a", "1", 60_000))
        q.signal(durable, "ev", 1)
        q.engine.run(dc.park_call(q.engine._shards[0], msg, "z:nap", 60_000, 60_000))
        dc.parked(q, durable)
        q.publish_many(["m"] * 101)  # two publish calls: checked first (group_check)
        q.publish({"task": "t", "args": [], "kwargs": {}})  # publish_lean
        if name in KEYED:  # a job with an ordering key: the index's key too, and its read
            keyed = q.prepare("k", options=JobOptions(ordering_key="A"))
            q.publish_prepared([keyed])
            once = q.prepare("k", tag="konce", options=JobOptions(ordering_key="A"))
            q.publish_once(once, unique_for=5)
            q.rank(keyed.tag, within_key=True)
    finally:
        Batch.add = original_batch  # type: ignore[method-assign]
    assert seen, f"{name} was not called"
    assert declared == set(range(1, max(declared) + 1))
    header = op_source(name).split("\n\n")[0]
    if re.search(r"KEYS\[\d+\.\.\]", header):  # ack_many: one more key per kept result
        assert min(seen) >= max(declared)
    else:
        # "KEYS[n + i] ... i = 1..m": one more key per job or entry of the call (here one)
        per_item = re.search(r"KEYS\[(\d+) \+ i\]", header)
        expected = max(declared) + (1 if per_item else 0)
        assert per_item is None or int(per_item[1]) == max(declared)
        # a key passed only for some calls (the index of keyed jobs) is the last one
        assert set(seen) == ({expected - 1, expected} if name in OPTIONAL_LAST else {expected})


def raw(q: Queue, call: Call[Any]) -> Any:
    """The script's reply as Redis sends it (the Lua contract, before Python reads it)."""
    q.engine._scripts.load_all()
    return q.engine._client.execute_command(*q.engine._scripts.command(call))


def test_source_prepends_the_included_helpers_only() -> None:
    text = source("ack")
    assert text.index("local function now_ms") < text.index("-- ack.lua")
    assert "local function ready_scores" not in text  # ack does not score


def test_publish_reports_clashes_without_writing(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("a", tag="x")
    jobs = [NewJob("x", b"b", JobSpec(max_retries=3)), NewJob("y", b"c", JobSpec(max_retries=3))]
    call = q.engine._shards[0].publish(jobs)
    assert raw(q, call) == [1, b"x", b"ready"]
    assert q.engine._scripts.run(call) == [("x", "ready")]
    assert not redis_client.hexists(q.engine._keys.meta, "y")


def test_claim_returns_hint_and_nine_per_job(q: Queue, redis_client: redis.Redis) -> None:
    shard = q.engine._shards[0]
    assert raw(q, shard.claim(5, "c")) == [-1]
    q.publish("later", delay=30)
    claimed = q.engine._scripts.run(shard.claim(5, "c"))
    assert claimed.messages == [] and 29_000 < claimed.hint_ms <= 30_000
    tag = q.publish("now", priority=3, max_retries=4)
    other = q.publish("own lease", visibility_timeout=7)
    low = q.publish("low", priority=-2)
    reply = raw(q, shard.claim(5, "c"))
    assert reply[0] == 0 and len(reply) == 1 + 9 * 3
    first, second, third = reply[1:10], reply[10:19], reply[19:28]
    assert third[0] == low.encode() and third[4] == -2
    assert first[:3] == [tag.encode(), b'"now"', 1]  # id, body, attempt
    fields = read_fields(redis_client.hget(q.engine._keys.meta, tag))
    assert first[3:7] == [fields["t"], 3, 4, fields["e"]]  # token, priority, retries, enqueued
    deadline = redis_client.zscore(q.engine._keys.leased, tag)
    assert first[7] == deadline and first[8] == 0  # the queue's lease
    assert second[0] == other.encode() and second[3] == first[3] + 1 and second[8] == 7000
    assert all(type(v) is int for v in first[2:] + second[2:])


def test_claim_decodes_typed_messages(q: Queue) -> None:
    tag = q.publish({"n": 1}, priority=7, max_retries=2, visibility_timeout=9)
    claimed = q.engine._scripts.run(q.engine._shards[0].claim(5, "c"))
    (msg,) = claimed.messages
    assert (msg.tag, msg.body, msg.priority, msg.max_retries) == (tag, {"n": 1}, 7, 2)
    assert (msg.attempt, msg.visibility_timeout_ms, msg.queue) == (1, 9000, q.name)


def test_claim_promotes_at_most_its_limit(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue()
    q.publish_many(range(10), delay=30)
    for t in redis_client.zrange(q.engine._keys.delayed, 0, -1):
        redis_client.zadd(q.engine._keys.delayed, {t: 0}, xx=True)
    policy = dataclasses.replace(q.engine.policy, promote_limit=3)
    q.engine._scripts.run(Shard(q.name, 0, q.engine._keys, policy).claim(1, "c"))
    assert redis_client.zcard(q.engine._keys.delayed) == 7


def test_ack_nack_touch_return_codes(q: Queue) -> None:
    q.publish("x", tag="t")
    msg = q.get()
    assert msg is not None
    stale = msg._replace(token=msg.token + 1)
    shard = q.engine._shards[0]
    assert raw(q, shard.ack(stale, "", 0, None)) == 0
    assert raw(q, shard.touch(stale, 1000, "")) == 0
    assert q.engine._scripts.run(shard.touch(stale, 1000, "")) is None
    assert raw(q, shard.touch(msg, 0, "")) == msg.lease_deadline_ms
    assert raw(q, shard.nack(stale, "", 0, False)) == 0
    assert q.engine._scripts.run(shard.nack(stale, "", 0, False)) is None
    assert q.engine._scripts.run(shard.nack(msg, "", 0, False)) == "retry"
    assert raw(q, shard.nack(msg, "", 0, False)) == 0
    gone = msg._replace(tag="nope", token=1)
    assert raw(q, shard.ack(gone, "", 0, None)) == 0
    assert q.engine._scripts.run(shard.ack(gone, "", 0, None)) is False


def test_delete_and_info_codes(q: Queue, redis_client: redis.Redis) -> None:
    shard = q.engine._shards[0]
    assert raw(q, shard.delete("nope", False)) == 0
    assert raw(q, shard.info("nope")) == []
    assert q.engine._scripts.run(shard.info("nope")) is None
    q.publish("x", tag="t", priority=1)
    q.get()
    assert raw(q, shard.delete("t", False)) == -1
    # a record that no set holds is reported, not hidden
    redis_client.hset(q.engine._keys.meta, "orphan", '{"p":0,"a":0,"m":0,"e":0}')
    info = q.info("orphan")
    assert info is not None and info.state == "orphan"
    assert raw(q, shard.delete("orphan", False)) == 1
    assert not redis_client.hexists(q.engine._keys.meta, "orphan")


def test_purge_dead_is_bounded(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    q.publish_many(range(7))
    for m in q.claim(7)[0]:
        q.nack(m, "x")
    shard = q.engine._shards[0]
    assert q.engine._scripts.run(shard.purge_dead(3)) == 3
    assert raw(q, shard.purge_dead(3)) == 3
    assert q.engine._scripts.run(shard.purge_dead(3)) == 1


def test_error_replies_map_through_one_table(q: Queue) -> None:
    """A ZQ_* error of a script becomes its exception; any other error reply a
    ScriptError naming the script; 'Redis cannot serve this now' replies stay as they are."""
    err = redis.exceptions.ResponseError("user_script:1: ZQ_SEQUENCE_EXHAUSTED: spent")
    assert isinstance(script_error("publish", err), SequenceExhausted)
    other = script_error("claim", redis.exceptions.ResponseError("ERR unknown thing"))
    assert type(other) is ScriptError and "claim" in str(other)
    wrongtype = script_error("claim", redis.exceptions.ResponseError("WRONGTYPE Operation"))
    assert type(wrongtype) is CorruptKey and "claim" in str(wrongtype)
    readonly = redis.exceptions.ReadOnlyError("READONLY You can't write against a replica")
    assert script_error("ack", readonly) is readonly
    busy = redis.exceptions.ResponseError("BUSY Redis is busy running a script")
    assert script_error("ack", busy) is busy
    raised = {
        code
        for f in LUA.iterdir()
        if f.name.endswith(".lua")
        for code in re.findall(r"'(ZQ_[A-Z_]+):", f.read_text(encoding="utf-8"))
    }
    assert set(ERRORS) == raised
    assert raised == {
        "ZQ_SEQUENCE_EXHAUSTED",
        "ZQ_BAD_ARGUMENT",
        "ZQ_QUEUE_FULL",
        "ZQ_CORRUPT_KEY",
        "ZQ_PROTOCOL",
    }
    assert all(issubclass(cls, ScriptError | QueueFull) for cls in ERRORS.values())
    full = redis.exceptions.ResponseError(
        "ZQ_QUEUE_FULL: 3 jobs wait and 1 more would pass max_length 3; retry script: abc"
    )
    mapped = script_error("publish", full)
    assert isinstance(mapped, QueueFull) and isinstance(mapped, ZQueueError)
    assert str(mapped) == "3 jobs wait and 1 more would pass max_length 3; retry"


def test_a_script_error_reply_in_a_batch_is_raised_typed(
    q: Queue, redis_client: redis.Redis
) -> None:
    redis_client.set(q.engine._keys.ready, "not a zset")  # WRONGTYPE inside claim.lua
    batch = q.engine.batch()
    pending = batch.add(q.engine._shards[0].claim(1, "c"))
    batch.send()
    assert pending.failed is not None
    with pytest.raises(ScriptError, match="claim"):
        pending.result()
    with pytest.raises(ScriptError, match="claim"):
        q.claim(1)
    redis_client.delete(q.engine._keys.ready)


def test_scripts_are_per_client(q: Queue) -> None:
    assert isinstance(q.engine._scripts, Scripts)
    assert q.engine._scripts.client is q.engine._client


def test_calls_collects_like_a_batch_and_settles_replies_in_order(make_queue: QueueFactory) -> None:
    """``Calls`` (the lane's collector): the same Pending objects a Batch gives, each
    with its own reply once settled; a reply count that does not match is refused."""
    from django_zqueue.engine.scripts import Calls

    q = make_queue()
    tags = [q.publish(i) for i in range(3)]
    calls = Calls()
    claim = calls.add(q.engine._shards[0].claim(2, "w1"))
    info = calls.add(q.engine._shards[0].info(tags[2]))
    batch = q.engine.batch()
    for c in calls.calls:
        batch.add(c)
    replies = batch.send()
    with pytest.raises(ValueError, match="2 calls"):
        calls.settle(replies[:1])
    calls.settle(replies)
    assert [m.tag for m in claim.result().messages] == tags[:2]
    got = info.result()
    assert got is not None and got.tag == tags[2]


REPLY_TABLES = {
    "ack": "AckReply",
    "ack_many": "AckManyCode",
    "nack": "NackReply",
    "delete": "DeleteReply",
    "cancel": "CancelReply",
    "run_now": "MoveReply",
    "set_priority": "MoveReply",
    "requeue_dead": "RequeueReply",
    "touch": "TouchReply",
}


@pytest.mark.parametrize(("script", "table"), sorted(REPLY_TABLES.items()))
def test_reply_tables_match_the_script_headers(script: str, table: str) -> None:
    """Every code of replies.py's table for a script is one its header's "Returns:"
    names, and every integer code the header names is in the table."""
    from django_zqueue.engine.scripts import replies

    kind = getattr(replies, table)
    header = op_source(script).split("\n\n")[0]
    returns = header[header.index("Returns:") :].split("-- Work:")[0]
    # the codes are the one-digit numbers (-2 to 3) the text names
    named = {int(x) for x in re.findall(r"(?<![\w.\[-])(-?[0-3])(?=[ ;:,)]|$)", returns)}
    assert {m.value for m in kind} == named, (script, returns)
