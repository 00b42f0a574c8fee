"""A script takes its keys by role (``engine/keys.py`` SCRIPT_ROLES, ``lua/_keys.lua``):
the call builder lists the roles, the script lists the same ones and reads ``K.<role>``,
and a key out of place or missing is refused before any write. Adding a state is a new
role in the table and in the scripts that take it, not a shift of every position."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import redis

from django_zqueue.engine.keys import KEY_TYPES, SCRIPT_ROLES, queue_keys
from django_zqueue.engine.records import Ack
from django_zqueue.engine.records.links import FlowJob, Resolution
from django_zqueue.engine.scripts import SCRIPT_NAMES, Call, source
from django_zqueue.engine.scripts.source import includes, lua_file, script_text
from django_zqueue.exceptions import ScriptArgumentError
from django_zqueue.queue import Queue

from .conftest import QueueFactory, snapshot

#: a body of a task's shape: what the lean publish takes (lua/publish_lean.lua)
TASK_BODY = {"task": "t", "args": [1], "kwargs": {}}

ROLES_RE = re.compile(r"key_roles\(KEYS, \{([^}]*)\}\)")


def _leased(q: Queue) -> Any:
    q.publish("x", tag="a")
    msg = q.get()
    assert msg is not None
    return msg


#: a call of each script that takes its keys by role, made by the shard
CALLS: dict[str, Callable[[Queue], Call[Any]]] = {
    "ack": lambda q: q.engine._shards[0].ack(_leased(q), '"r"', 60_000, 3),
    "ack_many": lambda q: q.engine._shards[0].ack_many([Ack(_leased(q), '"r"', 60_000, 5)]),
    "state": lambda q: (q.publish("x", tag="a"), q.engine._shards[0].state("a"))[-1],
    "positions": lambda q: (
        q.publish("x", tag="a"),
        q.engine._shards[0].positions(["a", "b"]),
    )[-1],
    "publish": lambda q: q.engine._shards[0].publish([q.prepare("x", tag="p1")]),
    "publish_lean": lambda q: q.engine._shards[0].publish([q.prepare(TASK_BODY, tag="p1")]),
    "publish_once": lambda q: q.engine._shards[0].publish_once(q.prepare("x", tag="p1")),
    "wf_publish": lambda q: q.engine._shards[0].wf_publish([FlowJob(q.prepare("x", tag="p1"))]),
    "claim": lambda q: (q.publish("x"), q.engine._shards[0].claim(10, "me"))[-1],
    "claim_fair": lambda q: (q.publish("x", group="g"), q.engine._shards[0].claim(10, "me"))[-1],
    "nack": lambda q: q.engine._shards[0].nack(_leased(q), "boom", 0, False),
    "scan": lambda q: (q.publish("x"), q.engine._shards[0].scan(100))[-1],
    "cancel": lambda q: (q.publish("x", tag="a"), q.engine._shards[0].cancel("a", 60_000))[-1],
    "delete": lambda q: (q.publish("x", tag="a"), q.engine._shards[0].delete("a", False))[-1],
    "requeue_dead": lambda q: (
        q.nack(_leased(q), "boom", dead=True),
        q.engine._shards[0].requeue_dead("a"),
    )[-1],
    "info": lambda q: (q.publish("x", tag="a"), q.engine._shards[0].info("a"))[-1],
    "rank_key": lambda q: (q.publish("x", tag="a"), q.engine._shards[0].rank_key("a", 10))[-1],
    "wf_link": lambda q: (
        q.publish("x", tag="a"),
        q.engine._shards[0].wf_link("a", '["q", "kid", 0]', 10),
    )[-1],
    "wf_resolve": lambda q: q.engine._shards[0].wf_resolve([Resolution("c", 1, "1", "1", "p")]),
    "wf_clear": lambda q: q.engine._shards[0].wf_clear("a", b"x"),
    "fire": lambda q: q.engine._shards[0].fire("s", 0, 5, q.prepare("x", tag="cron:s:1")),
}
#: the options of the queue a script is called on (default: none)
OPTIONS: dict[str, dict[str, Any]] = {
    "claim_fair": {"fairness": "groups", "group_concurrency": 2},
    "scan": {"keep_finished": 10},
    "cancel": {"keep_finished": 10},
}


def lua_roles(script: str) -> tuple[str, ...]:
    found = ROLES_RE.findall(lua_file(script))
    assert len(found) == 1, f"{script}.lua names its roles once"
    return tuple(re.findall(r"'(\w+)'", found[0]))


def test_the_key_of_each_role_is_named_by_it() -> None:
    k = queue_keys("p", "q")
    assert k.pick(KEY_TYPES) == tuple(f"{{p:q}}:{role}" for role in KEY_TYPES)
    with pytest.raises(KeyError):
        k.pick(["ready", "nosuch"])


def test_the_scripts_and_their_builders_list_the_same_roles() -> None:
    by_role = {name for name in SCRIPT_NAMES if "keys" in includes(name)}
    assert by_role == set(SCRIPT_ROLES), "every script that reads keys by role is in the table"
    assert set(CALLS) == set(SCRIPT_ROLES), "and each has a call in this test"
    for script, roles in SCRIPT_ROLES.items():
        assert lua_roles(script) == roles, script
        assert set(roles) <= set(KEY_TYPES), script
        after = lua_file(script).split("key_roles(")[1]
        assert all(int(i) > len(roles) for i in re.findall(r"KEYS\[(\d+)\]", after)), (
            f"{script}.lua reads its role keys by role, not by position"
        )


def test_the_text_the_server_runs_has_each_role_table_built_once() -> None:
    """The role list of a script is turned into its table when the library is built
    (``script_text``): the server runs ``{ready = KEYS[1], ...}``, in the order of the
    script's list, not a list walked at every call."""
    for script, roles in SCRIPT_ROLES.items():
        text = script_text(script)
        assert "key_roles(KEYS, {" not in text, script
        table = ", ".join(f"{role} = KEYS[{i}]" for i, role in enumerate(roles, 1))
        assert f"key_roles_built(KEYS, {len(roles)}, {{{table}}}, " in text, script
        assert text in source(script), script


@pytest.mark.parametrize("script", sorted(CALLS))
def test_each_key_of_a_call_is_its_role_s(script: str, make_queue: QueueFactory) -> None:
    q = make_queue(f"roles{script}", **OPTIONS.get(script, {}))
    call = CALLS[script](q)
    assert call.script == script
    k = q.engine._shards[0].keys
    roles = SCRIPT_ROLES[script]
    for i, role in enumerate(roles):
        assert call.keys[i] == getattr(k, role) == f"{k.tag}:{role}", (script, i, role)
    q.engine.run(call)  # and the call as made runs


@pytest.mark.parametrize("script", sorted(CALLS))
def test_a_call_short_of_a_role_is_refused_before_any_write(
    script: str, make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    """Which key stands for which role is the builder's (checked above, for every
    script); a script refuses a call that lacks one of its roles, before any write."""
    q = make_queue(f"badroles{script}", **OPTIONS.get(script, {}))
    call = CALLS[script](q)
    keys = call.keys[: len(SCRIPT_ROLES[script]) - 1]
    before = snapshot(redis_client, prefix)
    with pytest.raises(ScriptArgumentError, match="KEYS by role expected"):
        q.engine.run(call._replace(keys=keys))
    with pytest.raises(redis.ResponseError, match="ZQ_BAD_ARGUMENT"):
        redis_client.eval(source(script), len(keys), *keys, *call.args)
    assert snapshot(redis_client, prefix) == before


def test_cancel_takes_the_history_s_keys_by_role_too(make_queue: QueueFactory) -> None:
    q = make_queue("rolescancelhist", keep_finished=10)
    call = CALLS["cancel"](q)
    k = q.engine._shards[0].keys
    assert call.keys[-4:] == (k.finished, k.cancels, k.history, k.logs)
    assert q.engine.run(call) == 1  # cancelled while waiting


def test_ack_short_of_its_job_keys_is_refused_before_any_write(
    make_queue: QueueFactory, redis_client: redis.Redis, prefix: str
) -> None:
    """ack takes its roles, then the job's result, unique and steps keys: all nine roles
    but not the job's keys is refused before any write (the job stays leased)."""
    q = make_queue("ackshort")
    call = CALLS["ack"](q)
    before = snapshot(redis_client, prefix)
    with pytest.raises(ScriptArgumentError, match="result, unique and steps keys"):
        q.engine.run(call._replace(keys=call.keys[: len(SCRIPT_ROLES["ack"])]))
    assert snapshot(redis_client, prefix) == before
    assert q.engine.run(call)  # the call as made acks


def test_ack_many_takes_the_history_by_role_after_the_results(make_queue: QueueFactory) -> None:
    q = make_queue("ackmanyhist", keep_finished=10)
    call = CALLS["ack_many"](q)
    k = q.engine._shards[0].keys
    roles = SCRIPT_ROLES["ack_many"]
    assert call.keys[len(roles)] == k.result("a")  # the one kept result
    assert call.keys[-4:] == (k.finished, k.cancels, k.history, k.logs)
    assert q.engine.run(call) == [1]
    assert [j.tag for j in q.read.finished().jobs] == ["a"]
