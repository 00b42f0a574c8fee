"""The record of a leased job in the order ack_many reads without unpacking it
(lua/_record.lua: encode_leased, leased_token): a map16 header over at most 15 fields,
`t` first, then the fields only ack.lua handles (u, k, n, d). Every reader takes it as a
record like any other; ack_many reads its token and whether it needs ack.lua from the
first bytes, and any record of another order is read whole as before."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_zqueue.engine.records import Message
from django_zqueue.engine.records.codec import pack_value, read_fields, split_record, unpack_one
from django_zqueue.engine.scripts.replies import AckManyCode
from django_zqueue.engine.scripts.source import lua_file
from django_zqueue.queue import Queue

#: encode ARGV[1] (a MessagePack map; ARGV[2] its body) both ways; leased_token of the
#: leased value for token ARGV[3]; the table again after encode_leased (it must be kept)
BOTH_WAYS = (
    lua_file("_record")
    + """
local meta = cmsgpack.unpack(ARGV[1])
meta.b = ARGV[2]
local plain = encode_record(meta)
local leased = encode_leased(meta)
local holds, full = leased_token(leased, tonumber(ARGV[3]))
local code = holds == nil and -1 or (holds and 1 or 0)
meta.b = nil
meta[PARTS] = nil
return {plain, leased, code, full and 1 or 0, cmsgpack.pack(meta)}
"""
)

FIELD = st.sampled_from(["a", "p", "m", "e", "s", "q", "c", "st", "g", "x", "v", "w", "zz"])
VALUE = st.one_of(
    st.integers(-(2**40), 2**53),
    st.text(max_size=12),
    st.just("12.5"),
    st.lists(st.text(max_size=3), max_size=2),
)
BODY = st.one_of(
    st.text(max_size=30).map(str.encode),
    st.tuples(st.text(max_size=8), st.text(max_size=8)).map(
        lambda p: ('{"task":"' + p[0] + '","args":[1],"kwargs":{"k":"' + p[1] + '"}}').encode()
    ),
)


def both_ways(r: redis.Redis, fields: dict[str, Any], body: bytes, token: int) -> list[Any]:
    reply: list[Any] = r.eval(BOTH_WAYS, 0, pack_value(fields), body, token)  # type: ignore[no-untyped-call]
    return reply


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(FIELD, VALUE, max_size=14),
    st.sets(st.sampled_from(["u", "k", "n", "d"])),
    st.integers(1, 2**53 - 2),  # tokens stay below 2^53 (MAX_EXACT), as does token + 1
    BODY,
    st.booleans(),
)
def test_leased_order_is_the_same_record(
    redis_client: redis.Redis,
    fields: dict[str, Any],
    full_fields: set[str],
    token: int,
    body: bytes,
    same_token: bool,
) -> None:
    """Any record: the leased value holds the same fields and body as encode_record's;
    leased_token says what reading it whole says (its token, and whether it has a field
    only ack.lua handles), or nil where the record keeps encode_record's order."""
    record = {**fields, **dict.fromkeys(full_fields, 1), "t": token}
    asked = token if same_token else token + 1
    plain, leased, holds, full, after = both_ways(redis_client, record, body, asked)
    assert split_record(leased) == split_record(plain)
    assert read_fields(leased) == read_fields(plain)
    kept, _ = split_record(after)  # encode_leased leaves the table as it found it
    assert kept == split_record(plain)[0]
    ordered = leased[:2] == b"\xde\x00" and leased[2] <= 15  # (cmsgpack: map16 from 16)
    assert ordered == (len(unpack_one(plain)[0]) <= 15)  # the stored fields, parts too
    if not ordered:
        assert holds == -1  # (the same fields, maybe in another order)
        return
    assert leased[3:5] == b"\xa1t" and holds == int(same_token)
    if same_token:
        assert full == int(bool(full_fields))


#: a stored record (ARGV[1]: fields, ARGV[2]: body, made by encode_record) leased both
#: ways for token ARGV[3]: lease_value (the splice where it can) and encode_leased of the
#: table with the lease's fields set; then the table lease_value was given, packed again
LEASE_BOTH_WAYS = (
    lua_file("_record")
    + """
local fields = cmsgpack.unpack(ARGV[1])
fields.b = ARGV[2]
local raw = encode_record(fields)
local t, q = tonumber(ARGV[3]), '-4398046511103000'
local meta = parse_record(raw)
local value = lease_value(raw, meta, t, 3, q, {c = 'w1', st = 1700000000123})
local whole = parse_record(raw)
whole.t, whole.a, whole.c, whole.st, whole.q = t, 3, 'w1', 1700000000123, q
local holds, full = leased_token(value, t)
meta.b, meta[PARTS] = nil, nil
return {value, encode_leased(whole), holds == nil and -1 or (holds and 1 or 0),
  full and 1 or 0, cmsgpack.pack(meta), raw}
"""
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(FIELD, VALUE, max_size=12),
    st.sets(st.sampled_from(["u", "k", "n", "d"]), max_size=2),
    st.integers(1, 2**53 - 2),
    BODY,
)
def test_lease_value_is_encode_leaseds_record(
    redis_client: redis.Redis,
    fields: dict[str, Any],
    full_fields: set[str],
    token: int,
    body: bytes,
) -> None:
    """claim's lease_value, spliced or not: the same fields and body as encode_leased of
    the table with the lease's fields set, and the same answer from leased_token; where
    it splices, the table it was given is left as it was."""
    record = {**fields, **dict.fromkeys(full_fields, 1)}
    reply = redis_client.eval(LEASE_BOTH_WAYS, 0, pack_value(record), body, token)  # type: ignore[no-untyped-call]
    value, whole, holds, full, after, raw = reply
    assert split_record(value) == split_record(whole)
    assert read_fields(value) == read_fields(whole)
    assert read_fields(value)["t"] == token
    ordered = whole[:2] == b"\xde\x00" and whole[2] <= 15  # (cmsgpack: map16 from 16)
    if ordered:  # both in the leased order: ack_many reads the token unpacked
        assert value[:2] == b"\xde\x00" and holds == 1 and full == int(bool(full_fields))
    # spliced where lease_value can: a fixmap record with no lease field and no byte
    # 0xc0 (a stored nil, or one inside a number or the body); else encoded whole, in an
    # order that may differ from `whole`'s (the table's own), the same fields
    spliced = (
        0x80 <= raw[0] <= 0x8A
        and not set(record) & {"t", "a", "c", "st", "q", "u", "k", "n", "d"}
        and b"\xc0" not in raw[1:]
    )
    if spliced:
        assert value.endswith(raw[1:])  # the stored fields and body, as they were
        assert split_record(after)[0] == split_record(raw)[0]  # the table unchanged


def test_claim_splices_a_fresh_record_and_not_a_lapsing_or_retried_one(q: Queue) -> None:
    """A first claim keeps the stored record's bytes after the lease's fields; a job
    claimed again (after a nack) or whose expiry is dropped at its start is encoded
    whole, its fields right."""
    fresh = q.publish({"n": 1})
    raw = q.engine._client.hget(q.engine._keys.meta, fresh)
    (msg,) = q.claim(1, "w")[0]
    leased = q.engine._client.hget(q.engine._keys.meta, fresh)
    assert isinstance(raw, bytes) and isinstance(leased, bytes)
    assert leased.endswith(raw[1:]) and leased[:2] == b"\xde\x00"
    assert {k: read_fields(leased)[k] for k in ("t", "a", "c")} == {
        "t": msg.token,
        "a": 1,
        "c": "w",
    }
    assert q.nack(msg, "boom", retry_in=0) is not None
    (again,) = q.claim(1, "w2")[0]
    fields = read_fields(q.engine._client.hget(q.engine._keys.meta, fresh))  # type: ignore[arg-type]
    assert (fields["a"], fields["t"], fields["c"]) == (2, again.token, "w2")
    assert list(fields).count("a") == 1
    tags = [q.publish({"n": i}) for i in range(3)]  # one claim: the lease fields they share
    got3 = q.claim(3, "w3")[0]
    assert [m.tag for m in got3] == tags
    for m in got3:
        fields = read_fields(q.engine._client.hget(q.engine._keys.meta, m.tag))  # type: ignore[arg-type]
        assert (fields["t"], fields["a"], fields["c"]) == (m.token, 1, "w3")
        assert (
            fields["st"] == read_fields(q.engine._client.hget(q.engine._keys.meta, tags[0]))["st"]
        )  # type: ignore[arg-type]
    lapsing = q.publish({"n": 2}, expires=3600)
    (got,) = q.claim(1, "w")[0]
    assert got.tag == lapsing
    fields = read_fields(q.engine._client.hget(q.engine._keys.meta, lapsing))  # type: ignore[arg-type]
    assert "x" not in fields and fields["t"] == got.token


def test_a_stored_nil_lease_field_does_not_hide_the_lease(q: Queue) -> None:
    """A record edited by hand to name a lease field with a nil value (which reads as
    absent): the leased record holds the claim's token and consumer, and the ack takes
    it (a splice would name them twice, the later nil winning)."""
    tag = q.publish({"n": 1})
    raw = q.engine._client.hget(q.engine._keys.meta, tag)
    assert isinstance(raw, bytes)
    body = split_record(raw)[1]
    assert body is not None
    edited = pack_value({**read_fields(raw), "t": None, "c": None, "a": None}) + body
    q.engine._client.hset(q.engine._keys.meta, tag, edited)
    (msg,) = q.claim(1, "w")[0]
    fields = read_fields(q.engine._client.hget(q.engine._keys.meta, tag))  # type: ignore[arg-type]
    assert (fields.get("t"), fields.get("c"), fields.get("a")) == (msg.token, "w", 1)
    assert q.ack(msg) is True
    assert q.engine._client.hget(q.engine._keys.meta, tag) is None


def test_json_layout_and_no_token_keep_encode_records_value(redis_client: redis.Redis) -> None:
    lua = lua_file("_record") + (
        "local j = {t = 5, m = 1} local c = {m = 1, b = 'x'} "
        "return {encode_leased(j), encode_record(j), encode_leased(c), encode_record(c), "
        "leased_token(encode_record({t = 5, m = 1, b = 'x'}), 5) == nil and 1 or 0}"
    )
    j1, j2, c1, c2, none = redis_client.eval(lua, 0)  # type: ignore[no-untyped-call]
    assert j1 == j2 and j1.startswith(b"{") and c1 == c2 and none == 1


def ack_codes(q: Queue, msg: Message) -> list[AckManyCode]:
    """ack_many's codes for acking ``msg`` (not settled: a job left to ack.lua stays)."""
    batch = q.engine.batch()
    replies = q.engine.consume.add_acks(batch, [q.engine.consume.make_ack(msg)])
    q.engine.send(batch)
    return [r.code() for r in replies]


def test_claimed_record_is_in_leased_order_and_acks_by_its_token(q: Queue) -> None:
    tag = q.publish({"n": 1})
    (msg,) = q.claim(1, "w")[0]
    raw = q.engine._client.hget(q.engine._keys.meta, tag)
    assert isinstance(raw, bytes) and raw[:2] == b"\xde\x00" and raw[3:5] == b"\xa1t"
    assert read_fields(raw)["t"] == msg.token
    stale = msg._replace(token=msg.token + 1)
    assert ack_codes(q, stale) == [AckManyCode.STALE]  # another delivery's token
    assert q.engine._client.hget(q.engine._keys.meta, tag) == raw  # nothing done
    assert ack_codes(q, msg) == [AckManyCode.ACKED]
    assert q.engine._client.hget(q.engine._keys.meta, tag) is None


@pytest.mark.parametrize("option", [{"unique_for": 60}])
def test_claimed_job_with_a_full_ack_field_goes_to_ack(q: Queue, option: dict[str, Any]) -> None:
    """A job whose record has a field only ack.lua handles: ack_many leaves it (2), and the
    worker's ack through ack.lua ends it."""
    tag = q.publish({"n": 2}, tag="once", **option)
    (msg,) = q.claim(1, "w")[0]
    raw = q.engine._client.hget(q.engine._keys.meta, tag)
    assert isinstance(raw, bytes) and raw[:2] == b"\xde\x00"
    assert "u" in read_fields(raw)
    engine = q.engine
    batch = engine.batch()
    replies = engine.consume.add_acks(batch, [engine.consume.make_ack(msg)])
    engine.send(batch)
    assert [r.code() for r in replies] == [AckManyCode.TO_ACK_LUA]
    assert q.engine._client.hget(q.engine._keys.meta, tag) == raw  # nothing done by ack_many
    engine.consume.settle_acks(replies)
    assert [r.result() for r in replies] == [True]  # acked by ack.lua
    assert q.engine._client.hget(q.engine._keys.meta, tag) is None
