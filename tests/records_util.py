"""Reading and writing a job's stored record by hand, in either layout (the compact one
of ``lua/_record.lua``, or the JSON one of earlier releases): what tests that corrupt a
record or write the old layout use."""

from __future__ import annotations

import json
from typing import Any

import redis

from django_zqueue.engine.keys import QueueKeys
from django_zqueue.engine.records.codec import pack_record, split_record


def read_record(client: redis.Redis, k: QueueKeys, tag: str) -> tuple[dict[str, Any], bytes]:
    """The record's fields and its body, from either layout."""
    raw = client.hget(k.meta, tag)
    assert raw is not None, f"no record for {tag}"
    fields, body = split_record(raw)
    if body is None:
        body = client.hget(k.body, tag) or b""
    return fields, body


def write_record(
    client: redis.Redis, k: QueueKeys, tag: str, fields: Any, body: bytes, layout: str = "compact"
) -> None:
    """Store ``fields`` (any JSON-able value: a test may write a list) and ``body`` for
    ``tag`` in ``layout``: "compact" (one field) or "json" (record and body hashes)."""
    if layout == "json":
        client.hset(k.meta, tag, json.dumps(fields, separators=(",", ":")))
        client.hset(k.body, tag, body)
    else:
        client.hset(k.meta, tag, pack_record(fields, body))
        client.hdel(k.body, tag)


def set_body(client: redis.Redis, k: QueueKeys, tag: str, body: bytes) -> None:
    """Replace the body of ``tag``, in the layout its record is in."""
    raw = client.hget(k.meta, tag)
    assert raw is not None, f"no record for {tag}"
    fields, inline = split_record(raw)
    if inline is None:
        client.hset(k.body, tag, body)
    else:
        client.hset(k.meta, tag, pack_record(fields, body))


def to_json_layout(client: redis.Redis, k: QueueKeys, tag: str) -> None:
    """Rewrite the record of ``tag`` as an earlier release stored it."""
    fields, body = read_record(client, k, tag)
    write_record(client, k, tag, fields, body, layout="json")


def fields_of(client: redis.Redis, k: QueueKeys, tag: str) -> dict[str, Any]:
    """The fields of the record of ``tag``, either layout."""
    return read_record(client, k, tag)[0]


def update_fields(client: redis.Redis, k: QueueKeys, tag: str, **changes: Any) -> None:
    """Set fields of the record of ``tag`` (a value of None removes the field in the
    compact layout, writes null in the JSON one), in the layout it is stored in."""
    raw = client.hget(k.meta, tag)
    assert raw is not None, f"no record for {tag}"
    fields, inline = split_record(raw)
    fields.update(changes)
    if inline is None:
        client.hset(k.meta, tag, json.dumps(fields))
    else:
        client.hset(k.meta, tag, pack_record(fields, inline))
