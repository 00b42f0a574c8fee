"""``ordering_key``: the option (how a task, ``using()``, an enqueue and
``Queue.prepare(options=)`` give it, what is refused, what the record keeps) and the claim
rule (only the oldest waiting job of a key is claimed; the next one after it ends), against
a real Redis (docs/job-control.md, "Strict order per key")."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_zqueue import task
from django_zqueue.engine.records import NewJob, Record
from django_zqueue.engine.records.spec import JobOptions, pack_map
from django_zqueue.engine.scripts import source
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue, get_queue

from .conftest import snapshot
from .records_util import fields_of, update_fields


def fresh(**options: Any) -> Any:
    def f(x: int, who: str = "a") -> None:
        pass

    return task(name=f"order.t{uuid.uuid4().hex[:10]}", **options)(f)


def publish(q: Queue, body: Any, key: str | None, **more: Any) -> str:
    return q.publish_prepared([q.prepare(body, options=JobOptions(ordering_key=key, **more))])[0]


# ------------------------------------------------------------------ the option


def test_prepare_options_store_the_key_in_the_record(q: Queue) -> None:
    t = publish(q, 1, "acct-1")
    u = publish(q, 2, "acct-1", on_dead="skip")
    plain = q.publish(3)
    c, k = q.engine._client, q.engine._keys
    assert fields_of(c, k, t)["o"] == "acct-1" and "od" not in fields_of(c, k, t)
    assert fields_of(c, k, u)["od"] == 1
    assert "o" not in fields_of(c, k, plain)
    record = Record.decode(c.hget(k.meta, t))
    assert record is not None and record.ordering_key == "acct-1"


def test_task_option_string_callable_using_and_enqueue(project: dict[str, str]) -> None:
    q = get_queue("default")
    c, k = q.engine._client, q.engine._keys
    fixed = fresh(ordering_key="fixed")
    by_arg = fresh(ordering_key=lambda x, who="a": f"acct-{who}")
    assert fields_of(c, k, fixed.enqueue(1).id)["o"] == "fixed"
    assert fields_of(c, k, by_arg.enqueue(1, who="b").id)["o"] == "acct-b"
    assert fields_of(c, k, by_arg.using(ordering_key="u").enqueue(1).id)["o"] == "u"
    call = by_arg.enqueue(1, ordering_key="call")  # the call's own wins
    assert fields_of(c, k, call.id)["o"] == "call"
    skip = fresh(ordering_key="s", on_dead="skip")
    assert fields_of(c, k, skip.enqueue(1).id)["od"] == 1
    assert "o" not in fields_of(c, k, fresh().enqueue(1).id)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("", "ordering_key must be a non-empty string"),
        ("x" * 201, "ordering_key must be at most 200 bytes in UTF-8"),
        ("é" * 101, "ordering_key must be at most 200 bytes in UTF-8"),
        ("a\0b", "ordering_key must not contain a NUL character"),
        (7, "ordering_key must be a (non-empty )?string"),
        ("\ud800", "ordering_key must be valid UTF-8"),
    ],
)
def test_bad_keys_are_refused_and_nothing_is_written(
    redis_client: redis.Redis, prefix: str, project: dict[str, str], bad: Any, message: str
) -> None:
    q = get_queue("default")
    before = snapshot(redis_client, prefix)
    with pytest.raises(InvalidArgument, match=message):
        q.prepare(1, options=JobOptions(ordering_key=bad))
    with pytest.raises(InvalidArgument, match=message):
        fresh(ordering_key=bad)
    t = fresh(ordering_key=lambda x, who="a": bad)
    with pytest.raises(InvalidArgument, match=message):
        t.enqueue(1)
    with pytest.raises(InvalidArgument, match=message):
        fresh().enqueue(1, ordering_key=bad)
    assert snapshot(redis_client, prefix) == before


def test_bad_on_dead_is_refused(project: dict[str, str]) -> None:
    with pytest.raises(InvalidArgument, match="on_dead must be 'block' or 'skip'"):
        JobOptions(ordering_key="k", on_dead="drop")
    with pytest.raises(InvalidArgument, match="on_dead must be 'block' or 'skip'"):
        fresh(ordering_key="k", on_dead="drop")
    assert JobOptions(ordering_key="k", on_dead="block").spec.on_dead is None  # the default


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"ordering_key": "x" * 201}, "ordering_key must be 1 to 200 bytes"),
        ({"ordering_key": ""}, "ordering_key must be 1 to 200 bytes"),
        ({"ordering_key": "a\0b"}, "ordering_key must be 1 to 200 bytes"),
        ({"ordering_key": 5}, "ordering_key must be 1 to 200 bytes"),
        ({"ordering_key": "k", "on_dead": "drop"}, "on_dead must be 'block' or 'skip'"),
        ({"on_dead": "skip"}, "on_dead needs an ordering_key"),
    ],
)
def test_the_script_refuses_a_bad_spec_and_writes_nothing(
    q: Queue, redis_client: redis.Redis, prefix: str, fields: dict[str, Any], why: str
) -> None:
    """A hand-made job argument past the Python checks: publish.lua refuses it."""
    before = snapshot(redis_client, prefix)
    raw = pack_map({"id": "hand", "body": b'"x"', **fields})
    call = q.engine._shards[0].publish([NewJob("hand", b'"x"')])
    with pytest.raises(redis.ResponseError, match=f"ZQ_BAD_ARGUMENT.*{why}"):
        q.engine._client.eval(
            source("publish"), len(call.keys), *call.keys, q.engine.policy.packed, raw
        )
    assert snapshot(redis_client, prefix) == before


def test_an_old_record_without_the_field_still_reads(q: Queue) -> None:
    t = q.publish("old")
    c, k = q.engine._client, q.engine._keys
    update_fields(c, k, t, e=1)  # as an older version wrote it: no `o`
    assert Record.decode(c.hget(k.meta, t)) is not None
    msgs, _ = q.claim(1, "c")
    assert [m.tag for m in msgs] == [t]


# ------------------------------------------------------------------ the claim rule


def claim_all(q: Queue, batch: int = 10) -> list[Any]:
    """Claim until a call leases something or says there is nothing to claim now (a call
    that only set jobs aside answers hint 0: claim again); at most 20 calls."""
    for _ in range(20):
        msgs, hint = q.claim(batch, "c")
        if msgs or hint != 0:
            return msgs
    raise AssertionError("claim kept answering 'claim again'")


def bodies(msgs: list[Any]) -> list[Any]:
    return sorted(m.body for m in msgs)


def test_one_job_per_key_at_a_time_in_order_and_other_keys_flow(q: Queue) -> None:
    for i in range(3):
        publish(q, f"a{i}", "A")
        publish(q, f"b{i}", "B")
    publish(q, "free", None)
    first = claim_all(q)
    assert bodies(first) == ["a0", "b0", "free"]
    assert claim_all(q) == []  # both keys held
    assert q.state(first[0].tag) == "leased"
    by = {m.body: m for m in first}
    q.ack(by["a0"])
    assert bodies(claim_all(q)) == ["a1"]  # A's next; B still held by b0
    q.ack(by["b0"])
    assert bodies(claim_all(q)) == ["b1"]


def test_a_failing_job_keeps_its_key_through_its_retries_and_backoff(q: Queue) -> None:
    a0 = publish(q, "a0", "A", max_retries=3)
    publish(q, "a1", "A")
    (m,) = claim_all(q)
    assert m.tag == a0
    assert q.nack(m, "boom", retry_in=60) == "retry"  # in backoff: the key stays held
    assert claim_all(q) == []
    assert q.state(a0) == "delayed"
    assert q.run_now(a0)  # its backoff cut short: it is still the key's holder
    (again,) = claim_all(q)
    assert again.tag == a0 and again.attempt == 2
    assert q.nack(again, "boom", retry_in=0) == "retry"  # back in line now: still first
    (third,) = claim_all(q)
    assert third.tag == a0
    q.ack(third)
    assert bodies(claim_all(q)) == ["a1"]


@pytest.mark.parametrize("on_dead", ["block", "skip"])
def test_a_dead_holder_blocks_or_skips(q: Queue, on_dead: str) -> None:
    a0 = publish(q, "a0", "A", on_dead=on_dead)
    publish(q, "a1", "A")
    (m,) = claim_all(q)
    assert q.nack(m, "boom", dead=True) == "dead"
    if on_dead == "skip":
        assert bodies(claim_all(q)) == ["a1"]
        return
    assert claim_all(q) == []  # blocked while a0 is dead
    assert q.requeue_dead(a0)  # back in line: it is still the key's holder
    (again,) = claim_all(q)
    assert again.tag == a0
    q.nack(again, "boom", dead=True)
    assert claim_all(q) == []
    assert q.delete(a0)  # deleting the dead holder unblocks its key
    assert bodies(claim_all(q)) == ["a1"]


def test_cancel_of_the_holder_frees_the_key(q: Queue) -> None:
    publish(q, "a0", "A")
    a1 = publish(q, "a1", "A")
    publish(q, "a2", "A")
    (m,) = claim_all(q)
    assert claim_all(q) == []
    assert q.state(a1) == "waiting"  # set aside behind its key
    q.cancel(m.tag)
    assert bodies(claim_all(q)) == ["a1"]


def test_a_cancelled_job_set_aside_is_passed_over(q: Queue) -> None:
    publish(q, "a0", "A")
    a1 = publish(q, "a1", "A")
    publish(q, "a2", "A")
    (m,) = claim_all(q)
    assert claim_all(q) == []
    assert q.cancel(a1)
    q.ack(m)
    assert bodies(claim_all(q)) == ["a2"]


def test_an_expired_lease_keeps_the_order(q: Queue, redis_client: redis.Redis) -> None:
    a0 = publish(q, "a0", "A", max_retries=2)
    publish(q, "a1", "A")
    assert [m.tag for m in claim_all(q)] == [a0]
    assert claim_all(q) == []
    k = q.engine._keys
    redis_client.zadd(k.leased, {a0: 1})  # its worker died: the lease is long past
    q.scan()
    assert q.state(a0) in ("ready", "delayed")
    q.run_now(a0)
    (again,) = claim_all(q)
    assert again.tag == a0  # it comes back as the key's holder: a1 still waits
    assert claim_all(q) == []
    q.ack(again)
    assert bodies(claim_all(q)) == ["a1"]


def test_a_batch_takes_one_job_per_key(q: Queue) -> None:
    for i in range(5):
        publish(q, i, "A")
    assert bodies(claim_all(q, 100)) == [0]
    assert q.engine._client.zcard(q.engine._keys.oaside) == 4


def test_a_queue_without_ordering_keys_writes_no_order_key(
    q: Queue, redis_client: redis.Redis
) -> None:
    q.publish(1)
    (m,) = claim_all(q)
    q.ack(m)
    k = q.engine._keys
    assert not redis_client.exists(k.ohold, k.oaside)


# ------------------------------------------------------------------ combinations refused


def test_a_fair_or_partitioned_queue_refuses_an_ordering_key(
    make_queue: Any, redis_client: redis.Redis, prefix: str
) -> None:
    fair = make_queue("ofair", fairness="groups")
    parts = make_queue("oparts", partitions=2)
    before = snapshot(redis_client, prefix)
    for queue in (fair, parts):
        with pytest.raises(InvalidArgument, match="ordering_key does not go with a fair queue"):
            queue.prepare(1, options=JobOptions(ordering_key="A"))
    assert snapshot(redis_client, prefix) == before


def test_workflows_and_depends_on_refuse_an_ordering_key(
    redis_client: redis.Redis, prefix: str, project: dict[str, str]
) -> None:
    from django_zqueue.tasks.workflows import chain

    keyed, plain = fresh(ordering_key="A"), fresh()
    before = snapshot(redis_client, prefix)
    with pytest.raises(InvalidArgument, match="does not go with ordering_key"):
        chain(plain.s(1), keyed.s()).enqueue()
    assert snapshot(redis_client, prefix) == before
    parent = plain.enqueue(1)
    before = snapshot(redis_client, prefix)
    with pytest.raises(InvalidArgument, match="depends_on does not go with ordering_key"):
        keyed.enqueue(2, depends_on=parent)
    assert snapshot(redis_client, prefix) == before


def test_wf_publish_refuses_a_hand_made_ordering_key(
    q: Queue, redis_client: redis.Redis, prefix: str
) -> None:
    from django_zqueue.engine.records.links import FlowJob

    job = q.prepare(1, tag="w1", options=JobOptions(ordering_key="A"))
    before = snapshot(redis_client, prefix)
    with pytest.raises(Exception, match="a workflow job takes no ordering_key"):
        q.engine.run(q.engine._shards[0].wf_publish([FlowJob(job)]))
    assert snapshot(redis_client, prefix) == before


def test_a_key_whose_last_job_ended_leaves_no_holder_behind(
    q: Queue, redis_client: redis.Redis
) -> None:
    for key in ("A", "B", "C"):
        publish(q, key, key)
    for m in claim_all(q):
        q.ack(m)
    k = q.engine._keys
    assert redis_client.hlen(k.ohold) == 3  # the claims cannot know the holders ended
    for _ in range(200):  # each claim sweeps a few random fields (bounded loop)
        q.claim(1, "c")
        if not redis_client.exists(k.ohold):
            break
    assert not redis_client.exists(k.ohold, k.oaside)


def test_a_live_holder_is_never_swept(q: Queue, redis_client: redis.Redis) -> None:
    a0 = publish(q, "a0", "A")
    publish(q, "a1", "A")
    (m,) = claim_all(q)
    for _ in range(20):
        assert q.claim(5, "c")[0] == []
    assert redis_client.hget(q.engine._keys.ohold, "A").startswith(a0.encode() + b"\0")
    q.ack(m)
    assert bodies(claim_all(q)) == ["a1"]


# ------------------------------------------------------------------ a property

OPS = st.lists(
    st.tuples(
        st.sampled_from(["publish", "claim", "ack", "retry", "dead", "cancel", "delete"]),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_property_a_claimed_job_is_always_the_first_live_job_of_its_key(
    make_queue: Any, ops: list[tuple[str, int]]
) -> None:
    """Any interleaving of publish, claim, ack, retry, death (on_dead="block"), cancel
    and delete: a job is leased only when it is the earliest job of its key that has not
    ended (a dead one has not: it blocks), and never beside another job of its key; and
    once every live job is acked, every job not behind a dead one has run."""
    q = make_queue(f"prop{uuid.uuid4().hex[:8]}")
    order: dict[str, list[str]] = {"A": [], "B": [], "C": []}
    key_of: dict[str, str] = {}
    ended: set[str] = set()
    ran: set[str] = set()  # acked
    dead: set[str] = set()
    leased: dict[str, Any] = {}

    def first_live(key: str) -> str | None:
        return next((t for t in order[key] if t not in ended), None)

    def check(msgs: list[Any]) -> None:
        for m in msgs:
            key = key_of[m.tag]
            assert m.tag == first_live(key) and m.tag not in dead, (key, m.tag, order[key])
            assert not [t for t in leased if key_of[t] == key], (key, m.tag)
            leased[m.tag] = m

    for op, n in ops:
        key = "ABC"[n]
        if op == "publish":
            tag = publish(q, op, key, max_retries=5)
            order[key].append(tag)
            key_of[tag] = key
        elif op == "claim":
            check(q.claim(3, "c")[0])
        elif op in ("ack", "retry", "dead") and leased:
            tag = sorted(leased)[n % len(leased)]
            m = leased.pop(tag)
            if op == "ack":
                q.ack(m)
                ended.add(tag)
                ran.add(tag)
            elif op == "retry":
                q.nack(m, "boom", retry_in=0)
            else:
                q.nack(m, "boom", dead=True)
                dead.add(tag)
        elif op in ("cancel", "delete") and key_of:
            tag = sorted(key_of)[n % len(key_of)]
            if tag in ended:
                continue
            if op == "cancel" and tag not in dead:
                q.cancel(tag)
            elif op == "delete" and tag not in leased:
                q.delete(tag)
            else:
                continue
            ended.add(tag)
            dead.discard(tag)
            leased.pop(tag, None)
    for m in list(leased.values()):  # drain: ack whatever can run, a bounded number of times
        q.ack(m)
        ended.add(m.tag)
        ran.add(m.tag)
    leased.clear()
    for _ in range(60):
        msgs = q.claim(10, "c")[0]
        check(msgs)
        for m in msgs:
            q.ack(m)
            ended.add(m.tag)
            ran.add(m.tag)
            leased.pop(m.tag)
    for key, tags in order.items():
        blocked = next((i for i, t in enumerate(tags) if t in dead), len(tags))
        assert all(t in ended for t in tags[:blocked]), (key, tags, ended)
        assert not [t for t in tags[blocked + 1 :] if t in ran], (key, tags, ran)


# ------------------------------------------------------------------ blocked keys, unblock


def test_blocked_keys_are_listed_and_one_is_unblocked(q: Queue) -> None:
    a0 = publish(q, "a0", "A")
    publish(q, "a1", "A")
    publish(q, "a2", "A")
    b0 = publish(q, "b0", "B é")
    publish(q, "b1", "B é")
    first = {m.tag: m for m in claim_all(q)}
    assert claim_all(q) == []  # the claim sets the others aside
    q.nack(first[a0], "boom", dead=True)  # on_dead="block": A stays blocked
    got = q.engine.order.blocked()
    assert [(b.key, b.holder, b.holder_state, b.waiting) for b in got] == [
        ("A", a0, "dead", 2),
        ("B é", b0, "leased", 1),
    ]
    assert [b.key for b in q.engine.order.blocked(after="A")] == ["B é"]
    assert [b.key for b in q.engine.order.blocked(limit=1)] == ["A"]
    assert q.engine.order.unblock("A")
    assert not q.engine.order.unblock("A")  # no holder recorded now
    assert bodies(claim_all(q)) == ["a1"]  # A goes on without its dead job
    assert q.requeue_dead(a0)  # back in line: now behind A's new holder
    assert claim_all(q) == []
    with pytest.raises(InvalidArgument):
        q.engine.order.unblock("")
    with pytest.raises(InvalidArgument):
        q.engine.order.blocked(limit=0)


def test_no_blocked_keys_on_a_plain_queue(q: Queue) -> None:
    q.publish(1)
    assert q.engine.order.blocked() == []


def test_the_admin_lists_blocked_keys_and_unblocks_one(project: dict[str, str], db: Any) -> None:
    from .test_admin import BASE, client_for, make_user

    q = get_queue("default")
    a0 = publish(q, "a0", "<b>A</b>")
    publish(q, "a1", "<b>A</b>")
    (m,) = claim_all(q)
    assert claim_all(q) == []
    q.nack(m, "boom", dead=True)
    onlooker = client_for(make_user("onlooker", "view_queue"))
    page = onlooker.get(f"{BASE}q/default/").content.decode()
    assert "Blocked keys" in page and "&lt;b&gt;A&lt;/b&gt;" in page and a0 in page
    assert "Unblock" not in page  # no manage_jobs: no button
    assert onlooker.post(f"{BASE}q/default/unblock/", {"key": "<b>A</b>"}).status_code == 403
    c = client_for(make_user("unblocker", "view_queue", "manage_jobs"))
    assert "Unblock" in c.get(f"{BASE}q/default/").content.decode()
    assert c.get(f"{BASE}q/default/unblock/").status_code == 405
    assert c.post(f"{BASE}q/default/unblock/", {"key": ""}).status_code == 400
    r = c.post(f"{BASE}q/default/unblock/", {"key": "<b>A</b>"})
    assert r.status_code == 302
    assert bodies(claim_all(q)) == ["a1"]
    assert "Blocked keys" not in c.get(f"{BASE}q/default/").content.decode()


def test_the_outbox_keeps_the_key(q: Queue) -> None:
    """The outbox stores a job's spec as its fields (spec_fields) and makes it again
    (spec_of): the ordering key and on_dead travel with it."""
    from django_zqueue.engine.records.spec import spec_fields, spec_of

    spec = JobOptions(ordering_key="acct:7", on_dead="skip").spec
    got = spec_fields(spec)
    assert (got["ordering_key"], got["on_dead"]) == ("acct:7", "skip")
    assert spec_of(spec_fields(spec)) == spec


def test_a_new_job_under_an_ended_holder_s_tag_is_not_the_holder(q: Queue) -> None:
    """A tag used again: the key's holder is named by its tag and its enqueue time, so a
    later job under the ended holder's tag waits its turn like any other."""
    import time

    def put(body: str, tag: str | None = None) -> str:
        job = q.prepare(body, tag, options=JobOptions(ordering_key="A"))
        return q.publish_prepared([job])[0]

    put("first", "same")
    put("second")
    (m,) = claim_all(q)
    assert claim_all(q) == []  # "second" is set aside
    q.ack(m)
    time.sleep(0.005)  # (the enqueue times differ: they name the holder with its tag)
    put("third", "same")
    assert bodies(claim_all(q)) == ["second"]


@pytest.mark.parametrize("junk", [b"nonul", b"A\0x", b"A\0o\0notanumber\0id", b"A\0o\x001\0ghost"])
def test_a_bad_entry_set_aside_is_dropped_and_the_key_flows(
    q: Queue, redis_client: redis.Redis, junk: bytes
) -> None:
    """An entry of oaside of another shape (or whose job is gone) never stops the claim:
    it is dropped where it is met, and the key's real jobs go on in order."""
    publish(q, "a0", "A")
    publish(q, "a1", "A")
    (m,) = claim_all(q)
    assert claim_all(q) == []
    redis_client.zadd(q.engine._keys.oaside, {junk: 0})
    q.ack(m)
    (m1,) = claim_all(q)
    assert m1.body == "a1"
    q.ack(m1)  # the key's last job ended: whatever remains of it is met and dropped
    assert claim_all(q) == []
    assert not redis_client.exists(q.engine._keys.oaside)


def test_priority_orders_a_key_s_waiting_jobs_but_never_overtakes_its_holder(q: Queue) -> None:
    publish(q, "a0", "A")
    (m,) = claim_all(q)
    publish(q, "a1", "A")
    publish(q, "a2", "A", priority=10)
    assert claim_all(q) == []  # the holder runs: a higher priority waits all the same
    q.ack(m)
    (m2,) = claim_all(q)
    assert m2.body == "a2"  # then the key's line is the queue's order
    q.ack(m2)
    assert bodies(claim_all(q)) == ["a1"]


def test_a_delayed_job_joins_its_key_s_line_when_due(q: Queue) -> None:
    import time

    publish(q, "a0", "A")
    publish(q, "a1", "A", delay=0.05)
    (m,) = claim_all(q)
    assert m.body == "a0"
    time.sleep(0.1)  # (a1 is due)
    assert claim_all(q) == []  # due, but a0 holds the key
    q.ack(m)
    assert bodies(claim_all(q)) == ["a1"]
