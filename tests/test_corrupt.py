"""Scripts are all-or-nothing on bad data (issue 15): a job whose record cannot be used
goes to dead letters on its own, with ``corrupt record: <what>`` and its raw record, while
the other jobs of the same call proceed; no script raises on a bad record."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable

import pytest
import redis

from django_zqueue.engine.records import NewJob, loads
from django_zqueue.engine.records.codec import pack_record, split_record
from django_zqueue.engine.records.spec import JobSpec
from django_zqueue.engine.shard import Shard
from django_zqueue.exceptions import ScriptArgumentError
from django_zqueue.queue import Queue

from .conftest import QueueFactory
from .records_util import to_json_layout

# (case, corruption of the meta JSON object or raw text, what the reason names)
Corrupt = Callable[[dict[str, object]], object]


def with_field(name: str, value: object) -> Corrupt:
    return lambda m: {**m, name: value}


META_CASES: list[tuple[str, Corrupt, str]] = [
    ("meta not JSON", lambda m: b"{not json", "meta is not JSON"),
    ("meta not UTF-8", lambda m: b"\xff\xfe", "meta is not"),
    ("meta a list", lambda m: [1, 2], "meta is not a"),
    ("meta a number", lambda m: 7, "meta is not a"),
    ("meta missing", lambda m: None, "meta missing"),
    *[
        (f"{f} a string", with_field(f, "x"), f"'{f}'")
        for f in ("a", "m", "p", "t", "e", "v", "st")
    ],
    *[(f"{f} null", with_field(f, None), f"'{f}'") for f in ("a", "m", "p", "v")],
    ("a fractional", lambda m: {**m, "a": 1.5}, "'a'"),
    ("m huge", lambda m: {**m, "m": 1e30}, "'m'"),
    ("m negative", lambda m: {**m, "m": -1}, "'m'"),
    ("p out of range", lambda m: {**m, "p": 5000}, "'p'"),
    ("v zero (a 0 ms lease)", lambda m: {**m, "v": 0}, "'v'"),
    ("v huge", lambda m: {**m, "v": 1e300}, "'v'"),
    ("s not a score", lambda m: {**m, "s": "abc"}, "'s'"),
    ("s an object", lambda m: {**m, "s": {"x": 1}}, "'s'"),
    ("q not a score", lambda m: {**m, "q": True}, "'q'"),
    ("c a number", lambda m: {**m, "c": 5}, "'c'"),
]
STATES = ["ready", "delayed", "leased", "dead"]
#: the cases whose compact record loses its body with its fields: raw bytes in place of the
#: record, or a value that is not a map or an array (the JSON layout keeps the body apart)
BODY_LOST = {"meta not JSON", "meta not UTF-8", "meta a number", "meta missing"}
#: the layout the job is written in before it is corrupted (recordcodec.py)
LAYOUT = "compact"


def corrupt_meta(client: redis.Redis, q: Queue, tag: str, how: Corrupt) -> bytes | None:
    """Corrupt the record of ``tag`` in the layout it is stored in: its fields are
    changed by ``how``; the body stays (compact: after the new fields; JSON: in the body
    hash) unless ``how`` gives raw bytes."""
    k = q.engine._keys_for(tag)
    raw = client.hget(k.meta, tag)
    assert raw is not None
    fields, inline = split_record(raw)
    value = how(fields)
    if value is None:
        client.hdel(k.meta, tag)
        return None
    if isinstance(value, bytes):
        data = value
    elif inline is None:
        data = json.dumps(value).encode()
    else:
        data = pack_record(value, inline)  # type: ignore[arg-type]
    client.hset(k.meta, tag, data)
    return data


def expire_leases(client: redis.Redis, q: Queue) -> None:
    """Every lease runs out now (scores in the past) without waiting for a real lease."""
    for tag in client.zrange(q.engine._keys.leased, 0, -1):
        client.zadd(q.engine._keys.leased, {tag: 1}, xx=True)


def drain(q: Queue) -> list[str]:
    """Claim and ack everything claimable; the tags, in claim order."""
    got: list[str] = []
    for _ in range(20):
        msgs, _ = q.claim(100, "drain")
        if not msgs:
            q.scan()
            msgs, _ = q.claim(100, "drain")
            if not msgs:
                return got
        for m in msgs:
            assert q.ack(m)
            got.append(m.tag)
    raise AssertionError("drain did not finish")


def put_in_state(
    q: Queue,
    client: redis.Redis,
    state: str,
    how: Corrupt,
    meta: bool = True,
    layout: str = LAYOUT,
) -> tuple[str, list[str]]:
    """A bad job in ``state`` among good jobs in the same state, its record corrupted;
    the call that meets it has run. Returns (bad tag, good tags)."""
    delay = 0.05 if state == "delayed" else None
    good = [q.publish({"good": i}, delay=delay) for i in range(3)]
    bad = q.publish({"bad": 1}, tag="bad", delay=delay)
    if layout == "json":
        to_json_layout(client, q.engine._keys, bad)
    good += [q.publish({"good": i}, delay=delay) for i in range(3, 6)]
    if state == "leased":
        msgs, _ = q.claim(7, "crashed")
        assert len(msgs) == 7
        corrupt_meta(client, q, bad, how)
        expire_leases(client, q)
        r = q.scan()  # one call meets the bad lease and six good ones
        assert (r.recovered, r.buried) == ((6, 1) if meta else (7, 0))
    elif state == "dead":
        for m in q.claim(7, "c")[0]:
            q.nack(m, "boom", dead=True) if m.tag == bad else q.release(m)
        corrupt_meta(client, q, bad, how)
        assert not q.requeue_dead(bad)  # refused, with the reason
        assert q.state(bad) == "dead"
    elif state == "delayed":
        corrupt_meta(client, q, bad, how)
        time.sleep(0.1)
        r = q.scan()  # promotes six, buries one
        assert (r.promoted, r.buried) == ((6, 1) if meta else (7, 0))
    else:
        corrupt_meta(client, q, bad, how)
    return bad, good


#: (layout, case, how, reason): a nil field of a compact record is an absent one (Lua
#: tables hold no nil), so the "null" cases corrupt only a JSON record
CORRUPTIONS = [
    (layout, *c)
    for layout in ("compact", "json")
    for c in META_CASES
    if not (layout == "compact" and c[0].endswith(" null"))
]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize(
    ("layout", "case", "how", "reason"), CORRUPTIONS, ids=[f"{c[1]}-{c[0]}" for c in CORRUPTIONS]
)
def test_a_corrupt_record_goes_to_dead_letters_alone(
    q: Queue,
    redis_client: redis.Redis,
    state: str,
    layout: str,
    case: str,
    how: Corrupt,
    reason: str,
) -> None:
    bad, good = put_in_state(q, redis_client, state, how, layout=layout)
    assert sorted(drain(q)) == sorted(good)  # every good job claimed once, none lost
    info = q.info(bad)
    assert info is not None and info.state == "dead", (case, state, info)
    assert (info.last_error or "").startswith("corrupt record: "), info.last_error
    assert reason in (info.last_error or "")
    assert "raw meta: " in (info.last_error or "")
    if layout == "json" or case not in BODY_LOST:
        assert info.body == {"bad": 1}  # the body is left for the operator
    else:
        assert info.body is None  # gone with the record it was in
    assert q.scan().more is False  # scan keeps working
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 1}
    if state != "dead":
        assert q.stats().get("corrupt") == 1
    # the record left behind is usable: a requeue runs it once (or, its body lost, the
    # claim buries it again, saying so)
    assert q.requeue_dead(bad)
    if layout == "json" or case not in BODY_LOST:
        assert drain(q) == [bad]
    else:
        assert drain(q) == [] and q.state(bad) == "dead"
        assert (q.info(bad).last_error or "").startswith("corrupt record: body missing")


@pytest.mark.parametrize("state", ["ready", "delayed", "leased"])
def test_a_missing_body_goes_to_dead_letters_alone(
    q: Queue, redis_client: redis.Redis, state: str
) -> None:
    def no_body(m: dict[str, object]) -> object:
        redis_client.hdel(q.engine._keys.body, "bad")
        return m

    # the scan does not read bodies: the claim meets the missing one (only a record of
    # the JSON layout has its body apart, to go missing)
    bad, good = put_in_state(q, redis_client, state, no_body, meta=False, layout="json")
    assert sorted(drain(q)) == sorted(good)
    info = q.info(bad)
    assert info is not None and info.state == "dead"
    assert (info.last_error or "").startswith("corrupt record: body missing")


def test_the_raw_record_is_kept_readable(q: Queue, redis_client: redis.Redis) -> None:
    tag = q.publish("x")
    redis_client.hset(q.engine._keys.meta, tag, b'\xff{"a":\\"\xc3\xa9')
    q.claim(1, "c")
    info = q.info(tag)
    assert info is not None and info.last_error is not None
    assert info.last_error.endswith('raw meta: \\xff{"a":\\x5c"\\xc3\\xa9')


def test_single_job_scripts_never_raise_on_a_corrupt_lease(
    q: Queue, redis_client: redis.Redis
) -> None:
    tag = q.publish("x")
    (msg,), _ = q.claim(1, "c")
    good = redis_client.hget(q.engine._keys.meta, tag)
    assert good is not None
    fields, body = split_record(good)
    for raw in (b"nope", pack_record({**fields, "t": "x"}, body or b""), None):
        if raw is None:
            redis_client.hdel(q.engine._keys.meta, tag)
        else:
            redis_client.hset(q.engine._keys.meta, tag, raw)
        assert q.touch(msg) is None  # stale: the lease is not extended
        assert q.ack(msg) is False
        assert q.nack(msg, "e") is None
        assert q.release(msg) is False
        assert q.state(tag) == "leased"  # nothing changed: the scanner will bury it
    expire_leases(redis_client, q)
    assert q.scan().buried == 1 and q.state(tag) == "dead"


def test_claim_with_only_corrupt_records_says_claim_again(
    q: Queue, redis_client: redis.Redis
) -> None:
    bad = [q.publish(i) for i in range(3)]
    for t in bad:
        redis_client.hset(q.engine._keys.meta, t, b"garbage")
    msgs, hint = q.claim(3, "c")
    assert msgs == [] and hint == 0  # not "nothing known": there may be more to claim
    good = q.publish("good")
    msgs, _ = q.claim(3, "c")
    assert [m.tag for m in msgs] == [good]
    assert q.counts()["dead"] == 3


def test_claim_reads_past_corrupt_records_to_a_good_one(
    q: Queue, redis_client: redis.Redis
) -> None:
    bad = [q.publish(i) for i in range(3)]
    good = q.publish("good")
    for t in bad:
        redis_client.hset(q.engine._keys.meta, t, b"garbage")
    msgs, _ = q.claim(1, "c")  # one call: the corrupt heads buried, the good one leased
    assert [m.tag for m in msgs] == [good]
    assert q.counts()["dead"] == 3


def test_bad_arguments_raise_before_any_write(q: Queue, redis_client: redis.Redis) -> None:
    """A script refuses arguments out of bounds (a caller bypassing Queue's checks) with
    ZQ_BAD_ARGUMENT, writing nothing."""
    before = sorted(redis_client.scan_iter(f"*{q.prefix}*"))
    shard = q.engine._shards[0]
    calls = [
        shard.publish(
            [NewJob("t", b"{}", JobSpec(max_retries=3, visibility_timeout_ms=0))]
        ),  # 0 ms lease
        shard.publish([NewJob("t", b"{}", JobSpec(max_retries=10**9))]),
        Shard(
            q.name, 0, q.engine._keys, dataclasses.replace(q.engine.policy, visibility_ms=0)
        ).claim(1, "c"),
    ]
    for call in calls:
        with pytest.raises(ScriptArgumentError, match="ZQ_BAD_ARGUMENT"):
            q.engine._scripts.run(call)
    assert sorted(redis_client.scan_iter(f"*{q.prefix}*")) == before
    tag = q.publish("x")
    (msg,), _ = q.claim(1, "c")
    for call in (shard.touch(msg, 10**12, ""), shard.nack(msg, "e", 10**15, False)):
        with pytest.raises(ScriptArgumentError, match="ZQ_BAD_ARGUMENT"):
            q.engine._scripts.run(call)
    assert q.state(tag) == "leased"


def test_corrupt_records_in_a_partitioned_queue(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue(partitions=2)
    tags = [q.publish(i) for i in range(6)]
    k = q.engine._keys_for(tags[0])
    redis_client.hset(k.meta, tags[0], b"[")
    got = drain(q)
    assert sorted(got) == sorted(tags[1:])
    assert q.state(tags[0]) == "dead"


LOADS_CASES = [
    b'{"a":1}',
    '{"a":"\u00e9\ud800"}'.encode("utf-8", "surrogatepass"),  # a lone surrogate
    '{"x":1}'.encode("utf-16-le"),  # starts with "{" too, then a 0 byte
    '{"x":1}'.encode("utf-16"),
    '{"x":1}'.encode("utf-32"),
    b'\xef\xbb\xbf{"a":2}',  # UTF-8 with a BOM
    b"[1,2]",
    b'"s"',
    b"{",
    b'{"a":\xff}',  # not UTF-8
    b"{\x00",
    b"",
    b'{ "a" : 1 } ',
    b'{"a":1}\n',
    b'{"a":1} x',
    b'{"a":1}{"b":2}',
    b'{"a":NaN}',
]


@pytest.mark.parametrize("raw", LOADS_CASES)
def test_a_claimed_record_is_decoded_as_json_loads_would(raw: bytes) -> None:
    """records.loads (a claimed job's body and record) skips json.loads' encoding
    detection for UTF-8 objects: the same value, or the same error, for anything."""
    try:
        expected: object = json.loads(raw)
    except ValueError as exc:
        expected = (type(exc), str(exc))
    try:
        got: object = loads(raw)
    except ValueError as exc:
        got = (type(exc), str(exc))
    assert repr(got) == repr(expected)


def test_a_nil_field_of_a_compact_record_is_an_absent_one(
    q: Queue, redis_client: redis.Redis
) -> None:
    """MessagePack nil in a compact record reads as the field left out (absent = 0)."""
    tag = q.publish({"n": 1}, priority=3)
    fields, body = split_record(redis_client.hget(q.engine._keys.meta, tag) or b"")
    redis_client.hset(
        q.engine._keys.meta, tag, pack_record({**fields, "p": None, "a": None}, body or b"")
    )
    (msg,), _ = q.claim(1, "c")
    assert (msg.tag, msg.body, msg.priority, msg.attempt) == (tag, {"n": 1}, 0, 1)
    assert q.ack(msg)
