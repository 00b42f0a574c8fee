"""The stored record of a job (lua/_record.lua, recordcodec.py): the compact layout (one
field: the record's fields as MessagePack, then the body) that new jobs are written in,
and the JSON layout of earlier releases (a JSON record and a field of the body hash),
which is still read, kept when rewritten, and written with ``COMPACT_RECORDS = False``
so that the workers of the last release can run new jobs during a rolling upgrade."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_zqueue import conf, get_queue
from django_zqueue.engine.records import NewJob
from django_zqueue.engine.records.codec import (
    RecordError,
    pack_record,
    pack_value,
    read_fields,
    split_record,
    unpack_one,
)
from django_zqueue.engine.records.spec import DEFAULT_SPEC, body_parts, pack_job
from django_zqueue.exceptions import ScriptArgumentError
from django_zqueue.queue import Queue

from .conftest import QueueFactory
from .records_util import read_record, to_json_layout
from .redis_server import TOPOLOGY, redis_url
from .test_upgrade import old_code

# ---------------------------------------------------------------- the codec


CMSGPACK_VALUES = [
    "{m=3, e=1764130000000}",
    "{a=0, t=9007199254740991, s='-4398046511103', w=0.5, g='tenant \\0 x'}",
    "{n=-1, x=-129, y=-32769, z=-2147483649, f={'a', 'b'}, k=true, u=false}",
    "{big=string.rep('x', 300), bigger=string.rep('y', 70000), neg=-0.25}",
    "{nested={list={1, 2, {deep=1}}}, e=65535, q=65536, r=4294967296}",
]


@pytest.mark.parametrize("table", CMSGPACK_VALUES)
def test_python_reads_what_redis_cmsgpack_writes(redis_client: redis.Redis, table: str) -> None:
    """The fields of a compact record are written by Redis's cmsgpack: Python reads every
    type it writes, and the body after them is left whole."""
    lua = f"return {{cmsgpack.pack({table}) .. 'BODY', cjson.encode({table})}}"
    packed, as_json = redis_client.eval(lua, 0)
    fields, body = split_record(packed)
    assert body == b"BODY"
    expected = json.loads(as_json)
    if "t" in expected:  # cjson writes 14 digits; MessagePack keeps the integer exact
        assert fields.pop("t") == 9007199254740991 and expected.pop("t") == pytest.approx(2**53)
    assert json.loads(json.dumps(fields)) == expected


def test_python_packs_what_redis_cmsgpack_reads(redis_client: redis.Redis) -> None:
    fields = {"m": 3, "e": 1764130000000, "p": -5, "s": "12.5", "w": 0.25, "f": ["x"], "g": "é"}
    raw = pack_record(fields, b'{"task":"t"}')
    lua = (
        "local off, t = cmsgpack.unpack_one(ARGV[1]) "
        "return {cjson.encode(t), string.sub(ARGV[1], off + 1)}"
    )
    as_json, body = redis_client.eval(lua, 0, raw)
    assert json.loads(as_json) == fields and body == b'{"task":"t"}'


@pytest.mark.parametrize(
    "raw",
    [b"\x82\xa1m", b"\x81\xa1m\xcf\x00\x01", b"\xdb\x00\x00\x00\x09abc", b"\xc1", b"", b"\x93\x01"],
)
def test_a_truncated_or_foreign_record_is_a_record_error(raw: bytes) -> None:
    with pytest.raises(RecordError):
        split_record(raw)


def test_the_json_layout_reads_as_before() -> None:
    assert split_record(b'{"m":3,"e":5}') == ({"m": 3, "e": 5}, None)
    assert read_fields(b'{"a":1}') == {"a": 1}
    with pytest.raises(ValueError):
        read_fields(b"{not json")
    assert unpack_one(pack_value([1, None, True]))[0] == [1, None, True]


# ---------------------------------------------------------------- the layouts in Redis


def test_a_new_job_is_one_compact_field(q: Queue, redis_client: redis.Redis) -> None:
    tag = q.publish({"n": 1}, priority=2)
    raw = redis_client.hget(q.engine._keys.meta, tag)
    assert raw is not None and 0x80 <= raw[0] <= 0x8F  # a MessagePack map
    fields, body = split_record(raw)
    assert body is not None and json.loads(body) == {"n": 1}
    assert fields["p"] == 2 and fields["m"] == q.options.max_retries
    assert not redis_client.exists(q.engine._keys.body)


def test_json_and_compact_records_are_claimed_together(q: Queue, redis_client: redis.Redis) -> None:
    """One claim over records of both layouts: each gets its own body; a JSON record is
    rewritten as JSON (its body left in the body hash until it ends)."""
    tags = [q.publish({"i": i}) for i in range(6)]
    for t in tags[::2]:
        to_json_layout(redis_client, q.engine._keys, t)
    msgs, _ = q.claim(6, "c")
    assert [(m.tag, m.body) for m in msgs] == [(t, {"i": i}) for i, t in enumerate(tags)]
    for t in tags[::2]:
        assert (redis_client.hget(q.engine._keys.meta, t) or b"")[:1] == b"{"
        assert redis_client.hexists(q.engine._keys.body, t)
    q.nack(msgs[0], "again", retry_in=0)  # rewritten by nack, still JSON
    (again,), _ = q.claim(1, "c")
    assert again.tag == tags[0] and again.body == {"i": 0} and again.attempt == 2
    for m in [again, *msgs[1:]]:
        assert q.ack(m)
    assert not redis_client.exists(q.engine._keys.body) and not redis_client.exists(
        q.engine._keys.meta
    )


def test_info_and_listing_read_both_layouts(q: Queue, redis_client: redis.Redis) -> None:
    a, b = q.publish({"x": "a"}), q.publish({"x": "b"})
    to_json_layout(redis_client, q.engine._keys, b)
    for tag, x in ((a, "a"), (b, "b")):
        info = q.info(tag)
        assert info is not None and info.body == {"x": x} and info.max_retries == 3
    listed = {j.tag: j.body for j in q.read.listing("ready").jobs}
    assert listed == {a: {"x": "a"}, b: {"x": "b"}}


def test_a_debounced_json_job_becomes_compact(q: Queue, redis_client: redis.Redis) -> None:
    q.publish("first", tag="d", debounce=5)
    to_json_layout(redis_client, q.engine._keys, "d")
    assert q.publish("second", tag="d", debounce=5) == "d"
    _, body = split_record(redis_client.hget(q.engine._keys.meta, "d") or b"")
    assert body == b'"second"' and not redis_client.hexists(q.engine._keys.body, "d")


def test_a_layout_other_than_json_is_refused_and_writes_nothing(
    q: Queue, redis_client: redis.Redis
) -> None:
    from django_zqueue.engine.records.spec import pack_job

    before = sorted(redis_client.scan_iter(f"*{q.prefix}*"))
    shard = q.engine._shards[0]
    call = shard.publish([NewJob("t", b"{}")])
    bad = pack_job("t", b"{}", NewJob("t", b"{}").spec, {"layout": "xml"})
    call = call._replace(args=(*call.args[:1], bad))
    with pytest.raises(ScriptArgumentError, match="layout must be 'json'"):
        q.engine._scripts.run(call)
    assert sorted(redis_client.scan_iter(f"*{q.prefix}*")) == before


def test_compact_records_off_writes_the_json_layout(
    make_queue: QueueFactory, redis_client: redis.Redis, zqueue_settings: dict[str, Any]
) -> None:
    with override_settings(ZQUEUE={**zqueue_settings, "COMPACT_RECORDS": False}):
        conf.reset()
        try:
            q = make_queue()
            assert q.engine.policy.compact is False
            tag = q.publish({"n": 1})
            deb = q.publish("d", tag="deb", debounce=5)
            flow = q.publish("child", depends_on=[tag])
            for t in (tag, deb, flow):
                raw = redis_client.hget(q.engine._keys.meta, t)
                assert raw is not None and raw[:1] == b"{", t
                assert redis_client.hexists(q.engine._keys.body, t)
            fields, body = read_record(redis_client, q.engine._keys, tag)
            assert body == b'{"n":1}' and fields["m"] == 3
            (msg,), _ = q.claim(1, "c")
            assert msg.body == {"n": 1} and q.ack(msg)
        finally:
            conf.reset()


# ---------------------------------------------------------------- a rolling upgrade

OLD_RUNNER = r"""
import os, sys, threading, time
import django
from django.conf import settings

old, url, prefix, ledger, n = sys.argv[1:6]
settings.configure(
    ZQUEUE={
        "REDIS_URL": url,
        "PREFIX": prefix,
        "QUEUES": {"default": {}, "fair": {"fairness": "groups"}},
    },
    INSTALLED_APPS=["django_zqueue"],
    USE_TZ=True,
)
django.setup()
import django_zqueue
assert django_zqueue.__file__.startswith(old), django_zqueue.__file__
from django_zqueue import task
from django_zqueue.worker import Worker

@task(name="tests.upgrade.record")
def record(path, label):
    with open(path, "a") as f:
        f.write(label + "\n")

w = Worker(["default", "fair"], burst=True, scan_interval=0.05)
w.run()
print("ran")
"""


@pytest.mark.skipif(TOPOLOGY != "standalone", reason="the old worker speaks to one server")
def test_the_last_releases_worker_runs_jobs_written_with_compact_records_off(
    tmp_path: Path, prefix: str
) -> None:
    """A rolling upgrade: the new code writes with COMPACT_RECORDS = False while workers
    of the last release still run; they run every job (ready, delayed, debounced, a
    workflow, a fair queue's), each once."""
    old = old_code(tmp_path)
    ledger = tmp_path / "ledger"
    settings: dict[str, Any] = {
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "COMPACT_RECORDS": False,
        "QUEUES": {"default": {}, "fair": {"fairness": "groups"}},
    }
    with override_settings(ZQUEUE=settings):
        conf.reset()
        try:
            q = get_queue("default")

            def body(label: str) -> dict[str, Any]:
                return {"task": "tests.upgrade.record", "args": [str(ledger), label], "kwargs": {}}

            q.publish(body("ready"))
            q.publish(body("delayed"), delay=0.2)
            q.publish(body("debounced"), tag="deb", debounce=0.2)
            parent = q.publish(body("parent"))
            q.publish(body("child"), depends_on=[parent])
            get_queue("fair").publish(body("fair"), group="a")
        finally:
            conf.reset()
    env = {**os.environ, "PYTHONPATH": str(old)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    import time

    time.sleep(0.3)  # the delayed and debounced jobs are due
    out = subprocess.run(
        [sys.executable, "-c", OLD_RUNNER, str(old), redis_url(), prefix, str(ledger), "6"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "ran" in out.stdout, out.stderr[-3000:]
    ran = ledger.read_text().splitlines() if ledger.exists() else []
    # the child is released by the dispatcher after its parent: a second burst may be
    # needed in the old worker; what ran ran once, and nothing is dead
    assert len(ran) == len(set(ran)), ran
    assert {"ready", "delayed", "debounced", "parent", "fair"} <= set(ran), ran
    with override_settings(ZQUEUE={**settings, "COMPACT_RECORDS": True}):
        conf.reset()
        try:
            assert get_queue("default").counts()["dead"] == 0
            assert get_queue("fair").counts()["dead"] == 0
        finally:
            conf.reset()


# ---------------------------------------------------------------- read_fields' quick path

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=40),
)
_fields = st.dictionaries(
    st.sampled_from(["a", "t", "m", "e", "p", "s", "g", "T", "A", "K", "x", "long_key_" * 4]),
    st.one_of(_scalars, st.lists(_scalars, max_size=3)),
    max_size=12,
)


def _fields_or_error(read: Any, raw: bytes) -> Any:
    try:
        return read(raw)
    except ValueError as exc:  # RecordError, or the JSON layout's error
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(_fields, st.binary(max_size=30), st.data())
def test_read_fields_reads_what_split_record_reads(
    fields: dict[str, Any], body: bytes, data: st.DataObject
) -> None:
    """The worker's quick reader of a record's fields gives what the full reader gives,
    for any record (body parts or not) and any cut of one."""
    raw = pack_record(fields, body)
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)))
    for value in (raw, raw[:cut]):
        expected = _fields_or_error(lambda r: split_record(r)[0], value)
        assert _fields_or_error(read_fields, value) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_read_fields_on_any_bytes_is_split_record_or_its_error(raw: bytes) -> None:
    expected = _fields_or_error(lambda r: split_record(r)[0], raw)
    assert _fields_or_error(read_fields, raw) == expected


def test_a_claim_keeps_the_body_of_parts_that_split_another_way(
    q: Queue, redis_client: redis.Redis
) -> None:
    """A record whose body parts are not where a split of its body would put them (made by
    hand: the args text holds the kwargs separator) gives the same body, byte for byte,
    through a claim, a nack and a second claim: the parts a record was read with are
    written back as they were, or split again, never changed."""
    tag = q.publish("x")
    fields, _ = unpack_one(redis_client.hget(q.engine._keys.meta, tag) or b"")
    assert isinstance(fields, dict)
    fields.update(T='"t"', A="[1]", K='{"x":1},"kwargs":{"y":2}')
    redis_client.hset(q.engine._keys.meta, tag, pack_value(fields))
    text = b'{"task":"t","args":[1],"kwargs":{"x":1},"kwargs":{"y":2}}'
    assert split_record(redis_client.hget(q.engine._keys.meta, tag) or b"")[1] == text
    (msg,), _ = q.claim(1, "c")
    assert msg.body == json.loads(text)
    assert split_record(redis_client.hget(q.engine._keys.meta, tag) or b"")[1] == text
    q.nack(msg, "again", retry_in=0)
    (again,), _ = q.claim(1, "c")
    assert again.attempt == 2 and again.body == json.loads(text)
    assert split_record(redis_client.hget(q.engine._keys.meta, tag) or b"")[1] == text
    assert q.ack(again)


# ---------------------------------------------------------------- a body sent as its parts

_TEXT = st.text(
    alphabet=st.sampled_from(["a", '"', ",", ":", "{", "}", "[", "]", "é"]), max_size=12
)


@st.composite
def task_bodies(draw: st.DrawFn) -> bytes:
    """Bodies of a task's shape whose texts may hold the separators themselves."""
    seps = st.sampled_from(["", ',"args":', ',"kwargs":'])
    t = draw(_TEXT) + draw(seps) + draw(_TEXT)
    a = draw(_TEXT) + draw(seps) + draw(_TEXT)
    k = draw(st.one_of(st.just("{}"), st.builds(lambda x, y, z: x + y + z, _TEXT, seps, _TEXT)))
    return f'{{"task":{t},"args":{a},"kwargs":{k}}}'.encode()


def _publish_arg(q: Queue, tag: str, arg: bytes) -> Any:
    call = q.engine._shards[0].publish([NewJob(tag, b"{}")])
    return q.engine.run(call._replace(args=(*call.args[:-1], arg)))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=task_bodies())
def test_a_body_sent_as_parts_is_stored_as_the_script_would_cut_it(
    make_queue: QueueFactory, redis_client: redis.Redis, body: bytes
) -> None:
    """A job whose body goes as its parts (``jobspec.body_parts``) is stored exactly as
    the same body sent whole: the same parts, the same body back."""
    q = make_queue("parts")
    q.clear()
    assert _publish_arg(q, "split", pack_job("split", body, DEFAULT_SPEC, split=True)) == []
    assert _publish_arg(q, "whole", pack_job("whole", body, DEFAULT_SPEC, split=False)) == []
    split_raw = redis_client.hget(q.engine._keys.meta, "split") or b""
    whole_raw = redis_client.hget(q.engine._keys.meta, "whole") or b""
    (split_fields, _), (whole_fields, _) = unpack_one(split_raw), unpack_one(whole_raw)
    assert {f: split_fields.get(f) for f in "TAK"} == {f: whole_fields.get(f) for f in "TAK"}
    assert split_record(split_raw)[1] == split_record(whole_raw)[1] == body
    if body_parts(body) is not None:
        assert split_fields["T"] is not None  # it went as parts and stayed parts
    msgs, _ = q.claim(2, "c")
    assert sorted(m.tag for m in msgs) == ["split", "whole"]
    assert split_record(redis_client.hget(q.engine._keys.meta, "split") or b"")[1] == body


@pytest.mark.parametrize(
    "fields",
    [
        {"task": '"t"'},  # no args
        {"args": "[]", "kwargs": "{}"},  # no task
        {"task": 1, "args": "[]"},
        {"task": '"t"', "args": "[]", "kwargs": 5},
        {"task": '"t"', "args": "[]", "body": b"{}"},  # both
    ],
)
def test_parts_that_make_no_body_are_refused_and_write_nothing(
    q: Queue, redis_client: redis.Redis, fields: dict[str, Any]
) -> None:
    arg = pack_value({"id": "t", **fields})
    before = sorted(redis_client.scan_iter(f"*{q.prefix}*"))
    with pytest.raises(ScriptArgumentError, match="ZQ_BAD_ARGUMENT"):
        _publish_arg(q, "t", arg)
    assert sorted(redis_client.scan_iter(f"*{q.prefix}*")) == before
