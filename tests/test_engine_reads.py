"""The engine's read verbs (``engine.reads``, django_zqueue/engine/reads/) and the read
side over them.

- The read side needs nothing of a queue but its name and its read verbs: every read of
  ``queue.read`` and of ``django_zqueue.read`` gives the same answer through an object
  that has only those two (no client, keys or shards to reach).
- Each verb is the round trips it says (one for most), whatever the shards; a verb given
  nothing to read sends nothing.
- The typed values: a page in global order with the counts of the same read, a job's
  rank in its shard or in the whole queue, the ended states' counts and entries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import redis

from django_zqueue import read
from django_zqueue.engine.reads import FINISHED_STATES, Reads
from django_zqueue.read import QueueReader
from django_zqueue.read.stats import task_stat_slots
from django_zqueue.read.workers import read_workers

from . import redis_server
from .conftest import QueueFactory
from .roundtrips import round_trips
from .test_dashboard import State, fill


class OnlyReads:
    """A queue as the read side may see it: its name and its engine's read verbs, and
    nothing else (no client, keys or shards: reaching one raises AttributeError)."""

    __slots__ = ("name", "reads")

    def __init__(self, reads: Reads) -> None:
        self.name = reads.name
        self.reads = reads


@pytest.fixture(params=[1, 3], ids=["one-shard", "partitioned"])
def state(
    request: pytest.FixtureRequest, make_queue: QueueFactory, redis_client: redis.Redis
) -> State:
    return fill(make_queue(partitions=request.param), redis_client)


def without_time(value: object) -> object:
    """A dataclass as a dict without its Redis time (reads made one after the other)."""
    assert dataclasses.is_dataclass(value) and not isinstance(value, type)
    return {k: v for k, v in dataclasses.asdict(value).items() if k != "now_ms"}


def test_the_read_side_asks_only_the_read_verbs(state: State) -> None:
    q = state.q
    only, full = QueueReader(OnlyReads(q.engine.reads)), q.read
    head = state.ready[0]
    assert only.counts() == full.counts() == {"ready": 4, "delayed": 1, "inflight": 1, "dead": 1}
    assert only.total_count() == full.total_count() == 4
    assert only.stats() == full.stats() and only.stats()["enqueued"] == 7
    assert only.minutes(3)[-1]["ready"] == 4
    assert only.live_threads() == full.live_threads() == 0
    assert only.waiting_count() == full.waiting_count() == 0
    assert only.page("ready", 0, 10) == full.page("ready", 0, 10)
    assert [t for t, _, _ in only.page("ready", 0, 10)] == state.ready
    assert only.dead_letters() == full.dead_letters()
    assert [i.tag for i in only.dead_letters()] == ["doomed"]
    assert only.info(head) == full.info(head)
    job, same = only.job(state.ready[2]), full.job(state.ready[2])
    assert job is not None and same is not None and job.info == same.info
    assert job.info.rank == 2
    for state_name in read.LISTED:
        listing = only.listing(state_name, errors=True)
        assert without_time(listing) == without_time(full.listing(state_name, errors=True))
    assert [j.tag for j in only.listing("ready").jobs] == state.ready
    ended = only.finished()
    assert without_time(ended) == without_time(full.finished())
    assert [j.tag for j in ended.jobs] == ["doomed"] and ended.jobs[0].error
    assert only.groups() == full.groups()
    assert only.links(head) is None and only.progress(head) is None
    found = only.search('"n":2')
    assert found == full.search('"n":2')
    assert [m.tag for m in found.matches] == [
        state.ready[2] if q.partitions == 1 else state.ready[1]
    ]


def test_reads_across_queues_ask_only_the_read_verbs(state: State) -> None:
    q = state.q
    only = OnlyReads(q.engine.reads)
    (f,) = read.overview([only])
    assert without_time(f) == without_time(read.overview([q.engine])[0])
    assert (f.ready, f.delayed, f.inflight, f.dead) == (4, 1, 1, 1)
    assert f.head is not None and f.head.priority == 3
    assert read.locate([only], "later") == read.locate([q.engine], "later")
    assert [loc.state for loc in read.locate([only], "later")] == ["delayed"]
    assert read.schedules([only]) == read.schedules([q.engine]) == []
    workers = read_workers([only])
    assert workers.workers == read_workers([q.engine]).workers and not workers.capped
    assert task_stat_slots(only, 0, 2) == task_stat_slots(q.engine, 0, 2)


def test_a_read_side_object_without_verbs_fails_loudly(state: State) -> None:
    """The adversary's check of the check: an object with a name and no verbs is
    refused at its first read (the read side reaches nothing else)."""

    class NameOnly:
        name = state.q.name

    with pytest.raises(AttributeError):
        QueueReader(NameOnly()).counts()  # type: ignore[arg-type]


# ---------------------------------------------------------------- round trips


def trips(read_once: Callable[[], object]) -> int:
    with round_trips() as sent:
        read_once()
    return len(sent)


@pytest.mark.skipif(redis_server.TOPOLOGY != "standalone", reason="counts one Redis server")
def test_each_verb_is_its_round_trips(state: State) -> None:
    q = state.q
    r = q.engine.reads
    one = q.partitions == 1
    page = r.state_range("dead", 0, 10).entries
    ended = r.ended_range(FINISHED_STATES, 0, 9).entries
    info = r.info(state.ready[2], ranked=False)
    assert info is not None and page and ended
    assert trips(r.ready_count) == 1
    assert trips(r.state_counts) == 1
    assert trips(r.waiting_count) == 1
    assert trips(r.stats_hashes) == 1
    assert trips(r.minute_reading) == (1 if one else 2)  # TIME first on several shards
    assert trips(r.workers_hash) == 1
    assert trips(lambda: r.state_page("ready", 0, 10)) == 1
    assert trips(lambda: r.state_range("ready", 0, 10)) == 1
    assert trips(lambda: r.job_hashes("dead", page, True)) == 1
    assert trips(lambda: r.ended_range(FINISHED_STATES, 0, 9, live=True)) == 1
    assert trips(lambda: r.ended_hashes(ended, True)) == 1
    assert trips(lambda: r.info(state.ready[2], ranked=False)) == 1
    assert trips(lambda: r.info(state.ready[2])) == (1 if one else 2)
    assert trips(lambda: r.job_figures(info)) == 1
    assert trips(lambda: r.links_hash("head")) == 1
    assert trips(lambda: r.progress_fields("head")) == 1
    assert trips(lambda: r.group_sample(10)) == 2
    assert trips(lambda: r.task_stat_slots(0, 5)) == 1
    assert trips(lambda: Reads.figures([r])) == 2
    assert trips(lambda: Reads.places([r], "later")) == 1
    assert trips(lambda: Reads.schedules([r])) == 1  # no schedule: the definitions only
    assert trips(lambda: Reads.workers([r], 10)) == 2


def test_a_verb_with_nothing_to_read_sends_nothing(state: State) -> None:
    r = state.q.engine.reads
    assert trips(lambda: r.infos([])) == 0 and r.infos([]) == []
    assert trips(lambda: r.job_hashes("ready", [], False)) == 0
    assert trips(lambda: r.ended_hashes([], True)) == 0
    assert trips(lambda: r.link_states([])) == 0 and r.link_states([]) == []
    assert trips(lambda: r.group_starts([])) == 0 and r.group_starts([]) == {}
    assert trips(lambda: Reads.figures([])) == 0 and Reads.places([], "x") == []


# ---------------------------------------------------------------- typed values


def test_a_state_range_is_in_global_order_with_its_counts(state: State) -> None:
    q = state.q
    got = q.engine.reads.state_range("ready", 1, 2)
    assert [tag for tag, _, _ in got.entries] == state.ready[1:3]
    assert [score for _, score, _ in got.entries] == [20.0, 20.0]
    assert got.counts == {"ready": 4, "delayed": 1, "leased": 1, "dead": 1, "waiting": 0}
    assert got.ended == 1  # the dead letter
    assert (got.acked, got.run_ms, got.workers) == (0, 0, {})
    if q.partitions == 1:
        assert got.merged is None
    else:  # each shard's first offset + limit entries, merged
        assert got.merged is not None
        assert [tag for tag, _, _ in got.merged][:3] == state.ready[:3]
    assert q.engine.reads.state_range("delayed", 0, 5, ended=False).ended == 0


def test_info_ranked_in_its_shard_or_in_the_whole_queue(state: State) -> None:
    q = state.q
    tag = state.ready[3]  # "tail": the last of four, whatever the shards
    whole = q.engine.reads.info(tag)
    own = q.engine.reads.info(tag, ranked=False)
    assert whole is not None and own is not None and whole.rank == 3
    shard = q.engine._shard_for(tag).index
    in_shard = [t for t, _, p in q.read.page("ready", 0, 10) if p == shard]
    assert own.rank == in_shard.index(tag)
    figures = q.engine.reads.job_figures(own)
    assert own.rank + figures.ahead == 3
    assert q.engine.reads.info("nobody") is None


def test_ended_entries_are_per_shard_and_state(state: State) -> None:
    q = state.q
    q.cancel(state.ready[0])
    got = q.engine.reads.ended_range(FINISHED_STATES, 0, 9, live=True)
    assert got.counts == {"succeeded": 0, "dead": 1, "cancelled": 1, "expired": 0}
    assert sorted((tag, name) for tag, name, _, _ in got.entries) == [
        ("doomed", "dead"),
        (state.ready[0], "cancelled"),
    ]
    assert got.live["ready"] == 3 and got.live["waiting"] == 0
    hashes = q.engine.reads.ended_hashes(got.entries, True)
    kept = {tag: h.kept for (tag, _, _, _), h in zip(got.entries, hashes, strict=True)}
    assert kept == {"doomed": False, state.ready[0]: True}
    assert all(h.record for h in hashes)
