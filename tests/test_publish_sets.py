"""queue.sets.publish_sets: sets of prepared jobs of several queues in one round trip, each
set with its own outcome, as if published alone (what a transaction's commit sends)."""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_zqueue.conf import QueueOptions, queue_options
from django_zqueue.engine.keys import partition_of
from django_zqueue.engine.redis.connection import is_cluster
from django_zqueue.engine.redis.embedded import free_port
from django_zqueue.exceptions import DuplicateJob, PartitionMismatch, QueueFull, QueueUnavailable
from django_zqueue.queue import Queue
from django_zqueue.queue.sets import publish_sets

from .conftest import QueueFactory
from .roundtrips import round_trips


def ready(q: Queue) -> list[str]:
    return [e[0] for e in q.read.page("ready", 0, 1000)]


def test_sets_of_several_queues_go_in_one_round_trip_in_order(make_queue: QueueFactory) -> None:
    a, b = make_queue("a"), make_queue("b", priority_mode="aging")
    parts = make_queue("p", partitions=4)
    sets = [
        (a, [a.prepare(1), a.prepare(2)]),
        (b, [b.prepare(3)]),
        (parts, [parts.prepare(4, tag="t4")]),
        (a, [a.prepare(5)]),
        (parts, [parts.prepare(6, tag="t6")]),
    ]
    for q in (a, b, parts):
        q.engine.layout.ensure()
    a.engine._scripts.load_all()  # a fresh server (a private cluster) has none yet
    with round_trips() as sent:
        outcomes = publish_sets(sets)
    assert outcomes == [None] * 5
    client = a.engine._client
    expected = 1  # on a Redis Cluster: one per master serving the sets' shards
    if is_cluster(client):
        shards = [q.engine._shard_for(jobs[0].tag) for q, jobs in sets]
        expected = len({client.get_node_from_key(s.keys.ready).name for s in shards})
    assert len(sent) == expected, sent
    assert ready(a) == [j.tag for j in sets[0][1]] + [sets[3][1][0].tag]
    assert ready(b) == [sets[1][1][0].tag]
    assert sorted(ready(parts)) == ["t4", "t6"]


def test_a_set_that_needs_several_calls_goes_alone_at_its_place(make_queue: QueueFactory) -> None:
    q = make_queue()
    big = [q.prepare(i) for i in range(150)]
    sets = [(q, [q.prepare("first")]), (q, big), (q, [q.prepare("last")])]
    assert publish_sets(sets) == [None, None, None]
    assert ready(q) == [sets[0][1][0].tag, *(j.tag for j in big), sets[2][1][0].tag]


def test_a_refused_shared_call_is_sent_again_one_call_per_set(make_queue: QueueFactory) -> None:
    q = make_queue()
    q.publish("x", tag="taken")
    sets = [
        (q, [q.prepare(1), q.prepare(2)]),
        (q, [q.prepare(3, tag="taken")]),
        (q, [q.prepare(4, tag="twice")]),
        (q, [q.prepare(5, tag="twice")]),
        (q, [q.prepare(6)]),
    ]
    with round_trips() as sent:
        outcomes = publish_sets(sets)
    assert len(sent) == 2, sent
    assert [type(o).__name__ for o in outcomes] == [
        "NoneType",
        "DuplicateJob",
        "NoneType",
        "DuplicateJob",
        "NoneType",
    ]
    assert isinstance(outcomes[1], DuplicateJob) and outcomes[1].states == ["ready"]
    tags = ["taken", sets[0][1][0].tag, sets[0][1][1].tag, "twice", sets[4][1][0].tag]
    assert ready(q) == tags and q.total_count() == 5  # none lost, none written twice


def test_a_full_queue_refuses_only_the_sets_that_do_not_fit(make_queue: QueueFactory) -> None:
    small, other = make_queue("small", max_length=3), make_queue("other")
    sets = [
        (small, [small.prepare(1), small.prepare(2)]),
        (other, [other.prepare(3)]),
        (small, [small.prepare(4), small.prepare(5)]),
        (small, [small.prepare(6)]),
    ]
    outcomes = publish_sets(sets)
    assert outcomes[0] is None and outcomes[1] is None and outcomes[3] is None
    assert isinstance(outcomes[2], QueueFull)
    assert ready(small) == [j.tag for i in (0, 3) for j in sets[i][1]]
    assert ready(other) == [sets[1][1][0].tag]


def test_a_queue_with_a_wrong_layout_fails_its_sets_only(
    prefix: str, redis_client: redis.Redis, make_queue: QueueFactory
) -> None:
    two = Queue("q", QueueOptions(partitions=2), prefix=prefix, client=redis_client)
    two.publish("old")
    wrong = Queue("q", QueueOptions(partitions=4), prefix=prefix, client=redis_client)
    fine = make_queue("fine")
    outcomes = publish_sets([(wrong, [wrong.prepare(1)]), (fine, [fine.prepare(2)])])
    assert isinstance(outcomes[0], PartitionMismatch) and outcomes[1] is None
    assert fine.total_count() == 1 and two.total_count() == 1


def test_redis_down_fails_every_set_and_raises_nothing() -> None:
    client = redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    a = Queue("a", queue_options("a"), prefix="zqt-down", client=client)
    b = Queue("b", queue_options("b"), prefix="zqt-down", client=client)
    for sets in ([(a, [a.prepare(1)])], [(a, [a.prepare(1)]), (b, [b.prepare(2)])]):
        outcomes = publish_sets(sets)
        assert all(isinstance(o, QueueUnavailable) for o in outcomes), outcomes


def test_a_set_spread_over_partitions_goes_alone_with_its_tags_checked(
    make_queue: QueueFactory,
) -> None:
    q, parts = make_queue("q"), make_queue("p", partitions=4)
    tags = ["a", "b", "c", "d"]
    assert len({partition_of(t, 4) for t in tags}) > 1
    parts.engine.layout.ensure()
    q.engine._scripts.load_all()
    sets = [(q, [q.prepare(1)]), (parts, [parts.prepare(i, tag=t) for i, t in enumerate(tags)])]
    sets.append((q, [q.prepare(2)]))
    with round_trips() as sent:
        assert publish_sets(sets) == [None, None, None]
    # q's first set | the spread set: its tags read, then its calls | q's last set
    assert sent == ["FCALL", "HMGET", "FCALL", "FCALL"] or is_cluster(q.engine._client)
    assert ready(q) == [sets[0][1][0].tag, sets[2][1][0].tag]
    assert sorted(ready(parts)) == tags
