"""Contracts of the Lua scripts themselves: headers, keys, return codes, bounded work."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis

from django_zqueue.queue import Queue
from django_zqueue.scripts import SCRIPT_NAMES, Scripts, includes, source

from .conftest import QueueFactory

LUA = resources.files("django_zqueue") / "lua"


def op_source(name: str) -> str:
    return (LUA / f"{name}.lua").read_text(encoding="utf-8")


LUA_FILES = sorted(p.name[:-4] for p in LUA.iterdir() if p.name.endswith(".lua"))
HELPERS = [name for name in LUA_FILES if name.startswith("_")]


def test_every_lua_file_is_registered() -> None:
    assert {n for n in LUA_FILES if not n.startswith("_")} == set(SCRIPT_NAMES)


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


def test_lua_bounds_match_conf() -> None:
    from django_zqueue import conf

    text = op_source("_bounds")

    def value(name: str) -> int:
        return int(re.search(rf"local {name} = (\d+)", text)[1])  # type: ignore[index]

    assert value("MIN_LEASE_MS") == conf.MIN_VISIBILITY_TIMEOUT * 1000
    assert value("MAX_LEASE_MS") == conf.MAX_VISIBILITY_TIMEOUT * 1000
    assert value("MAX_RETRIES") == conf.MAX_RETRIES
    assert value("MAX_DELAY_MS") == conf.MAX_DELAY * 1000
    assert value("MAX_EXACT") == conf.MAX_EXACT


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_header_states_keys_argv_returns(name: str) -> None:
    header = op_source(name).split("\n\n")[0]
    assert header.startswith(f"-- {name}.lua")
    assert "KEYS[1]" in header and "ARGV[1]" in header
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
        assert re.fullmatch(r"KEYS\[(\d+|i)\]|k\[?\.?\w+\]?|[a-z_]+", key), (name, cmd, key)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_header_key_count_matches_the_call(name: str, q: Queue) -> None:
    """The KEYS listed in the header are exactly the keys scripts.py passes."""
    declared = {int(i) for i in re.findall(r"KEYS\[(\d+)\]", op_source(name).split("\n\n")[0])}
    seen: list[int] = []
    scripts = q.scripts
    original = scripts._run

    def spy(n: str, keys, args, client):  # type: ignore[no-untyped-def]
        if n == name:
            seen.append(len(keys))
        return original(n, keys, args, client)

    scripts._run = spy  # type: ignore[method-assign]
    tag = q.publish("x")
    q.state(tag)
    q.info(tag)
    msg = q.get()
    assert msg is not None
    q.touch(msg)
    q.release(msg)
    msg = q.get()
    assert msg is not None
    q.nack(msg, "e", dead=True)
    q.requeue_dead(tag)
    q.delete(tag)
    q.publish("y")
    q.ack(q.get())  # type: ignore[arg-type]
    q.scan()
    q.purge_dead()
    q.scripts.fire(q.keys, "no-such-schedule", 1, None, False, "strict", 0, 64, [""] * 8)
    assert seen, f"{name} was not called"
    assert set(seen) == {max(declared)} and declared == set(range(1, max(declared) + 1))


def test_source_prepends_the_included_helpers_only() -> None:
    text = source("ack")
    assert text.index("local function now_ms") < text.index("-- ack.lua")
    assert "local function ready_scores" not in text  # ack does not score


def test_publish_reports_clashes_without_writing(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("a", tag="x")
    job = ["x", b"b", 0, "", "", "", 3, ""]
    reply = q.scripts.publish(q.keys, "strict", 0, 64, [job, ["y", b"c", 0, "", "", "", 3, ""]])
    assert reply == [1, b"x", b"ready"]
    assert not redis_client.hexists(q.keys.meta, "y")


def test_claim_returns_hint_and_quadruples(q: Queue) -> None:
    reply = q.scripts.claim(q.keys, 5, 1000, 0, 0, 100, "strict", 0, "c")
    assert reply == [-1]
    q.publish("later", delay=30)
    hint = q.scripts.claim(q.keys, 5, 1000, 0, 0, 100, "strict", 0, "c")[0]
    assert 29_000 < hint <= 30_000
    tag = q.publish("now")
    reply = q.scripts.claim(q.keys, 5, 1000, 0, 0, 100, "strict", 0, "c")
    assert reply[0] == 0 and reply[1] == tag.encode() and reply[2] == b'"now"'
    assert len(reply) == 5


def test_claim_promotes_at_most_its_limit(q: Queue, redis_client: redis.Redis) -> None:
    q.publish_many(range(10), delay=30)
    for t in redis_client.zrange(q.keys.delayed, 0, -1):
        redis_client.zadd(q.keys.delayed, {t: 0}, xx=True)
    q.scripts.claim(q.keys, 1, 1000, 0, 0, 3, "strict", 0, "c")
    assert redis_client.zcard(q.keys.delayed) == 7


def test_ack_nack_touch_return_codes(q: Queue) -> None:
    q.publish("x", tag="t")
    msg = q.get()
    assert msg is not None
    assert q.scripts.ack(q.keys, "t", msg.token + 1, 0) == 0
    assert q.scripts.touch(q.keys, "t", msg.token + 1, 1000, "") == 0
    assert q.scripts.touch(q.keys, "t", msg.token, 0, "") == msg.lease_deadline_ms
    args = ("strict", 0, 100, 1000, 100, 64)
    assert q.scripts.nack(q.keys, "t", msg.token + 1, "", 0, False, *args) == 0
    assert q.scripts.nack(q.keys, "t", msg.token, "", 0, False, *args) == 1
    assert q.scripts.nack(q.keys, "t", msg.token, "", 0, False, *args) == 0
    assert q.scripts.ack(q.keys, "nope", 1, 0) == 0


def test_delete_and_info_codes(q: Queue, redis_client: redis.Redis) -> None:
    assert q.scripts.delete(q.keys, "nope") == 0
    assert q.scripts.info(q.keys, "nope", True) == []
    q.publish("x", tag="t", priority=1)
    q.get()
    assert q.scripts.delete(q.keys, "t") == -1
    # a record that no set holds is reported, not hidden
    redis_client.hset(q.keys.meta, "orphan", '{"p":0,"a":0,"m":0,"e":0}')
    info = q.info("orphan")
    assert info is not None and info.state == "orphan"
    assert q.scripts.delete(q.keys, "orphan") == 1
    assert not redis_client.hexists(q.keys.meta, "orphan")


def test_purge_dead_is_bounded(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    q.publish_many(range(7))
    for m in q.claim(7)[0]:
        q.nack(m, "x")
    assert q.scripts.purge_dead(q.keys, 3) == 3
    assert q.scripts.purge_dead(q.keys, 3) == 3
    assert q.scripts.purge_dead(q.keys, 3) == 1


def test_scripts_are_per_client(q: Queue) -> None:
    assert isinstance(q.scripts, Scripts)
    assert q.scripts.client is q.client
