"""``async def`` tasks: ``aenqueue`` and the Job's async reads, the asyncio Queue API, and
the worker's event-loop lane, held to the sync tasks' semantics (ack, retry, dead,
timeout, cancel, results, signals, leases), against a real Redis."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from django_zqueue import conf, current_job, get_queue, signals
from django_zqueue.engine.aio import AsyncEngine
from django_zqueue.engine.redis.aconnection import make_async_client
from django_zqueue.exceptions import DuplicateJob, QueueUnavailable
from django_zqueue.queue import Queue
from django_zqueue.queue.aio import AsyncQueue, get_async_queue
from django_zqueue.tasks import registry
from django_zqueue.tasks.serializer import UnsupportedArgument
from django_zqueue.tasks.task import Job
from django_zqueue.worker import Worker
from django_zqueue.worker.aio import AioLane
from django_zqueue.worker.coro import default_async_concurrency
from testproject.demo import async_tasks as at
from testproject.demo import tasks
from testproject.demo.models import Article

from .test_worker import lines


def burst(async_concurrency: int = 10, **kwargs: Any) -> Worker:
    w = Worker(
        ["default"], burst=True, scan_interval=0.05, async_concurrency=async_concurrency, **kwargs
    )
    w.run()
    return w


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def in_background(w: Worker) -> threading.Thread:
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    return t


def wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


# ------------------------------------------------------------------ @task on async def


def test_async_def_is_a_task_and_awaitable_in_process() -> None:
    assert registry.get("testproject.demo.async_tasks.aadd") is at.aadd
    assert at.aadd.is_async and not tasks.add.is_async
    assert run(at.aadd(2, 3)) == 5


def test_aenqueue_and_the_jobs_async_reads(project: dict[str, str]) -> None:
    async def scenario() -> tuple[Any, ...]:
        first = await at.aadd.aenqueue(1, 2)
        second = await tasks.add.aenqueue(3, 4)  # a sync task enqueued from async code
        urgent = await at.aadd.using(priority=10).aenqueue(5, 6)
        later = await at.aadd.aenqueue_in(60, 7, 8)
        ranks = (await urgent.arank(), await first.arank(), await second.arank())
        info = await first.ainfo()
        return (
            first,
            ranks,
            await first.astatus(),
            await later.astatus(),
            await later.arank(),
            info,
            await first.aexists(),
            await first.ascore(),
        )

    first, ranks, status, later_status, later_rank, info, exists, score = run(scenario())
    assert isinstance(first, Job) and ranks == (0, 1, 2)
    assert (status, later_status, later_rank, exists) == ("ready", "delayed", None, True)
    assert info is not None and info.body["task"] == "testproject.demo.async_tasks.aadd"
    # the same queue, the same records: the sync side reads them alike
    assert first.rank() == 1 and first.score() == score and first.status() == "ready"


def test_aenqueue_bad_input_raises_and_writes_nothing(project: dict[str, str]) -> None:
    q = get_queue("default")
    with pytest.raises(UnsupportedArgument):
        run(at.aadd.aenqueue(1, {1, 2}))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        run(at.aadd.aenqueue(1))  # type: ignore[call-arg]
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}


def test_aenqueue_duplicate_tag_is_refused(project: dict[str, str]) -> None:
    tagged = at.aadd.using(tag="same")
    run(tagged.aenqueue(1, 1))
    with pytest.raises(DuplicateJob):
        run(tagged.aenqueue(2, 2))
    assert get_queue("default").total_count() == 1


def test_async_queue_api_matches_the_sync_one(project: dict[str, str]) -> None:
    q = get_queue("default")

    async def scenario() -> dict[str, Any]:
        aq = get_async_queue("default")
        tags = [await aq.publish({"n": i}) for i in range(3)]
        out: dict[str, Any] = {"tags": tags, "rank": [await aq.rank(t) for t in tags]}
        out["state"] = await aq.state(tags[0])
        msgs, _ = await aq.claim(2, "me")
        out["claimed"] = [m.tag for m in msgs]
        out["ack"] = await aq.ack(msgs[0], result={"ok": 1})
        out["again"] = await aq.ack(msgs[0])  # stale now
        out["nack"] = await aq.nack(msgs[1], "boom", retry_in=0)
        out["result"] = await aq.result(tags[0])
        out["cancel"] = await aq.cancel(tags[2])
        out["none"], out["hint"] = await aq.claim(5, "me")
        return out

    out = run(scenario())
    assert out["rank"] == [0, 1, 2] and out["state"] == "ready"
    assert out["claimed"] == out["tags"][:2]
    assert (out["ack"], out["again"], out["nack"]) == (True, False, "retry")
    assert out["result"] == {"ok": 1} and out["cancel"] is True
    assert [m.tag for m in out["none"]] == [out["tags"][1]]  # the retried one, back in line
    assert q.counts()["inflight"] == 1 and q.stats()["acked"] == 1


def test_async_publish_takes_a_group(make_queue: Any, zqueue_settings: dict[str, Any]) -> None:
    """``AsyncQueue.publish(..., group=...)`` writes the group as ``Queue.publish`` does:
    in a fair queue the groups are served in turn."""
    q: Queue = make_queue("fairq", fairness="groups")

    async def scenario() -> list[str]:
        client = make_async_client(conf.get_config())  # a cluster client on a cluster
        try:
            aq = AsyncQueue(q, client=client)
            for i in range(3):
                await aq.publish(f"a{i}", group="a")
            return [await aq.publish(f"b{i}", group="b") for i in range(2)]
        finally:
            await client.aclose()

    b_tags = run(scenario())
    assert q.info(b_tags[0]).group == "b"  # type: ignore[union-attr]
    order = [m.body for m in q.claim(5)[0]]
    # one turn each: {a0, b0}, then {a1, b1} (a tie is broken by the random tag), then a2
    assert {*order[:2]} == {"a0", "b0"} and {*order[2:4]} == {"a1", "b1"}
    assert order[4] == "a2"


def test_acancel_cancels_like_cancel_waiting_or_running(project: dict[str, str]) -> None:
    """``Job.acancel`` runs the same cancel as ``Job.cancel``: a waiting job and a running
    one both end ``cancelled`` (kept), a dead or missing one is refused; ``astatus`` reads
    the state as ``status`` does."""
    q = get_queue("default")
    waiting, running, done = (tasks.add.enqueue(i, i) for i in range(3))
    q.claim(1, consumer="w")  # `waiting` is claimed: it runs now
    waiting, running = running, waiting

    async def scenario() -> tuple[Any, ...]:
        return (
            await waiting.acancel(),
            await running.acancel(),
            await waiting.astatus(),
            await running.astatus(),
            await Job("no-such-job", "default").acancel(),
        )

    assert run(scenario()) == (True, True, "cancelled", "cancelled", False)
    assert waiting.status() == running.status() == "cancelled"
    assert q.cancelled(running.id).was == "leased"  # type: ignore[union-attr]
    assert done.status() == "ready"  # the other job is untouched


def test_async_rank_on_a_partitioned_queue_equals_the_sync_rank(
    make_queue: Any, redis_client: Any, zqueue_settings: dict[str, Any]
) -> None:
    q: Queue = make_queue("parts", partitions=4)
    tags = q.publish_many([{"i": i} for i in range(40)], priority=0)
    q.publish({"i": "urgent"}, tag="urgent", priority=5)

    async def ranks() -> list[int | None]:
        client = make_async_client(conf.get_config())  # a cluster client on a cluster
        try:
            aq = AsyncQueue(q, client=client)
            return [await aq.rank(t) for t in ["urgent", *tags]]
        finally:
            await client.aclose()

    got = run(ranks())
    assert got == [q.rank(t) for t in ["urgent", *tags]]
    assert got[0] == 0 and sorted(got) == list(range(41))


def test_a_queue_on_its_own_client_needs_its_asyncio_client(
    project: dict[str, str], make_queue: Any
) -> None:
    with pytest.raises(Exception, match="asyncio client"):
        run(AsyncQueue(make_queue("own")).rank("x"))


def test_async_reads_say_queue_unavailable_when_redis_is_down(project: dict[str, str]) -> None:
    import redis.asyncio as aredis

    async def scenario() -> None:
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        dead = aredis.Redis(
            host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
        )
        await AsyncQueue(get_queue("default"), client=dead).rank("x")

    with pytest.raises(QueueUnavailable):
        run(scenario())


def test_async_views_on_wsgi_each_loop_gets_its_client(project: dict[str, str]) -> None:
    """async_to_sync runs each call on a loop of its own (Django's async views under WSGI)."""
    jobs = [async_to_sync(at.aadd.aenqueue)(i, i) for i in range(3)]
    assert [async_to_sync(j.arank)() for j in jobs] == [0, 1, 2]


# ------------------------------------------------------------------ the event-loop lane


def test_lane_arguments_that_do_not_fit_are_dead_at_once(project: dict[str, str]) -> None:
    q = get_queue("default")
    tag = q.publish(
        {"task": "testproject.demo.async_tasks.aadd", "args": [1], "kwargs": {"c": 2}},
        max_retries=5,
    )
    w = burst()
    assert w.failed == 1
    info = q.info(tag)
    assert info is not None and info.state == "dead" and info.attempts == 1
    assert (info.last_error or "").splitlines()[0] == (
        "arguments do not fit testproject.demo.async_tasks.aadd(a, b): missing a required "
        "argument: 'b'; got an unexpected keyword argument 'c' (permanent: a rerun would "
        "fail the same way)"
    )


def test_lane_runs_async_jobs_and_stores_results(project: dict[str, str]) -> None:
    jobs = [at.aadd.enqueue(i, i) for i in range(30)]
    w = burst(async_concurrency=8)
    assert w.processed == 30 and w.failed == 0
    assert [j.result() for j in jobs] == [2 * i for i in range(30)]
    assert run(jobs[0].aresult()) == 0 and run(jobs[0].astatus()) == "finished"
    q = get_queue("default")
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    assert q.stats()["acked"] == 30


def test_the_lane_acks_a_flush_in_ack_many_calls_as_a_thread_does(
    project: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lane sent one ack.lua call per job; its flush now goes through the consumer's
    own add_outcomes: the successes of a flush in one ack_many call per shard, each
    failure a nack of its own, and every job still acked or retried exactly once."""
    sent: list[str] = []
    real_send = AsyncEngine.send

    async def recording_send(self: AsyncEngine, calls: Any, **kw: Any) -> list[Any]:
        sent.extend(c.script for c in calls)
        return await real_send(self, calls, **kw)

    monkeypatch.setattr(AsyncEngine, "send", recording_send)
    jobs = [at.aadd.enqueue(i, i) for i in range(40)]
    failing = at.always_fails.enqueue()
    w = burst(async_concurrency=8)
    assert [j.result() for j in jobs] == [2 * i for i in range(40)]
    q = get_queue("default")
    assert q.stats()["acked"] == 40 and q.state(failing.id) == "dead"
    assert "ack" not in sent, sent
    assert 1 <= sent.count("ack_many") < 40, sent
    # the failing job: two retries, then dead, each failure a nack of its own; on a loaded
    # host some were seen sent through the worker's sync client, which `sent` does not see
    # (w.failed below counts all three)
    assert 1 <= sent.count("nack") <= 3, sent
    assert w.processed == 43 and w.failed == 3  # runs: 40, and three of the failing job


def test_the_lanes_ack_many_leaves_unique_for_jobs_to_ack_lua(project: dict[str, str]) -> None:
    """A job whose record holds a field only ack.lua handles (a unique_for reservation)
    is left by the lane's ack_many call and acked by ack.lua after it, in the reporting
    thread: the job is acked once and its tag stays reserved; the plain jobs of the same
    flush are acked too."""
    jobs = [at.aadd.enqueue(i, 1) for i in range(5)]
    once = at.aadd.using(tag="lane-once", unique_for=60).enqueue(10, 1)
    w = burst(async_concurrency=8)
    assert w.processed == 6 and w.failed == 0
    assert [j.result() for j in jobs] == [i + 1 for i in range(5)] and once.result() == 11
    q = get_queue("default")
    assert q.stats()["acked"] == 6 and q.counts()["inflight"] == 0
    assert 0 < q.engine._client.pttl(q.engine._keys.unique("lane-once")) <= 60_000
    with pytest.raises(DuplicateJob) as err:
        at.aadd.using(tag="lane-once", unique_for=60).enqueue(10, 1)
    assert err.value.states == ["reserved"]


def test_async_jobs_a_thread_claims_wait_for_a_lane_slot(project: dict[str, str]) -> None:
    """``--async-concurrency`` caps the coroutines of a process, whoever claimed them:
    consumer threads that claim async jobs hand them to the lane only when it has a free
    slot (they ran at once, past the cap, and a thread kept claiming, so one worker
    could take a whole queue into its lane)."""
    at.PEAK.update(now=0, most=0)
    for _ in range(40):
        at.apeak.enqueue(0.05)
    w = burst(async_concurrency=3, concurrency=2, prefetch=10)
    assert w.processed == 40 and w.failed == 0
    assert 1 <= at.PEAK["most"] <= 3, at.PEAK
    assert get_queue("default").stats()["acked"] == 40


def test_jobs_the_lane_runs_are_in_the_task_statistics(project: dict[str, str]) -> None:
    """Per-task statistics count the jobs of the event-loop lane as a consumer thread's
    (they were left out: only a thread's flush wrote them)."""
    from django_zqueue.worker import taskstats

    for i in range(12):
        at.aadd.enqueue(i, i)
    w = burst(async_concurrency=4)
    assert w.processed == 12
    stats = {s.task: s for s in taskstats.read(get_queue("default"))}
    assert stats["testproject.demo.async_tasks.aadd"].runs == 12


def test_sync_and_async_tasks_share_one_queue(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    jobs = []
    for i in range(10):
        jobs.append(tasks.add.enqueue(i, 1))
        jobs.append(at.aadd.enqueue(i, 2))
    at.arecord.enqueue(str(ledger), "a")
    tasks.record.enqueue(str(ledger), "s")
    w = burst(async_concurrency=4, concurrency=2)
    assert w.processed == 22 and w.failed == 0
    assert [j.result() for j in jobs] == [i + k for i in range(10) for k in (1, 2)]
    assert sorted(line.split()[0] for line in lines(ledger)) == ["a", "s"]


def test_async_jobs_run_concurrently_each_with_its_own_current_job(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    starts: list[str] = []
    gate = threading.Event()

    def on_start(sender: Any, job: Any, **kw: Any) -> None:
        starts.append(job.id)
        if len(starts) == 20:
            gate.set()

    signals.job_started.connect(on_start, weak=False, dispatch_uid="conc")
    try:
        for i in range(20):
            at.arecord.enqueue(str(ledger), i, 0.2)
        # no scanner: the demo's */10 schedule never fires a job into the counted queue
        w = Worker(["default"], async_concurrency=20, scanner=False)
        t = in_background(w)
        # all 20 started while none had finished: they wait together
        assert gate.wait(10)
        assert get_queue("default").stats().get("acked", 0) < 20
        assert wait_for(lambda: get_queue("default").stats().get("acked", 0) == 20)
        w.stop()
        t.join(10)
    finally:
        signals.job_started.disconnect(dispatch_uid="conc")
    got = lines(ledger)
    assert len(got) == 20 and all(line.endswith("attempt=1 mine=True") for line in got)
    assert current_job() is None


def test_async_failures_retry_then_dead_letter_with_the_hook_once(
    project: dict[str, str], tmp_path: Path
) -> None:
    import dataclasses

    ledger = tmp_path / "ledger"
    calls: list[tuple[Any, BaseException | None]] = []
    seen: list[bool] = []
    hooked = dataclasses.replace(
        at.always_fails, on_failure=lambda job, exc: calls.append((job, exc))
    )
    registry.register(hooked)

    def on_failed(sender: Any, will_retry: bool, **kw: Any) -> None:
        seen.append(will_retry)

    signals.job_failed.connect(on_failed)
    try:
        job = at.always_fails.enqueue(str(ledger))
        w = burst()
    finally:
        registry.register(at.always_fails)
        signals.job_failed.disconnect(on_failed)
    assert lines(ledger) == [f"fail attempt={i}" for i in (1, 2, 3)]  # max_retries=2
    assert seen == [True, True, False]
    assert w.processed == 3 and w.failed == 3
    assert len(calls) == 1 and calls[0][0].attempt == 3 and isinstance(calls[0][1], RuntimeError)
    info = job.info()
    assert info is not None and info.state == "dead"
    assert "RuntimeError: this async task always fails" in (info.last_error or "")
    assert "Traceback" in (info.last_error or "")


def test_async_flaky_task_succeeds_on_retry(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    job = at.flaky.enqueue(str(ledger), 3)
    burst()
    assert lines(ledger) == ["flaky attempt=1", "flaky attempt=2", "flaky attempt=3"]
    assert not job.exists()


def test_async_timeout_interrupts_the_await(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    job = at.too_slow.enqueue(str(ledger))
    fine = at.within_timeout.enqueue()
    burst()
    assert lines(ledger) == ["too_slow start"]  # the await never resumed
    info = job.info()
    assert info is not None and info.state == "dead"
    assert "django_zqueue.worker.JobTimeout" in (info.last_error or "")
    assert fine.result() == "in time"  # the timeout did not leak to the other job


def test_without_a_lane_a_thread_runs_async_tasks_with_the_same_semantics(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    slow = at.too_slow.enqueue(str(ledger))
    added = at.aadd.enqueue(20, 22)
    flaky = at.flaky.enqueue(str(ledger), 2)
    w = burst(async_concurrency=0)
    assert w.lane is None and w.processed == 4
    assert added.result() == 42 and not flaky.exists()
    info = slow.info()
    assert info is not None and info.state == "dead" and "JobTimeout" in (info.last_error or "")


def test_cancel_a_running_async_job(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    job = at.forever.enqueue(str(ledger))
    w = Worker(["default"], async_concurrency=5, scan_interval=0.05)
    t = in_background(w)
    try:
        assert wait_for(lambda: lines(ledger) == ["forever start"])
        assert w.lane is not None
        assert w.lane.cancel("default", "not-running") is False
        assert w.lane.cancel("default", job.id) is True
        assert wait_for(lambda: job.status() == "dead")
    finally:
        w.stop()
        t.join(10)
    info = job.info()
    assert info is not None and "django_zqueue.worker.JobCancelled" in (info.last_error or "")


def test_stop_gives_running_async_jobs_back_after_the_grace(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    job = at.forever.enqueue(str(ledger))
    w = Worker(["default"], async_concurrency=5, scan_interval=0.05, grace=0.2)
    t = in_background(w)
    assert wait_for(lambda: lines(ledger) == ["forever start"])
    w.stop()
    t.join(10)
    assert not t.is_alive()
    # given back, not lost and not counted as an attempt (a consumer thread woken by the
    # release's wake-up token may claim it on its way out: it gives it back too)
    assert wait_for(lambda: job.status() == "ready")
    info = job.info()
    assert info is not None and info.attempts == 0


def test_short_lease_of_an_async_job_is_extended_while_it_runs(project: dict[str, str]) -> None:
    at.aadd.using(visibility_timeout=1).enqueue(1, 1)
    slow = at.asleep.using(visibility_timeout=1).enqueue(2.5)
    w = burst(async_concurrency=4)
    q = get_queue("default")
    # ran once, never recovered by the scanner though it ran 4 leases long
    assert w.processed == 2 and q.stats().get("expired", 0) == 0 and not slow.exists()


def test_async_progress_and_signals(project: dict[str, str]) -> None:
    events: list[str] = []
    progress: dict[str, Any] = {}

    def on_start(sender: Any, job: Any, **kw: Any) -> None:
        events.append(f"start {job.task_name}")
        progress["ctx"] = job

    signals.job_started.connect(on_start, weak=False, dispatch_uid="a1")
    signals.job_finished.connect(
        lambda sender, job, **kw: events.append("finish"), weak=False, dispatch_uid="a2"
    )
    try:
        at.asleep.enqueue(0.01)
        burst()
    finally:
        signals.job_started.disconnect(dispatch_uid="a1")
        signals.job_finished.disconnect(dispatch_uid="a2")
    assert events == ["start testproject.demo.async_tasks.asleep", "finish"]


def test_max_jobs_counts_the_lanes_jobs(project: dict[str, str]) -> None:
    for i in range(10):
        at.aadd.enqueue(i, i)
    w = Worker(["default"], max_jobs=4, async_concurrency=3, scan_interval=0.05)
    w.run()
    q = get_queue("default")
    # stopped early (each of its two lanes may overrun by one claim, as threads do), and
    # nothing lost: what was claimed and not run went back
    acked = q.stats()["acked"]
    assert 4 <= acked <= 8 and q.total_count() == 10 - acked
    assert q.counts()["inflight"] == 0


def test_lane_options() -> None:
    with pytest.raises(ValueError, match="async_concurrency"):
        Worker(["default"], async_concurrency=-1)
    assert default_async_concurrency(["default"]) == 100  # the async demo tasks use it
    assert default_async_concurrency(["emails"]) == 0
    assert Worker(["default"]).lane is None
    assert isinstance(Worker(["default"], async_concurrency=3).lane, AioLane)


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_async_orm_inside_async_jobs(project: dict[str, str]) -> None:
    article = Article.objects.create(title="hello")
    for _ in range(3):
        at.abump_views.enqueue(article)
    made = at.acreate_article.enqueue("from an async job")
    w = burst(async_concurrency=3)
    assert w.failed == 0, [get_queue("default").dead_letters()]
    article.refresh_from_db()
    assert article.views == 3
    assert Article.objects.get(pk=made.result()).title == "from an async job"


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_deleted_instance_fails_an_async_job_clearly(project: dict[str, str]) -> None:
    article = Article.objects.create(title="gone")
    job = at.abump_views.enqueue(article)
    Article.objects.filter(pk=article.pk).delete()
    burst()
    info = job.info()
    assert info is not None and info.state == "dead"  # a rerun cannot help: dead at once
    assert info.attempts == 1 and "ModelInstanceMissing" in (info.last_error or "")


def test_the_worker_command_runs_async_jobs(project: dict[str, str]) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    jobs = [at.aadd.enqueue(i, 1) for i in range(5)]
    call_command("zqueue_worker", "--burst", "--queues", "default", "--async-concurrency", "3")
    assert [j.result() for j in jobs] == [i + 1 for i in range(5)]
    with pytest.raises(CommandError, match="async-concurrency"):
        call_command("zqueue_worker", "--burst", "--async-concurrency", "-1")


def test_cancel_in_redis_stops_an_async_job_and_not_its_neighbours(
    project: dict[str, str], tmp_path: Path
) -> None:
    """Queue.cancel_job on a job of the event-loop lane: the heartbeat sees it, the job's
    asyncio task is cancelled after the grace (never an exception raised in the loop's
    thread), its outcome is not sent, and the job beside it on the same loop finishes."""
    ledger = tmp_path / "ledger"
    job = at.forever.enqueue(str(ledger))
    other = at.arecord.enqueue(str(ledger), "neighbour", 1.5)
    failures: list[Any] = []

    def on_failed(sender: Any, **kw: Any) -> None:
        failures.append(kw.get("job"))

    signals.job_failed.connect(on_failed)
    w = Worker(["default"], async_concurrency=5, scan_interval=0.05, cancel_grace=0.2)
    t = in_background(w)
    try:
        assert wait_for(lambda: "forever start" in lines(ledger))
        assert get_queue("default").cancel_job(job.id) == "running"
        assert wait_for(lambda: other.status() == "done" or not other.exists(), timeout=30)
        assert wait_for(lambda: w.lane is not None and not w.lane._tasks, timeout=30)
    finally:
        w.stop()
        t.join(10)
        signals.job_failed.disconnect(on_failed)
    assert not t.is_alive()
    assert job.status() == "cancelled"
    assert failures == []  # a cancel is not a failure: no job_failed signal (as in threads)
    assert "neighbour" in " ".join(lines(ledger))
    q = get_queue("default")
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    assert q.stats().get("failed", 0) == 0


def test_async_tasks_in_a_chain_and_a_chord_on_the_lane(project: dict[str, str]) -> None:
    """Workflow jobs of async def tasks run on the event-loop lane: each gets its
    parents' results first and hands on its own."""
    from django_zqueue import chain, chord

    flow = chain(at.aadd.s(1, 2), at.aadd.s(10), at.aadd.s(100)).enqueue()
    fan = chord([at.aadd.s(i, i) for i in range(4)], at.asum.s()).enqueue()
    # not a burst worker: a dependent enters the line only once its parent's ack is sent
    w = Worker(["default"], async_concurrency=8, scan_interval=0.05)
    t = in_background(w)
    try:
        assert flow.wait(timeout=30) == [113]
        assert fan.wait(timeout=30) == [12]
        assert w.lane is not None
    finally:
        w.stop()
        t.join(10)


def test_the_lane_logs_job_start_at_verbosity_two(
    project: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """-v 2 (DEBUG) shows a job_start line for an async job as for a thread job."""
    import logging

    job = at.aadd.enqueue(1, 2)
    with caplog.at_level(logging.DEBUG, logger="django_zqueue"):
        burst(async_concurrency=4)
    starts = [r.getMessage() for r in caplog.records if "event=job_start" in r.getMessage()]
    assert any(f"job={job.id}" in line for line in starts), starts
