"""``zqueue_doctor`` checks the type of every fixed key of each queue and the integers of
``ctr`` and ``stats``; ``--repair`` lists the safe repairs (a dry run) and ``--repair
--yes`` makes them. On the real Redis, one corruption at a time."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from django_zqueue import get_queue
from django_zqueue.engine.keys import KEY_TYPES, QueueKeys
from django_zqueue.queue import Queue

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[list[str], str | None]:
    out = io.StringIO()
    try:
        call_command("zqueue_doctor", *args, stdout=out, no_color=True)
        error = None
    except CommandError as exc:
        error = str(exc)
    return out.getvalue().splitlines(), error


def key_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if " keys: " in line and not line.startswith("ok")]


@pytest.fixture
def q(project: dict[str, str]) -> Queue:
    return get_queue("default")


def wrong(client: redis.Redis, key: str, kind: str) -> None:
    """Replace ``key`` by a value of a type other than ``kind``."""
    client.delete(key)
    if kind == "string":
        client.hset(key, "x", "1")
    else:
        client.set(key, "garbage")


def test_every_fixed_key_has_a_type() -> None:
    fields = {f for f in QueueKeys.__dataclass_fields__ if f != "tag"}
    assert set(KEY_TYPES) == fields
    assert set(KEY_TYPES.values()) <= {"zset", "hash", "list", "string"}


def test_a_healthy_queue_has_no_key_problem(q: Queue) -> None:
    q.publish({"task": "x", "args": [], "kwargs": {}})
    lines, _ = run()
    assert key_lines(lines) == []
    assert "ok       keys: queue 'default': every key has its type and values" in lines


REPAIRED = [
    "notify",
    "workers",
    "wctl",
    "rate",
    "stats",
    "progress",
    "gstarts",
    "gstarts_prev",
    "grate",
]


@pytest.mark.parametrize("field", [*REPAIRED, "paused"])
def test_a_wrong_typed_key_that_is_safe_to_repair(
    q: Queue, redis_client: redis.Redis, field: str
) -> None:
    key = getattr(q.engine._keys, field)
    kind = KEY_TYPES[field]
    wrong(redis_client, key, kind)
    lines, error = run()
    named = key_lines(lines)
    assert len(named) == 1 and key in named[0] and f"not a {kind}" in named[0], lines
    assert error is not None
    before = redis_client.type(key)
    lines, _ = run("--repair")  # a dry run
    assert any(line.startswith("would repair: ") and key in line for line in lines), lines
    assert redis_client.type(key) == before
    lines, _ = run("--repair", "--yes")
    assert any(line.startswith("repaired: ") and key in line for line in lines), lines
    assert redis_client.type(key).decode() in (kind, "none")
    assert key_lines(run()[0]) == []
    if field == "paused":
        assert q.is_paused()  # the queue stays paused, as the key's presence said


@pytest.mark.parametrize("field", ["ready", "delayed", "leased", "dead", "body", "meta", "ctr"])
def test_a_wrong_typed_key_that_holds_jobs_is_named_not_repaired(
    q: Queue, redis_client: redis.Redis, field: str
) -> None:
    key = getattr(q.engine._keys, field)
    wrong(redis_client, key, KEY_TYPES[field])
    lines, _ = run("--repair", "--yes")
    named = key_lines(lines)
    assert len(named) == 1 and key in named[0] and "not repaired" in named[0], lines
    assert "nothing to repair" in "\n".join(lines)
    assert redis_client.get(key) == b"garbage"  # left for the operator


def claimed_token(q: Queue) -> int:
    q.publish({"task": "x", "args": [], "kwargs": {}})
    q.publish({"task": "x", "args": [], "kwargs": {}})
    msgs, _ = q.claim(2, "w-test")
    return max(m.token for m in msgs)


def test_a_bad_token_counter_is_set_above_every_token_in_use(
    q: Queue, redis_client: redis.Redis
) -> None:
    top = claimed_token(q)
    redis_client.hset(q.engine._keys.ctr, "tok", "x")  # (every claim fails)
    lines, _ = run()
    assert any(
        q.engine._keys.ctr in line and "field tok is 'x'" in line for line in key_lines(lines)
    )
    run("--repair", "--yes")
    assert int(redis_client.hget(q.engine._keys.ctr, "tok") or 0) == top + 1
    q.publish({"task": "x", "args": [], "kwargs": {}}, tag="after")
    msgs, _ = q.claim(1, "w-test")
    assert [m.tag for m in msgs] == ["after"] and msgs[0].token > top
    assert key_lines(run()[0]) == []


@pytest.mark.parametrize(
    ("key_of", "field", "bad", "after"),
    [
        (lambda k: k.stats, "acked", b"1.5", b"0"),
        (lambda k: k.stats, "enqueued", b"lots", b"0"),
        (lambda k: k.ctr, "clock", b"soon", None),
        (lambda k: k.ctr, "dclock", b"1e9", None),
    ],
)
def test_a_bad_counter_is_reset(
    q: Queue,
    redis_client: redis.Redis,
    key_of: Callable[[QueueKeys], str],
    field: str,
    bad: bytes,
    after: bytes | None,
) -> None:
    key = key_of(q.engine._keys)
    redis_client.hset(key, field, bad)
    named = key_lines(run()[0])
    assert len(named) == 1 and key in named[0] and f"field {field}" in named[0]
    run("--repair", "--yes")
    assert redis_client.hget(key, field) == after
    assert key_lines(run()[0]) == []


def test_a_bad_sequence_is_named_not_repaired(q: Queue, redis_client: redis.Redis) -> None:
    redis_client.hset(q.engine._keys.ctr, "seq", "x")
    lines, _ = run("--repair", "--yes")
    named = key_lines(lines)
    assert len(named) == 1 and "field seq" in named[0] and "not repaired" in named[0]
    assert redis_client.hget(q.engine._keys.ctr, "seq") == b"x"


def test_repair_without_yes_writes_nothing(q: Queue, redis_client: redis.Redis) -> None:
    redis_client.hset(q.engine._keys.stats, "acked", "x")
    redis_client.delete(q.engine._keys.notify)
    redis_client.set(q.engine._keys.notify, "garbage")
    snapshot: dict[str, Any] = {
        "stats": redis_client.hgetall(q.engine._keys.stats),
        "notify": redis_client.get(q.engine._keys.notify),
    }
    lines, _ = run("--repair")
    assert sum(line.startswith("would repair: ") for line in lines) == 2
    assert "dry run: 2 repairs not made: give --yes to make them" in lines
    assert redis_client.hgetall(q.engine._keys.stats) == snapshot["stats"]
    assert redis_client.get(q.engine._keys.notify) == snapshot["notify"]
    _, error = run("--yes")
    assert error is not None and "--repair" in error


def test_an_orphan_record_is_named_and_the_repair_makes_it_a_dead_letter(
    make_queue: Any, redis_client: redis.Redis
) -> None:
    """A record whose set entry is gone stays for good unless someone looks: the doctor
    names it, and its repair moves it to the dead letters, where it can be requeued."""
    from django_zqueue.engine.keycheck import orphan_problems

    q = make_queue("orph")
    lost = q.publish("lost")
    kept = q.publish("kept")
    redis_client.zrem(q.engine._keys.ready, lost)  # its set entry gone: an orphan
    (found,) = orphan_problems(q.engine)
    assert found.finding.level == "error" and found.finding.topic == "keys"
    assert lost in found.finding.message and kept not in found.finding.message
    assert found.repair is not None
    found.repair.apply(redis_client)
    assert q.state(lost) == "dead" and q.state(kept) == "ready"
    info = q.info(lost)
    assert info is not None and "orphan record" in (info.last_error or "")
    assert q.requeue_dead(lost)
    assert orphan_problems(q.engine) == []
