"""How long a job's log lives (engine/joblogs.py, log_append.lua): as long as the job
and then its history entry. The scripts that trim the history drop the logs of the jobs
they trim in the same call (by count on ack, ack_many and cancel; by age or count in
scan), delete.lua drops a deleted job's, and scan sweeps logs whose job has neither a
record nor a history entry. Waiting, running, retried and dead jobs keep theirs. Also:
corrupt values, a logs key of another type, and the older per-job streams."""

from __future__ import annotations

import pytest
import redis

from django_zqueue.engine.joblogs import parse_log
from django_zqueue.engine.scripts import Call
from django_zqueue.exceptions import ScriptArgumentError
from django_zqueue.queue import Queue

from .conftest import QueueFactory


def say(q: Queue, tag: str, *texts: str, attempt: int = 1, max_lines: int = 100) -> None:
    lines = [(attempt, 1000 + i, "INFO", t) for i, t in enumerate(texts)]
    q.engine.joblogs.append(tag, lines, max_lines=max_lines, max_line_bytes=1000)


def logged(q: Queue) -> set[str]:
    """The ids of the jobs the queue's logs hash holds a log of."""
    return {k.decode() for k in q.engine._client.hkeys(q.engine._keys.logs)}


def finished(q: Queue) -> set[str]:
    return {m.decode() for m in q.engine._client.zrange(q.engine._keys.finished, 0, -1)}


def run_and_ack(q: Queue, n: int, many: bool = False) -> list[str]:
    """Publish ``n`` jobs, claim them, give each a log line, ack them (one by one, or
    with ack_many in one call); their tags."""
    tags = q.publish_many([{"n": i} for i in range(n)])
    msgs, _ = q.claim(n, consumer="w")
    assert len(msgs) == n
    for m in msgs:
        say(q, m.tag, f"line of {m.tag}")
    if many:
        assert all(q.ack_many(msgs))
    else:
        for m in msgs:
            assert q.ack(m)
    return tags


def test_the_count_bound_of_ack_drops_the_trimmed_jobs_logs(make_queue: QueueFactory) -> None:
    q = make_queue(keep_finished=5)
    tags = run_and_ack(q, 20)
    assert len(finished(q)) == 5
    assert logged(q) == finished(q) == set(tags[-5:])
    assert [x.text for x in q.read.log(tags[-1]).lines] == [f"line of {tags[-1]}"]
    assert q.read.log(tags[0]).lines == ()


def test_ack_many_trims_many_jobs_and_their_logs_in_one_call(make_queue: QueueFactory) -> None:
    q = make_queue(keep_finished=3)
    run_and_ack(q, 40, many=True)  # one call: 40 jobs end, 37 of them trimmed at once
    assert len(finished(q)) == 3
    assert logged(q) == finished(q)


def test_scan_trims_many_at_once_by_count_and_by_age(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    big = make_queue(keep_finished=500)
    tags = run_and_ack(big, 200, many=True)
    assert logged(big) == set(tags)
    small = make_queue(keep_finished=10)  # the same queue, its bound lowered
    small.scan(limit=1000)
    assert len(finished(small)) == 10
    assert logged(small) == finished(small)
    # by age: the entries' end moved back past finished_ttl, all trimmed with their logs
    k = small.engine._keys
    redis_client.zadd(k.finished, dict.fromkeys(finished(small), 1))
    small.scan(limit=1000)
    assert finished(small) == set() and logged(small) == set()


def test_a_cancel_that_bounds_the_history_drops_the_logs_it_trims(
    make_queue: QueueFactory,
) -> None:
    q = make_queue(keep_finished=2)
    tags = q.publish_many([{"n": i} for i in range(6)])
    for t in tags:
        say(q, t, "waiting")
        q.cancel(t)
    cancels = {m.decode() for m in q.engine._client.zrange(q.engine._keys.cancels, 0, -1)}
    assert len(cancels) == 2 and logged(q) == cancels


def test_a_retried_then_dead_job_keeps_each_attempts_log_until_deleted(
    make_queue: QueueFactory,
) -> None:
    q = make_queue(max_retries=1, keep_finished=0)
    tag = q.publish({"n": 1})
    for attempt in (1, 2):
        msg = q.get(consumer="w")
        assert msg is not None and msg.attempt == attempt
        say(q, tag, f"a{attempt} one", f"a{attempt} two", attempt=attempt)
        q.nack(msg, "boom", retry_in=0)
    info = q.info(tag)
    assert info is not None and info.state == "dead"
    for _ in range(3):  # scan's sweep keeps the log of a job that has a record
        q.scan(limit=1000)
    got = q.read.log(tag)
    assert {a: [x.text for x in ls] for a, ls in got.by_attempt().items()} == {
        1: ["a1 one", "a1 two"],
        2: ["a2 one", "a2 two"],
    }
    assert q.delete(tag)
    assert logged(q) == set() and q.read.log(tag).lines == ()


def test_waiting_and_running_jobs_keep_their_logs_and_orphans_are_swept(
    make_queue: QueueFactory,
) -> None:
    q = make_queue(keep_finished=0)
    waiting, running, done = q.publish_many([{"n": i} for i in range(3)])
    msgs, _ = q.claim(2, consumer="w")
    assert [m.tag for m in msgs] == [waiting, running]
    q.release(msgs[0])
    for t in (waiting, running, done, "ghost"):
        say(q, t, "hello")
    assert q.ack(msgs[1])  # no history kept: its log has nothing left to live with
    q.scan(limit=1000)
    assert logged(q) == {waiting, done}


def test_a_corrupt_log_reads_what_it_can_and_the_next_write_replaces_it(q: Queue) -> None:
    client, key = q.engine._client, q.engine._keys.logs
    client.hset(key, "junk", "not a log")
    assert q.read.log("junk").lines == ()
    assert q.engine.joblogs.append(
        "junk", [(1, 5, "INFO", "fresh")], max_lines=10, max_line_bytes=100
    ) == (1, 0, True)
    assert [x.text for x in q.read.log("junk").lines] == ["fresh"]
    # a log cut short inside its third line: the first two read, the rest left out
    say(q, "cut", "one", "two", "three")
    raw = bytes(client.hget(key, "cut") or b"")
    client.hset(key, "cut", raw[:-3])
    assert [x.text for x in parse_log(raw[:-3]).lines] == ["one", "two"]
    assert [x.text for x in q.read.log("cut").lines] == ["one", "two"]
    # a frame length that is not hex, where the cap makes the write walk past it
    bad = raw[:19] + b"zzzzzzzz" + raw[27:]
    client.hset(key, "cut", bad)
    assert q.read.log("cut").lines == ()
    kept, dropped, corrupt = q.engine.joblogs.append(
        "cut", [(2, 9, "INFO", "after")], max_lines=3, max_line_bytes=100
    ) or (0, 0, False)
    assert (kept, dropped, corrupt) == (1, 3, True)
    assert [(x.attempt, x.text) for x in q.read.log("cut").lines] == [(2, "after")]


def test_more_new_lines_than_the_cap_keep_the_newest(q: Queue) -> None:
    say(q, "t", "old")
    say(q, "t", *[f"n{i}" for i in range(7)], max_lines=3)
    got = q.read.log("t")
    assert [x.text for x in got.lines] == ["n4", "n5", "n6"] and got.dropped == 5


def test_bad_input_to_log_append_writes_nothing(q: Queue, redis_client: redis.Redis) -> None:
    key = q.engine._keys.logs
    for args in (("a", 0, b"x"), ("", 5, b"x"), ("a", 5), ("a", "many", b"x")):
        with pytest.raises(ScriptArgumentError):
            q.engine.run(Call("log_append", (key,), args, list))
    assert not redis_client.exists(key)


def test_a_logs_key_of_another_type_never_stops_a_trim_a_delete_or_a_scan(
    make_queue: QueueFactory, redis_client: redis.Redis
) -> None:
    q = make_queue(keep_finished=2)
    key = q.engine._keys.logs
    redis_client.set(key, "junk")
    tags = q.publish_many([{"n": i} for i in range(5)])
    for _ in tags[:4]:
        msg = q.get(consumer="w")
        assert msg is not None and q.ack(msg)
    assert len(finished(q)) == 2
    assert q.delete(tags[4])
    q.scan(limit=100)
    assert redis_client.get(key) == b"junk"  # left as it was (the doctor names it)
    assert q.read.log(tags[3]).lines == ()


def test_a_log_of_the_older_layout_is_still_read_and_deleted(
    q: Queue, redis_client: redis.Redis
) -> None:
    old = q.engine._keys.log("old")
    redis_client.xadd(old, {"a": 1, "l": "INFO", "m": "from before"})
    redis_client.pexpire(old, 60_000)
    assert [x.text for x in q.read.log("old").lines] == ["from before"]
    say(q, "old", "now")  # a new line goes to the hash, which is read first
    assert [x.text for x in q.read.log("old").lines] == ["now"]
    q.engine.joblogs.delete("old")
    assert not redis_client.exists(old) and logged(q) == set()
