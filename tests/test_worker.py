"""@task, the Worker and the management commands, against a real Redis.

In-process tests drive Worker(burst=True) directly; process tests start
``manage.py zqueue_worker`` as a subprocess and send it real signals.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings

from django_zqueue import conf, get_queue, signals
from django_zqueue.engine.redis.connection import is_cluster
from django_zqueue.tasks.task import Job
from django_zqueue.worker import Worker
from django_zqueue.worker.consumer import Consumer
from testproject.demo import tasks
from testproject.demo.models import Article

from .records_util import set_body
from .redis_server import redis_url
from .scripts_util import lose_scripts

ROOT = Path(__file__).resolve().parent.parent


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def burst(**kwargs: Any) -> Worker:
    w = Worker(["default"], burst=True, scan_interval=0.05, **kwargs)
    w.run()
    return w


def test_the_package_exports_current_job_without_importing_the_worker() -> None:
    code = (
        "import sys, django_zqueue\n"
        "assert django_zqueue.current_job() is None\n"
        "assert not [m for m in sys.modules if m.startswith('django_zqueue.worker')]\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


# ------------------------------------------------------------------ @task


def test_task_is_registered_and_callable_in_process() -> None:
    from django_zqueue.tasks import registry

    assert registry.get("testproject.demo.tasks.add") is tasks.add
    assert tasks.add(2, 3) == 5


def test_enqueue_returns_a_job_with_rank(project: dict[str, str]) -> None:
    first = tasks.add.enqueue(1, 2)
    second = tasks.add.enqueue(3, 4)
    urgent = tasks.add.using(priority=10).enqueue(5, 6)
    assert isinstance(first, Job) and first.queue_name == "default"
    assert (urgent.rank(), first.rank(), second.rank()) == (0, 1, 2)
    assert first.status() == "ready" and first.exists()
    info = first.info()
    assert info is not None and info.body["task"] == "testproject.demo.tasks.add"


def test_enqueue_in_at_many_and_cancel(project: dict[str, str]) -> None:
    from datetime import UTC, datetime, timedelta

    later = tasks.noop.enqueue_in(60)
    at = tasks.noop.enqueue_at(datetime.now(UTC) + timedelta(hours=1))
    assert later.status() == "delayed" and at.status() == "delayed"
    jobs = tasks.add.enqueue_many([(1, 2), {"a": 3, "b": 4}, ((5,), {"b": 6})])
    assert [j.rank() for j in jobs] == [0, 1, 2]
    assert later.cancel() and not later.exists() and later.status() == "cancelled"


def test_unsupported_argument_fails_at_enqueue_and_writes_nothing(
    project: dict[str, str],
) -> None:
    q = get_queue("default")
    with pytest.raises(TypeError, match="set"):
        tasks.record.enqueue("ledger", {1, 2})
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}


def test_dedup_tag_function(project: dict[str, str]) -> None:
    from django_zqueue import DuplicateJob

    t = tasks.add.using(tag=lambda a, b: f"add:{a}:{b}")
    job = t.enqueue(1, 2)
    assert job.id == "add:1:2"
    with pytest.raises(DuplicateJob):
        t.enqueue(1, 2)


# ------------------------------------------------------------------ transactions


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_enqueue_waits_for_commit(project: dict[str, str]) -> None:
    q = get_queue("default")
    with transaction.atomic():
        job = tasks.noop.enqueue()
        assert q.total_count() == 0  # not yet
    assert q.total_count() == 1 and job.rank() == 0


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_rollback_publishes_nothing(project: dict[str, str]) -> None:
    q = get_queue("default")

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            tasks.noop.enqueue()
            raise RuntimeError("rollback")

    with pytest.raises(RuntimeError):
        enqueue_then_fail()
    assert q.total_count() == 0


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_on_commit_opt_out_per_call_and_setting(project: dict[str, str]) -> None:
    q = get_queue("default")
    with transaction.atomic():
        tasks.noop.using(on_commit=False).enqueue()
        assert q.total_count() == 1
    with override_settings(ZQUEUE={**settings.ZQUEUE, "ENQUEUE_ON_COMMIT": False}):
        with transaction.atomic():
            tasks.noop.enqueue()
            assert get_queue("default").total_count() == 2


# ------------------------------------------------------------------ in-process worker


def test_worker_runs_jobs_and_stores_results(project: dict[str, str]) -> None:
    jobs = [tasks.add.enqueue(i, i) for i in range(20)]
    w = burst(concurrency=2, prefetch=5)
    assert w.processed == 20 and w.failed == 0
    assert [j.result() for j in jobs] == [2 * i for i in range(20)]
    assert jobs[0].status() == "finished"
    q = get_queue("default")
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
    assert q.stats()["acked"] == 20


def test_failures_retry_then_dead_letter(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    job = tasks.always_fails.enqueue(str(ledger))
    seen: list[bool] = []

    def on_failed(sender: Any, will_retry: bool, **kw: Any) -> None:
        seen.append(will_retry)

    signals.job_failed.connect(on_failed)
    try:
        burst()
    finally:
        signals.job_failed.disconnect(on_failed)
    assert lines(ledger) == [f"fail attempt={i}" for i in (1, 2, 3)]  # max_retries=2
    assert seen == [True, True, False]
    info = job.info()
    assert info is not None and info.state == "dead"
    assert info.last_error is not None and "RuntimeError: this task always fails" in info.last_error
    assert "Traceback" in info.last_error


def test_on_failure_hook_runs_once_when_the_job_is_dead(
    project: dict[str, str], tmp_path: Path
) -> None:
    import dataclasses

    from django_zqueue.tasks import registry

    calls: list[tuple[Any, BaseException | None]] = []
    hooked = dataclasses.replace(
        tasks.always_fails, on_failure=lambda job, exc: calls.append((job, exc))
    )
    registry.register(hooked)  # the same function: replaces the registered task
    try:
        job = tasks.always_fails.enqueue(str(tmp_path / "ledger"))
        w = burst()
    finally:
        registry.register(tasks.always_fails)
    assert w.processed == 3 and w.failed == 3  # two retries, then dead
    assert len(calls) == 1  # not for the retried attempts
    ctx, exc = calls[0]
    assert ctx.id == job.id and ctx.attempt == 3 and isinstance(exc, RuntimeError)


def test_flaky_task_succeeds_on_retry(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    job = tasks.flaky.enqueue(str(ledger), 3)
    burst()
    assert lines(ledger) == ["flaky attempt=1", "flaky attempt=2", "flaky attempt=3"]
    assert not job.exists()


def test_unknown_task_goes_to_dead_letters(project: dict[str, str]) -> None:
    q = get_queue("default")
    tag = q.publish({"task": "no.such.task", "args": [], "kwargs": {}})
    bad = q.publish("not a task payload")
    set_body(q.engine._client, q.engine._keys, bad, b"\xff\xfe")
    w = burst()
    assert w.failed == 2
    info = q.info(tag)
    assert info is not None and info.state == "dead"
    assert (info.last_error or "").splitlines()[0] == (
        "unknown task 'no.such.task': no task of that name is registered in this worker (a "
        "worker imports the tasks module of each installed app, <app>.tasks: a task defined "
        "in another module must be imported from its app's tasks.py)"
    )
    bad_info = q.info(bad)
    assert bad_info is not None and bad_info.state == "dead"
    assert "undecodable payload" in (bad_info.last_error or "")


@pytest.mark.parametrize(
    ("args", "kwargs", "problem"),
    [
        ([1], {}, "missing a required argument: 'b'"),
        ([1, 2, 3], {}, "too many positional arguments"),
        ([1], {"c": 2}, "missing a required argument: 'b'; got an unexpected keyword argument 'c'"),
    ],
)
def test_arguments_that_do_not_fit_are_dead_at_once(
    project: dict[str, str], args: list[int], kwargs: dict[str, int], problem: str
) -> None:
    """A body sent past enqueue's check (Queue.publish, an older release's task): the
    TypeError of binding is permanent, with its reason, however many retries are left."""
    q = get_queue("default")
    tag = q.publish(
        {"task": "testproject.demo.tasks.add", "args": args, "kwargs": kwargs}, max_retries=5
    )
    w = burst()
    assert w.failed == 1
    info = q.info(tag)
    assert info is not None and info.state == "dead" and info.attempts == 1
    first, second = (info.last_error or "").splitlines()[:2]
    assert first == (
        f"arguments do not fit testproject.demo.tasks.add(a, b): {problem} (permanent: a "
        "rerun would fail the same way)"
    )
    assert second.startswith("builtins.TypeError: ")


def test_a_type_error_inside_the_task_is_retried(project: dict[str, str]) -> None:
    """Only a call that does not bind is permanent: add(1, "x") enters the task."""
    q = get_queue("default")
    tag = q.publish(
        {"task": "testproject.demo.tasks.add", "args": [1, "x"], "kwargs": {}}, max_retries=1
    )
    w = burst()
    assert w.failed == 1
    info = q.info(tag)
    assert info is not None and info.state == "delayed"  # its retry, after the backoff
    assert (info.last_error or "").startswith("builtins.TypeError: unsupported operand")


def test_signals_and_progress(project: dict[str, str]) -> None:
    events: list[str] = []
    signals.job_started.connect(
        lambda sender, job, **kw: events.append(f"start {job.task_name}"),
        weak=False,
        dispatch_uid="t1",
    )
    signals.job_finished.connect(
        lambda sender, job, **kw: events.append("finish"), weak=False, dispatch_uid="t2"
    )
    try:
        tasks.with_progress.enqueue(4)
        burst()
    finally:
        signals.job_started.disconnect(dispatch_uid="t1")
        signals.job_finished.disconnect(dispatch_uid="t2")
    assert events == ["start testproject.demo.tasks.with_progress", "finish"]
    assert get_queue("default").stats()["acked"] == 1


def test_progress_is_visible_while_running(project: dict[str, str]) -> None:
    import threading

    from django_zqueue.worker import current_job

    seen: dict[str, Any] = {}
    gate = threading.Event()

    def on_start(sender: Any, job: Any, **kw: Any) -> None:
        if job.task_name.endswith("sleep"):
            ctx = current_job()
            assert ctx is not None
            ctx.progress(0.5, "halfway")
            info = ctx.queue.info(ctx.id)
            seen["progress"] = info.progress if info else None
            gate.set()

    signals.job_started.connect(on_start, weak=False, dispatch_uid="p")
    try:
        tasks.sleep.enqueue(0.01)
        burst()
    finally:
        signals.job_started.disconnect(dispatch_uid="p")
    assert gate.is_set()
    assert seen["progress"]["v"] == 0.5 and seen["progress"]["n"] == "halfway"


def test_timeout_is_enforced(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    job = tasks.too_slow.enqueue(str(ledger))
    burst()
    assert lines(ledger) == ["too_slow start"]
    info = job.info()
    assert info is not None and info.state == "dead" and "JobTimeout" in (info.last_error or "")


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_model_instance_by_reference(project: dict[str, str]) -> None:
    article = Article.objects.create(title="hello")
    tasks.bump_views.enqueue(article)
    burst()
    article.refresh_from_db()
    assert article.views == 1


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_deleted_instance_fails_clearly(project: dict[str, str]) -> None:
    article = Article.objects.create(title="gone")
    job = tasks.bump_views.enqueue(article)
    Article.objects.filter(pk=article.pk).delete()
    burst()
    info = job.info()
    assert info is not None and info.state == "dead"
    assert "ModelInstanceMissing" in (info.last_error or "")


def test_max_jobs_stops_the_worker(project: dict[str, str]) -> None:
    for _ in range(10):
        tasks.noop.enqueue()
    w = Worker(["default"], max_jobs=3, prefetch=2)
    w.run()
    assert w.processed == 3 and get_queue("default").total_count() == 7


def test_strict_order_across_queues(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    for i in range(3):
        tasks.record.using(queue="reports").enqueue(str(ledger), f"reports{i}")
        tasks.record.using(queue="emails").enqueue(str(ledger), f"emails{i}")
    Worker(["emails", "reports"], burst=True).run()
    assert [line.split()[0] for line in lines(ledger)] == [
        "emails0",
        "emails1",
        "emails2",
        "reports0",
        "reports1",
        "reports2",
    ]


def test_expired_lease_recovered_by_embedded_scanner(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    tasks.record.enqueue(str(ledger), "x")
    lost = q.get()  # a consumer that "crashed" holding the job
    assert lost is not None
    q.engine._client.zadd(q.engine._keys.leased, {lost.tag: 0}, xx=True)  # its lease runs out
    w = Worker(["default"], burst=False, scan_interval=0.05)
    import threading

    threading.Timer(1.0, w.stop).start()
    w.run()
    assert lines(ledger)[0].startswith("x attempt=2")


# ------------------------------------------------------------------ processes


def start_worker(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), "zqueue_worker", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.slow
def test_worker_process_burst(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    for i in range(30):
        tasks.record.enqueue(str(ledger), i)
    delayed = tasks.record.enqueue_in(30, str(ledger), "delayed")
    proc = start_worker(project, "--burst", "--concurrency", "2", "--prefetch", "3")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert sorted(int(x.split()[0]) for x in lines(ledger)) == list(range(30))
    # burst does not wait for a delayed job; once it is due, the next run takes it
    assert delayed.status() == "delayed"
    q = get_queue("default")
    q.engine._client.zadd(q.engine._keys.delayed, {delayed.id: 0}, xx=True)
    proc = start_worker(project, "--burst")
    proc.communicate(timeout=30)
    assert lines(ledger)[-1].startswith("delayed")


@pytest.mark.slow
def test_sigterm_finishes_running_job_and_loses_nothing(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    tasks.sleep.enqueue(1.0, str(ledger), "long")
    for i in range(5):
        tasks.sleep.enqueue(0.0, str(ledger), f"short{i}")
    proc = start_worker(project, "--prefetch", "3", "--grace", "10")
    assert wait_for(lambda: "start long" in lines(ledger))
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "done long" in lines(ledger)  # the running job finished within the grace
    counts = q.counts()
    assert counts["inflight"] == 0  # prefetched ones were given back at once
    started = {x.split()[1] for x in lines(ledger) if x.startswith("start")}
    assert counts["ready"] + len(started) == 6  # nothing lost


@pytest.mark.slow
def test_sigkill_mid_job_runs_again_after_the_lease(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    job = tasks.sleep.using(visibility_timeout=1).enqueue(2.0, str(ledger), "victim")
    proc = start_worker(project)
    assert wait_for(lambda: "start victim" in lines(ledger))
    proc.kill()
    proc.wait(5)
    assert q.state(job.id) == "leased"
    survivor = start_worker(project, "--grace", "5")
    try:
        assert wait_for(lambda: lines(ledger).count("done victim") == 1, timeout=15)
    finally:
        survivor.send_signal(signal.SIGTERM)
        survivor.communicate(timeout=15)
    assert lines(ledger).count("start victim") == 2
    assert not q.exists(job.id)


@pytest.mark.slow
def test_two_processes(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    tasks.record.enqueue_many([(str(ledger), i) for i in range(40)])
    proc = start_worker(project, "--burst", "--processes", "2")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert sorted(int(x.split()[0]) for x in lines(ledger)) == list(range(40))
    assert len({x.split()[2] for x in lines(ledger)}) >= 1


# ------------------------------------------------------------------ operator commands


def test_operator_commands(project: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    from django.core.management.base import CommandError

    job = tasks.always_fails.enqueue()
    ready = tasks.noop.enqueue()
    burst()
    call_command("zqueue_stats")
    out = capsys.readouterr().out
    assert "default" in out and "dead" in out
    call_command("zqueue_job", "default", job.id)
    assert "state: dead" in capsys.readouterr().out
    with pytest.raises(CommandError):
        call_command("zqueue_job", "default", "missing")
    call_command("zqueue_dead", "default", "list")
    assert job.id in capsys.readouterr().out
    call_command("zqueue_dead", "default", "requeue", job.id)
    assert job.status() == "ready"
    call_command("zqueue_scanner", "--once")
    assert ready.status() in ("unknown", "finished")


def test_worker_survives_killed_connections(prefix: str, tmp_path: Path, redis_client: Any) -> None:
    """CLIENT KILL every worker connection repeatedly: it reconnects and loses nothing."""
    import threading

    from django_zqueue.engine.redis.connection import is_cluster

    # every server the test's client talks to (each node of a cluster)
    admins = (
        [n.redis_connection for n in redis_client.get_nodes()]
        if is_cluster(redis_client)
        else [redis_client]
    )
    name = f"zqkill-{prefix}"
    value = {
        **settings.ZQUEUE,
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "CONNECTION_OPTIONS": {"client_name": name},
        # a claim whose reply dies with its connection leaves its jobs leased to nobody
        # until the lease runs out (then the scanner puts them back): a short lease keeps
        # that within the test's time (the heartbeat extends the leases of held jobs)
        "QUEUES": {**settings.ZQUEUE["QUEUES"], "default": {"visibility_timeout": 3.0}},
    }
    ledger = tmp_path / "ledger"
    with override_settings(ZQUEUE=value):
        try:
            jobs = tasks.sleep.enqueue_many([(0.01, str(ledger), i) for i in range(60)])
            w = Worker(["default"], concurrency=2, scan_interval=0.05)
            runner = threading.Thread(target=w.run)
            runner.start()
            deadline = time.monotonic() + 30
            kills = 0
            while time.monotonic() < deadline and not all(
                f"done {i}" in lines(ledger) for i in range(60)
            ):
                for admin in admins:
                    for c in admin.client_list():
                        if c.get("name") == name:
                            admin.client_kill_filter(_id=c["id"])
                            kills += 1
                time.sleep(0.1)
            w.stop()
            runner.join(15)
            done = [x for x in lines(ledger) if x.startswith("done")]
            assert sorted(int(x.split()[1]) for x in set(done)) == list(range(60))
            assert kills > 0
            assert not any(j.exists() for j in jobs)
        finally:
            conf.reset()


# ------------------------------------------------------------------ review regressions


def test_timeout_does_not_leak_to_the_next_job(project: dict[str, str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    tasks.quick_with_timeout.enqueue()
    slow = tasks.sleep.enqueue(1.0, str(ledger), "slow")
    burst(prefetch=2)
    assert lines(ledger) == ["start slow", "done slow"]
    assert not slow.exists()


def test_short_per_task_lease_is_extended_while_running(
    project: dict[str, str], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    tasks.sleep.using(visibility_timeout=1).enqueue(3.0, str(ledger), "long")
    w = burst()
    assert lines(ledger) == ["start long", "done long"]  # ran once, never reclaimed
    assert w.failed == 0 and get_queue("default").stats().get("expired", 0) == 0


def test_failing_signal_receiver_does_not_strand_the_job(project: dict[str, str]) -> None:
    def broken(**kw: Any) -> None:
        raise RuntimeError("receiver bug")

    signals.job_finished.connect(broken, weak=False, dispatch_uid="broken")
    try:
        job = tasks.add.enqueue(1, 1)
        burst()
    finally:
        signals.job_finished.disconnect(dispatch_uid="broken")
    assert job.result() == 2 and not job.exists()


def test_stop_gives_back_prefetched_jobs_at_once(project: dict[str, str], tmp_path: Path) -> None:
    import threading

    ledger = tmp_path / "ledger"
    q = get_queue("default")
    tasks.sleep.enqueue_many([(1.0, str(ledger), i) for i in range(4)])
    w = Worker(["default"], prefetch=4, grace=5)
    runner = threading.Thread(target=w.run)
    runner.start()
    assert wait_for(lambda: "start 0" in lines(ledger))
    w.stop()
    time.sleep(0.3)  # the first job is still running
    assert q.counts()["inflight"] == 1 and q.total_count() == 3
    runner.join(10)
    assert lines(ledger) == ["start 0", "done 0"]
    assert q.total_count() == 3 and q.counts()["inflight"] == 0


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_failed_publish_after_commit_does_not_drop_other_callbacks(
    project: dict[str, str],
) -> None:
    q = get_queue("default")
    q.publish("x", tag="taken")
    ran: list[str] = []
    with transaction.atomic():
        tasks.noop.using(tag="taken").enqueue()  # will clash at commit
        transaction.on_commit(lambda: ran.append("later callback"))
        second = tasks.noop.enqueue()
    assert ran == ["later callback"]
    assert second.exists()


@pytest.mark.parametrize(
    "options",
    [{"timeout": True}, {"timeout": 0}, {"result_ttl": 0}, {"result_ttl": float("inf")}],
)
def test_task_options_are_validated(options: dict[str, Any]) -> None:
    from django_zqueue import InvalidArgument, task

    with pytest.raises(InvalidArgument):
        task(name=f"bad-{options}", **options)(lambda: None)


@pytest.mark.slow
def test_delayed_jobs_run_on_time_in_a_worker_process(
    project: dict[str, str], tmp_path: Path
) -> None:
    """Never early, and each one runs (how soon after it is due is measured in bench/)."""
    ledger = tmp_path / "ledger"
    proc = start_worker(project, "--grace", "5")
    try:
        time.sleep(1.0)  # the worker is up and idle, blocked on the notify list
        sent = {}
        for delay in (0.5, 1.0, 1.5):
            sent[delay] = time.time()
            tasks.stamp.enqueue_in(delay, str(ledger), delay)
        assert wait_for(lambda: len(lines(ledger)) == 3, timeout=15)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    for line in lines(ledger):
        delay_s, started = line.split()
        due = sent[float(delay_s)] + float(delay_s)
        assert float(started) >= due - 0.005  # not early (Redis and this host share a clock)


def test_worker_survives_script_flush(project: dict[str, str], redis_client: Any) -> None:
    jobs = [tasks.add.enqueue(i, 1) for i in range(10)]
    lose_scripts(redis_client)
    burst(prefetch=3)
    assert [j.result() for j in jobs] == [i + 1 for i in range(10)]


# ------------------------------------------------------------------ adaptive prefetch


def test_adaptive_batch_size() -> None:
    w = Worker(["default"])  # prefetch None: auto
    assert w.auto_prefetch and w.prefetch == 20
    c = Consumer(w)
    assert c.next_batch(1, 1, -1.0) == 1  # nothing ran yet
    assert c.next_batch(1, 1, 0.0005) == 2  # a full claim of short jobs doubles
    assert c.next_batch(16, 16, 0.0005) == 20  # up to the maximum
    assert c.next_batch(20, 7, 0.0005) == 1  # a short claim: the line is short
    assert c.next_batch(8, 8, 0.01) == 5  # never more than ~50 ms of work
    assert c.next_batch(8, 8, 2.0) == 1  # slow jobs: one at a time
    fixed = Worker(["default"], prefetch=4)
    assert not fixed.auto_prefetch and Consumer(fixed).next_batch(1, 0, 5.0) == 4


def test_adaptive_prefetch_grows_on_a_long_line(
    project: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    real = Consumer.next_batch

    def record(self: Consumer, want: int, got: int, per_job: float) -> int:
        sizes.append(real(self, want, got, per_job))
        return sizes[-1]

    monkeypatch.setattr(Consumer, "next_batch", record)
    # the ~50 ms cap on held work is tested above; here a loaded machine must not make
    # the short jobs look slow enough to stop the growth
    monkeypatch.setattr("django_zqueue.worker.consumer.AUTO_HOLD_SECONDS", 60.0)
    ledger = tmp_path / "ledger"
    tasks.record.enqueue_many([(str(ledger), i) for i in range(120)])
    w = burst()
    runs = sorted(int(x.split()[0]) for x in lines(ledger))
    assert w.processed == 120 and runs == list(range(120))
    assert 20 in sizes  # reached the maximum batch on a line of short jobs
    assert get_queue("default").counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}


def test_a_slow_job_hands_its_prefetched_jobs_back(project: dict[str, str]) -> None:
    q = get_queue("default")
    tags = q.publish_many([{"task": "x"}] * 4)
    q.publish({"task": "x"}, tag="behind")
    msgs, _ = q.claim(4, "me")
    w = Worker(["default"])
    w.leases.hold(q, msgs)
    assert w.leases.start(q, msgs[0])  # running for 2 s, the other three waiting behind it
    running = w.leases.get(q, msgs[0])
    assert running is not None
    running.started -= 2.0
    w.leases.hand_back_waiting(time.monotonic())
    assert [q.rank(t) for t in tags[1:]] == [0, 1, 2]  # at their place, ahead of "behind"
    assert q.rank("behind") == 3 and q.state(tags[0]) == "leased"
    assert not any(w.leases.start(q, m) for m in msgs[1:])  # the consumer will not run them
    assert all(i is not None and i.attempts == 0 for i in map(q.info, tags[1:]))
    assert w.leases.claimed == 1


def test_a_woken_thread_claims_in_the_same_round_trip(project: dict[str, str]) -> None:
    import threading

    q = get_queue("default")
    w = Worker(["default"])
    c = Consumer(w)
    assert c.wait(0.2, 1) is None  # no wake-up token: nothing claimed
    timer = threading.Timer(0.2, lambda: q.publish({"task": "x"}, tag="late"))
    timer.start()
    woke = c.wait(1.0, 5)
    timer.join()
    if is_cluster(w.wakeups.client):  # on a Redis Cluster the wait only wakes; the loop claims
        assert woke is None and q.state("late") == "ready"
        return
    assert woke is not None
    queue, msgs = woke
    assert queue.name == "default" and [m.tag for m in msgs] == ["late"]
    assert q.state("late") == "leased" and q.counts()["inflight"] == 1
    # a token with nothing left to claim: None, and the token is used up
    assert q.ack(msgs[0])
    q.engine._client.lpush(q.engine._notify_keys[0], "1")
    assert c.wait(1.0, 1) is None and q.engine._client.llen(q.engine._notify_keys[0]) == 0
