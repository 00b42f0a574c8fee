"""A task's body kept as its parts (``lua/_record.lua``, "Body parts"): the record of a
body ``{"task":<T>,"args":<A>,"kwargs":<K>}`` holds T, A and K as fields and not the text
around them. The split is by text alone, so every body comes back byte for byte, from
Lua and from Python, whatever it holds; parts that are not texts make a corrupt record
that goes to the dead letters alone, its body kept."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_zqueue.engine.records import encode_body
from django_zqueue.engine.records.codec import pack_value, split_record, unpack_one
from django_zqueue.engine.records.spec import body_parts
from django_zqueue.engine.scripts.source import includes, lua_file
from django_zqueue.queue import Queue

from .test_corrupt import drain

MARKERS = ['{"task":', ',"args":', ',"kwargs":', "}", "{}", '"', "\\", "é", "\x00", "{", "["]

#: a script of the record helpers only: store ARGV[1] as a compact record's body, read it
#: back (parse_record and split_record), and return the stored value and both bodies
ROUND_TRIP = (
    lua_file("_record")
    + """
local meta = {e = 1, m = 3, b = ARGV[1]}
local stored = encode_record(meta)
local parsed = parse_record(stored)
local _, split = split_record(stored)
return {stored, parsed.b, split or false}
"""
)


def test_the_record_helpers_need_no_other_helper() -> None:
    assert includes("_record") == []  # (ROUND_TRIP sends _record.lua alone)


def stored_fields(raw: bytes) -> dict[str, Any]:
    fields, _ = unpack_one(raw)
    assert isinstance(fields, dict)
    return fields


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(MARKERS) | st.text(max_size=6), max_size=14).map("".join))
def test_any_body_comes_back_byte_for_byte(redis_client: redis.Redis, text: str) -> None:
    """Bodies built of the fixed texts in any order (and random text between them): the
    stored value splits where it can, and Lua and Python both give the body back."""
    for body in (text.encode("utf-8"), ('{"task":' + text + "}").encode("utf-8")):
        stored, parsed, split = redis_client.eval(ROUND_TRIP, 0, body)  # type: ignore[no-untyped-call]
        assert parsed == body and split == body
        assert split_record(stored)[1] == body
        if "A" in stored_fields(stored):  # split: nothing after the map
            _, end = unpack_one(stored)
            assert end == len(stored)
        # the client cuts a body it sends as parts where the script would (jobspec)
        fields = {
            f: v.encode() if isinstance(v, str) else v for f, v in stored_fields(stored).items()
        }
        cut = body_parts(body)
        if cut is None:
            assert "A" not in fields
        else:
            assert (fields["T"], fields["A"], fields.get("K", b"{}")) == cut


def test_invalid_utf8_in_a_part_comes_back_as_it_was(redis_client: redis.Redis) -> None:
    body = b'{"task":"\xff\xfe","args":[1,"\xc3"],"kwargs":{"\x80":1}}'
    stored, parsed, split = redis_client.eval(ROUND_TRIP, 0, body)  # type: ignore[no-untyped-call]
    assert set(stored_fields(stored)) >= {"T", "A", "K"}
    assert parsed == split == split_record(stored)[1] == body


def test_a_large_body_is_kept_whole(redis_client: redis.Redis) -> None:
    body = encode_body({"task": "t", "args": ["x" * 600], "kwargs": {}})
    stored, parsed, _ = redis_client.eval(ROUND_TRIP, 0, body)  # type: ignore[no-untyped-call]
    assert "A" not in stored_fields(stored) and stored.endswith(body) and parsed == body


TASK_BODIES = [
    {"task": "zqbench.noop", "args": [0.0], "kwargs": {}},
    {"task": "a.b", "args": [{"kwargs": 1, "x": ',"kwargs":'}], "kwargs": {"kwargs": {}}},
    {"task": "x", "args": [], "kwargs": {"args": ',"args":', "k": [1, {"kwargs": None}]}},
    {"task": 'q"uote', "args": ["}", "{"], "kwargs": {"é": "\u2028"}},
]


@pytest.mark.parametrize("body", TASK_BODIES)
def test_a_task_body_is_stored_as_parts_and_read_everywhere(
    q: Queue, redis_client: redis.Redis, body: dict[str, Any]
) -> None:
    tag = q.publish(body)
    raw = redis_client.hget(q.engine._keys.meta, tag)
    assert raw is not None
    fields = stored_fields(raw)
    assert {"T", "A"} <= set(fields) and ("K" in fields) == (body["kwargs"] != {})
    assert split_record(raw)[1] == encode_body(body)
    info = q.info(tag)
    assert info is not None and info.body == body
    msgs, _ = q.claim(1)
    assert msgs[0].body == body
    assert q.nack(msgs[0], "again") == "retry"  # rewritten by nack: still parts
    raw2 = redis_client.hget(q.engine._keys.meta, tag)
    assert raw2 is not None and "A" in stored_fields(raw2)
    assert split_record(raw2)[1] == encode_body(body)


def test_the_bench_body_fits_the_48_byte_class(q: Queue, redis_client: redis.Redis) -> None:
    """The memory of a queued job turns on the value's size: at most 44 bytes is
    jemalloc's 48-byte class (an sds adds 4 bytes)."""
    tag = q.publish({"task": "zqbench.noop", "args": [0.0], "kwargs": {}})
    raw = redis_client.hget(q.engine._keys.meta, tag)
    assert raw is not None and len(raw) <= 44, len(raw)


@pytest.mark.parametrize(
    ("case", "parts"),
    [
        ("T without A", {"T": '"x"'}),
        ("A without T", {"A": "[1]"}),
        ("A a number", {"T": '"x"', "A": 5}),
        ("K a list", {"T": '"x"', "A": "[1]", "K": [1]}),
    ],
)
def test_parts_that_are_not_texts_are_a_corrupt_record(
    q: Queue, redis_client: redis.Redis, case: str, parts: dict[str, Any]
) -> None:
    """The job goes to the dead letters alone, saying why, with the body that followed
    the record (if any) kept; the other jobs run."""
    good = q.publish({"task": "t", "args": [1], "kwargs": {}})
    bad = q.publish({"task": "t", "args": [2], "kwargs": {}})
    fields = stored_fields(redis_client.hget(q.engine._keys.meta, bad) or b"")
    for name in ("T", "A", "K"):
        fields.pop(name, None)
    tail = json.dumps({"bad": 1}).encode()
    redis_client.hset(q.engine._keys.meta, bad, pack_value({**fields, **parts}) + tail)
    assert drain(q) == [good]
    info = q.info(bad)
    assert info is not None and info.state == "dead", case
    assert (info.last_error or "").startswith("corrupt record: meta has a body part"), case
    assert info.body == {"bad": 1}  # the bytes after the map: kept for the operator
