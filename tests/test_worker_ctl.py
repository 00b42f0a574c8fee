"""Orders to one worker (ops/workerctl.py): quiet and stop, through Redis (the ``wctl``
hash, read at the worker's heartbeat), from ``manage.py zqueue_worker_ctl`` and from the
admin's workers page (confirmed, ``manage_jobs``, audited in ``LogEntry``). Real Redis,
real worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_zqueue import conf, get_queue
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.ops import workerctl
from django_zqueue.read.workers import WorkerInfo, read_workers
from testproject.demo import tasks

from .conftest import redis_url
from .test_admin import BASE, client_for, make_user

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 60.0  # seconds: the bound of every wait below (a hung worker fails, never blocks)


def wait_for(what: Callable[[], Any], why: str) -> Any:
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"not within {LIMIT:g} s: {why}")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def the_worker() -> WorkerInfo | None:
    found = read_workers([get_queue("default").engine]).workers
    return found[0] if found else None


@pytest.fixture
def project(prefix: str) -> Iterator[dict[str, str]]:
    """The testproject's queues under this test's prefix (enqueued at once, in a test's
    transaction too); the environment of the worker processes."""
    value = {
        **settings.ZQUEUE,
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "ENQUEUE_ON_COMMIT": False,
    }
    with override_settings(ZQUEUE=value):
        yield {
            **os.environ,
            "ZQUEUE_REDIS_URL": redis_url(),
            "ZQUEUE_PREFIX": prefix,
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "testproject.settings",
        }
    conf.reset()


@pytest.fixture
def start_worker(project: dict[str, str]) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "testproject" / "manage.py"), "zqueue_worker", *args],
            env=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def test_a_quiet_worker_claims_nothing_more_while_its_running_job_finishes(
    start_worker: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    tasks.sleep.enqueue(2.0, str(ledger), "a")
    proc = start_worker("--queues", "default", "--concurrency", "2", "--no-scanner")
    wait_for(lambda: "start a" in lines(ledger), "the first job started")
    worker = wait_for(the_worker, "the worker registered")
    sent = workerctl.send(worker.id, "quiet")
    assert sent.queues == ["default"] and sent.running == 1
    wait_for(lambda: (w := the_worker()) and w.state == "quiet", "the worker said quiet")
    # its second thread is idle: a job published now would be claimed at once
    later = tasks.record.enqueue(str(ledger), "b")
    wait_for(lambda: "done a" in lines(ledger), "the running job finished")
    time.sleep(1.5)  # more than an idle thread's wait: a claim would have happened by now
    assert q.state(later.id) == "ready"
    assert q.counts() == {"ready": 1, "delayed": 0, "inflight": 0, "dead": 0}
    assert proc.poll() is None  # quiet: idle, not gone
    w = the_worker()
    assert w is not None and w.live and w.state == "quiet" and w.order is None
    # a stop then ends it, and the job it never took is still there for another worker
    workerctl.send(w.id, "stop")
    assert proc.wait(timeout=LIMIT) == 0
    assert q.state(later.id) == "ready" and the_worker() is None


def test_a_stopped_worker_finishes_its_job_gives_back_the_rest_and_exits(
    start_worker: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    q = get_queue("default")
    first = tasks.sleep.enqueue(1.5, str(ledger), "a")
    rest = [tasks.record.enqueue(str(ledger), i) for i in range(3)]
    # prefetch 4: the worker holds the three others, claimed and not started
    proc = start_worker("--queues", "default", "--prefetch", "4", "--no-scanner", "--grace", "30")
    wait_for(lambda: "start a" in lines(ledger), "the first job started")
    worker = wait_for(the_worker, "the worker registered")
    out = StringIO()
    call_command("zqueue_worker_ctl", "stop", worker.id, stdout=out)
    assert f"stop: worker {worker.id}" in out.getvalue()
    assert proc.wait(timeout=LIMIT) == 0
    output = proc.communicate(timeout=10)[0]
    assert "order=stop" in output
    assert lines(ledger) == ["start a", "done a"]  # finished, and nothing else started
    assert q.state(first.id) is None  # acked
    assert [q.state(j.id) for j in rest] == ["ready"] * 3  # none lost
    assert q.counts() == {"ready": 3, "delayed": 0, "inflight": 0, "dead": 0}
    assert the_worker() is None  # unregistered, its order removed with it
    assert q.engine.workers.orders([q.engine], worker.id) == []


def test_an_unknown_or_stale_worker_is_a_clear_error_and_nothing_is_written(
    project: dict[str, str],
) -> None:
    q = get_queue("default")
    with pytest.raises(InvalidArgument, match="no worker 'nobody' is registered"):
        workerctl.send("nobody", "quiet")
    old = {"threads": 1, "seen": int(time.time() * 1000) - 120_000, "host": "h", "pid": 1}
    q.engine.workers.register([q.engine], "h:1:dead", json.dumps(old))
    with pytest.raises(InvalidArgument, match=r"has not been seen for 1[12][0-9] s"):
        workerctl.send("h:1:dead", "stop")
    with pytest.raises(CommandError, match="heartbeat stopped"):
        call_command("zqueue_worker_ctl", "quiet", "h:1:dead")
    with pytest.raises(CommandError, match="needs a worker id"):
        call_command("zqueue_worker_ctl", "stop")
    with pytest.raises(InvalidArgument, match="no worker order 'pause'"):
        workerctl.send("h:1:dead", "pause")
    assert q.engine.workers.orders([q.engine], "h:1:dead") == []
    out = StringIO()
    call_command("zqueue_worker_ctl", "list", stdout=out)
    assert "h:1:dead  gone (heartbeat stopped)" in out.getvalue()


def test_a_stop_is_never_replaced_by_a_quiet(project: dict[str, str]) -> None:
    e = get_queue("default").engine
    assert e.workers.order("w1", "quiet") and e.workers.orders([e], "w1") == ["quiet"]
    assert e.workers.order("w1", "stop") and e.workers.orders([e], "w1") == ["quiet", "stop"][1:]
    assert not e.workers.order("w1", "quiet")
    assert e.workers.orders([e], "w1") == ["stop"]
    with pytest.raises(ValueError, match="no worker order"):
        e.workers.order("w1", "kill")
    e.workers.forget([(e, "w1")])
    assert e.workers.orders([e], "w1") == []


@pytest.mark.django_db
def test_the_workers_page_quiets_and_stops_after_a_confirmation_and_logs_it(
    start_worker: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    tasks.sleep.enqueue(30.0, str(ledger), "a")
    proc = start_worker("--queues", "default", "--no-scanner", "--grace", "1")
    wait_for(lambda: "start a" in lines(ledger), "the job started")
    worker = wait_for(the_worker, "the worker registered")
    viewer = client_for(make_user("viewer", "view_queue"))
    page = viewer.get(f"{BASE}workers/").content.decode()
    assert "testproject.demo.tasks.sleep" in page and "running" in page
    assert 'value="quiet"' not in page  # no button without manage_jobs
    assert (
        viewer.post(f"{BASE}workers/do/", {"op": "quiet", "worker": worker.id}).status_code == 403
    )
    op = client_for(make_user("op", "view_queue", "manage_jobs"))
    assert 'value="quiet"' in op.get(f"{BASE}workers/").content.decode()
    r = op.post(f"{BASE}workers/do/", {"op": "quiet", "worker": worker.id})
    assert r.status_code == 200  # the confirmation, saying what happens
    assert "will claim no more jobs" in r.content.decode() and "stays idle" in r.content.decode()
    assert the_worker().order is None  # type: ignore[union-attr]  (nothing sent yet)
    r = op.post(f"{BASE}workers/do/", {"op": "quiet", "worker": worker.id, "confirm": "yes"})
    assert r.status_code == 302
    wait_for(lambda: (w := the_worker()) and w.state == "quiet", "the worker said quiet")
    page = op.get(f"{BASE}workers/").content.decode()
    assert ">quiet<" in page and 'value="quiet"' not in page and 'value="stop"' in page
    op.post(f"{BASE}workers/do/", {"op": "stop", "worker": worker.id, "confirm": "yes"})
    assert proc.wait(timeout=LIMIT) == 0
    logged = [
        (e.user.username, e.object_id, e.change_message) for e in LogEntry.objects.order_by("pk")
    ]
    assert logged == [
        ("op", "default", f"quiet: worker {worker.id}, 1 job running"),
        ("op", "default", f"stop: worker {worker.id}, 1 job running"),
    ]
    r = op.post(f"{BASE}workers/do/", {"op": "stop", "worker": worker.id, "confirm": "yes"})
    assert r.status_code == 302 and LogEntry.objects.count() == 2  # gone: refused, not logged


def test_the_workers_reading_has_state_order_task_and_progress(
    project: dict[str, str],
) -> None:
    from django_zqueue.worker.leases import Leases

    q = get_queue("default")
    leases = Leases("web-1:42:ab12", [q], threads=2)
    leases.register()
    # an older worker's entry, without a state: running
    seen = int(time.time() * 1000)
    q.engine.workers.register([q.engine], "old:1:aa", json.dumps({"threads": 1, "seen": seen}))
    q.publish({"task": "app.tasks.report", "args": [1], "kwargs": {}})
    q.publish("not a task's body")
    mine = q.claim(2, consumer="web-1:42:ab12")[0]
    q.touch(mine[0], progress=0.375)
    q.engine.workers.order("web-1:42:ab12", "quiet")
    w = {x.id: x for x in read_workers([q.engine]).workers}
    assert w["old:1:aa"].state == "running" and w["old:1:aa"].order is None
    me = w["web-1:42:ab12"]
    assert (me.state, me.order) == ("running", "quiet")  # ordered, not yet done
    assert sorted((j.task or "", j.progress) for j in me.jobs) == [
        ("", None),
        ("app.tasks.report", 0.375),
    ]
    leases.set_state("quiet")
    leases.register()
    me = next(x for x in read_workers([q.engine]).workers if x.id == "web-1:42:ab12")
    assert (me.state, me.order) == ("quiet", None)  # done: no longer shown as ordered
    q.engine.workers.order("web-1:42:ab12", "stop")
    me = next(x for x in read_workers([q.engine]).workers if x.id == "web-1:42:ab12")
    assert (me.state, me.order) == ("quiet", "stop")
    leases.unregister()
    assert q.engine.workers.orders([q.engine], "web-1:42:ab12") == []


def test_a_quiet_order_stops_the_claims_of_the_event_loop_lane_too(
    project: dict[str, str],
) -> None:
    import threading

    from django_zqueue.worker import Worker
    from testproject.demo import async_tasks

    q = get_queue("default")
    first = async_tasks.asleep.enqueue(1.0)
    w = Worker(["default"], async_concurrency=4, scanner=False)
    runner = threading.Thread(target=w.run, daemon=True)
    runner.start()
    try:
        wait_for(lambda: q.counts()["inflight"] == 1, "the async job started")
        wait_for(the_worker, "the worker registered")
        workerctl.send(w.id, "quiet")
        wait_for(lambda: (x := the_worker()) and x.state == "quiet", "the worker said quiet")
        later = async_tasks.anoop.enqueue()  # the lane has 3 free slots: it would claim it
        wait_for(lambda: q.state(first.id) is None, "the running job finished")
        time.sleep(1.5)  # more than the lane's waits: a claim would have happened by now
        assert q.state(later.id) == "ready"
        assert q.counts() == {"ready": 1, "delayed": 0, "inflight": 0, "dead": 0}
        assert runner.is_alive()  # quiet: idle, not gone
    finally:
        w.stop()
        runner.join(LIMIT)
    assert not runner.is_alive() and w.processed == 1
