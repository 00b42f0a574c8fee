"""Debounce and unique-for (``publish_once.lua``, the ack's reservation), on the Queue
API and on ``@task``, against the real Redis."""

from __future__ import annotations

import pytest

from django_zqueue import task
from django_zqueue.engine.records.spec import JobSpec
from django_zqueue.exceptions import DuplicateJob, InvalidArgument
from django_zqueue.queue import Queue
from django_zqueue.worker import Worker

from .conftest import QueueFactory

# ------------------------------------------------------------------ debounce


def test_debounce_publishes_a_delayed_job_then_replaces_it(q: Queue) -> None:
    tag = q.publish({"n": 1}, tag="k", debounce=60)
    assert tag == "k" and q.state("k") == "delayed"
    first_at = q.engine._client.zscore(q.engine._keys.delayed, "k")
    assert q.publish_once(q.prepare({"n": 2}, "k", priority=4), debounce=120) == "replaced"
    info = q.info("k")
    assert info is not None and info.body == {"n": 2} and info.priority == 4
    assert q.engine._client.zscore(q.engine._keys.delayed, "k") > first_at  # type: ignore[operator]
    assert q.counts()["delayed"] == 1 and q.stats()["enqueued"] == 1


def test_debounce_keeps_the_enqueue_time_and_attempts_of_the_waiting_job(q: Queue) -> None:
    q.publish("a", tag="k")
    msg = q.get()
    assert msg is not None and q.nack(msg, "boom", retry_in=60) == "retry"
    before = q.info("k")
    q.publish("b", tag="k", debounce=30)
    after = q.info("k")
    assert before is not None and after is not None
    assert after.attempts == before.attempts == 1 and after.enqueued_at == before.enqueued_at
    assert after.body == "b"


def test_debounce_moves_a_ready_job_back_to_delayed(q: Queue) -> None:
    q.publish("a", tag="k")
    q.publish("b", tag="k", debounce=30)
    assert q.state("k") == "delayed" and q.counts()["ready"] == 0


def test_debounce_clashes_with_a_running_or_dead_job(make_queue: QueueFactory) -> None:
    q = make_queue(max_retries=0)
    q.publish("a", tag="run")
    q.get()
    with pytest.raises(DuplicateJob) as exc:
        q.publish("b", tag="run", debounce=5)
    assert exc.value.states == ["leased"]
    q.publish("a", tag="dead")
    q.nack(q.get(), "boom")  # type: ignore[arg-type]
    with pytest.raises(DuplicateJob):
        q.publish("b", tag="dead", debounce=5)
    assert q.info("dead").body == "a"  # type: ignore[union-attr]


def test_debounce_bad_input_writes_nothing(q: Queue) -> None:
    with pytest.raises(InvalidArgument, match="need a tag"):
        q.publish("x", debounce=5)
    with pytest.raises(InvalidArgument, match="debounce"):
        q.publish("x", tag="k", debounce=0)
    with pytest.raises(InvalidArgument, match="run-at"):
        q.publish("x", tag="k", debounce=5, delay=3)
    with pytest.raises(Exception, match="debounce_ms"):  # the script checks too
        q.engine.run(
            q.engine._shard_for("k").publish_once(
                q.prepare("x", "k")._replace(spec=JobSpec(debounce_ms=0))
            )
        )
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}


# ------------------------------------------------------------------ unique_for


def test_unique_for_reserves_the_tag_after_the_job_finished(q: Queue) -> None:
    q.publish("a", tag="u", unique_for=60)
    with pytest.raises(DuplicateJob):  # waiting: the usual refusal
        q.publish("b", tag="u", unique_for=60)
    msg = q.get()
    assert msg is not None and q.ack(msg)
    assert 0 < q.engine._client.pttl(q.engine._keys.unique("u")) <= 60_000
    with pytest.raises(DuplicateJob) as exc:
        q.publish("c", tag="u", unique_for=60)
    assert exc.value.states == ["reserved"]
    q.engine._client.delete(q.engine._keys.unique("u"))  # as when the reservation expires
    assert q.publish("d", tag="u", unique_for=60) == "u"


def test_a_plain_job_leaves_no_reservation(q: Queue) -> None:
    q.publish("a", tag="p")
    assert q.ack(q.get())  # type: ignore[arg-type]
    assert not q.engine._client.exists(q.engine._keys.unique("p"))
    q.publish("b", tag="p", unique_for=60)


def test_a_stale_ack_writes_no_reservation(q: Queue) -> None:
    q.publish("a", tag="u", unique_for=60)
    msg = q.get()
    assert msg is not None and q.cancel("u")
    assert not q.ack(msg) and not q.engine._client.exists(q.engine._keys.unique("u"))


def test_unique_for_with_debounce_replaces_while_waiting(q: Queue) -> None:
    q.publish("a", tag="ud", debounce=10, unique_for=60)
    q.publish("b", tag="ud", debounce=10, unique_for=60)
    assert q.counts()["delayed"] == 1


# ------------------------------------------------------------------ @task


@task(tag=lambda key: f"digest:{key}", debounce=30)
def digest(key: str) -> None:
    """Debounced: one run for a burst of calls."""


@task(tag=lambda key: f"once:{key}", unique_for=3600)
def once_an_hour(key: str) -> None:
    """Runs at most once an hour per key."""


@task
def plain(key: str) -> None:
    pass


def test_task_debounce(project: dict[str, str]) -> None:
    a = digest.enqueue("x")
    b = digest.enqueue("x")
    assert a.id == b.id == "digest:x" and a.status() == "delayed"
    assert digest.queue.counts()["delayed"] == 1
    with pytest.raises(InvalidArgument, match="run-at"):
        digest.enqueue_in(5, "x")


def test_task_unique_for_after_a_run(project: dict[str, str]) -> None:
    once_an_hour.enqueue("y")
    Worker(["default"], burst=True).run()
    with pytest.raises(DuplicateJob):
        once_an_hour.enqueue("y")
    once_an_hour.enqueue("z")  # another key


def test_task_options_are_checked(project: dict[str, str]) -> None:
    with pytest.raises(InvalidArgument, match="debounce"):
        task(debounce=-1)(lambda: None)
    with pytest.raises(InvalidArgument, match="need a tag"):
        plain.using(debounce=5).enqueue("k")
    job = plain.using(tag="fixed", unique_for=60).enqueue("k")
    assert job.id == "fixed"
