"""The autoscaling signal (django_zqueue/read/scale.py): ``zqueue_scale``, the scale view
KEDA reads, the ``zqueue_scale_*`` gauges. Real Redis; the figures are checked against
``Queue.counts()`` and against what was put in."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import RequestFactory, override_settings

from django_zqueue import chain, conf, get_queue, task
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.read.scale import DEFAULT_RUN_SECONDS, scale_document, scale_signals
from django_zqueue.web.scale import scale_view

TOKEN = "s3cret-token-for-keda"


@pytest.fixture(autouse=True)
def _queues(zqueue_settings: dict[str, Any]) -> Iterator[None]:
    queues = {"default": {}, "other": {}, "parts": {"partitions": 4}}
    with override_settings(ZQUEUE={**zqueue_settings, "QUEUES": queues}):
        conf.reset()
        yield
    conf.reset()


@task
def step(x: int = 0) -> int:
    return x


def engines(*names: str) -> list[Any]:
    return [get_queue(n).engine for n in names]


def test_ready_is_what_a_worker_could_claim_now_and_matches_the_counts() -> None:
    q = get_queue("default")
    for i in range(7):
        q.publish({"i": i})
    for i in range(3):
        q.publish({"later": i}, delay=600)  # delayed (as a parked durable job is)
    chain(step.s(), step.s(), step.s()).enqueue()  # 1 ready, 2 waiting for parents
    held = q.get()  # one in flight
    assert held is not None
    (s,) = scale_signals(engines("default"))
    counts = q.counts()
    assert counts == {"ready": 7, "delayed": 3, "inflight": 1, "dead": 0}
    assert q.read.waiting_count() == 2
    assert (s.ready, s.in_line, s.inflight, s.paused) == (counts["ready"], 7, 1, False)
    assert s.lag_seconds >= 0
    q.pause()
    (s,) = scale_signals(engines("default"))
    assert (s.ready, s.in_line, s.paused) == (0, 7, True)  # nothing claimable while paused
    assert s.desired_threads == 1  # the job in flight still holds a thread
    q.resume()
    (s,) = scale_signals(engines("default"))
    assert s.ready == q.counts()["ready"] == 7


def test_desired_threads_grow_with_the_backlog_and_shrink_with_the_target() -> None:
    q = get_queue("other")
    (empty,) = scale_signals(engines("other"))
    assert (empty.ready, empty.desired_threads, empty.desired_workers) == (0, 0, 0)
    seen = []
    for batch in (10, 90, 500):
        q.publish_many([{"n": i} for i in range(batch)])
        (s,) = scale_signals(engines("other"), target_seconds=60)
        assert s.mean_run_seconds is None  # nothing acked yet: the default is used
        assert s.desired_threads == math.ceil(s.ready * DEFAULT_RUN_SECONDS / 60)
        seen.append(s.desired_threads)
    assert seen == sorted(seen) and seen[0] < seen[-1]  # 1, 2, 10
    (fast,) = scale_signals(engines("other"), target_seconds=600)
    assert fast.desired_threads < seen[-1]
    (per,) = scale_signals(engines("other"), target_seconds=60, threads_per_worker=4)
    assert per.desired_workers == math.ceil(seen[-1] / 4)


def test_completions_count_in_the_rate_and_the_mean_run_time() -> None:
    q = get_queue("other")
    q.publish_many([{"n": i} for i in range(5)])
    for _ in range(3):
        msg = q.get()
        assert msg is not None and q.ack(msg)
    (s,) = scale_signals(engines("other"))
    assert s.completed_per_second > 0
    assert s.ready == 2 and s.inflight == 0


def test_a_partitioned_queue_is_summed_over_its_partitions() -> None:
    q = get_queue("parts")
    q.publish_many([{"n": i} for i in range(40)])
    q.publish({"later": 1}, delay=600)
    for _ in range(3):
        assert q.get() is not None
    (s,) = scale_signals(engines("parts"))
    counts = q.counts()
    assert (s.ready, s.inflight) == (counts["ready"], counts["inflight"]) == (37, 3)
    doc = scale_document(engines("default", "parts"))
    assert doc["total"]["ready"] == 37 and doc["total"]["inflight"] == 3


@pytest.mark.parametrize(
    ("target", "per_worker"),
    [(0, 1), (-5, 1), (float("nan"), 1), (float("inf"), 1), (True, 1), (60, 0), (60, 1.5)],
)
def test_bad_arguments_are_refused(target: Any, per_worker: Any) -> None:
    with pytest.raises(InvalidArgument):
        scale_signals(engines("default"), target, per_worker)


def test_the_command_prints_a_table_and_the_json_document() -> None:
    get_queue("default").publish_many([{"n": i} for i in range(120)])
    out = io.StringIO()
    call_command("zqueue_scale", "--json", "--target-seconds", "30", stdout=out)
    doc = json.loads(out.getvalue())
    assert doc["target_seconds"] == 30 and doc["threads_per_worker"] == 1
    assert set(doc["queues"]) == {"default", "other", "parts"}
    assert doc["queues"]["default"]["ready"] == 120
    assert doc["queues"]["default"]["desired_threads"] == 4
    assert doc["total"]["desired_workers"] == 4
    out = io.StringIO()
    call_command(
        "zqueue_scale",
        *("--queues", "default", "--threads-per-worker", "3", "--target-seconds", "30"),
        stdout=out,
    )
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["queue", "ready", "inflight"]
    assert lines[1].split()[0] == "default" and lines[1].split()[1] == "120"
    assert lines[-1].split()[-1] == "2"  # total: 4 threads over 3 a worker
    with pytest.raises(CommandError, match="unknown queue"):
        call_command("zqueue_scale", "--queues", "nope")
    with pytest.raises(CommandError):
        call_command("zqueue_scale", "--target-seconds", "0")


@pytest.mark.django_db
def test_the_view_lets_in_a_bearer_token_or_the_permission_only() -> None:
    get_queue("default").publish_many([{"n": i} for i in range(61)])
    view = scale_view(token=TOKEN)
    rf = RequestFactory()

    def call(query: str = "", auth: str | None = None, user: Any = None) -> Any:
        headers = {"Authorization": auth} if auth else {}
        request = rf.get(f"/scale/{query}", headers=headers)
        if user is not None:
            request.user = user
        return view(request)

    assert call().status_code == 403
    assert call(auth="Bearer wrong-token-of-length").status_code == 403
    assert call(auth=TOKEN).status_code == 403  # without the scheme
    ok = call(auth=f"Bearer {TOKEN}")
    assert ok.status_code == 200 and ok["Cache-Control"].startswith("max-age=0")
    doc = json.loads(ok.content)
    assert doc["queues"]["default"]["ready"] == 61
    assert doc["queues"]["default"]["desired_threads"] == 2
    got = json.loads(call("?queues=default&target_seconds=10", f"Bearer {TOKEN}").content)
    assert list(got["queues"]) == ["default"] and got["total"]["desired_threads"] == 7
    for bad in (
        "?queues=nope",
        "?target_seconds=abc",
        "?target_seconds=0",
        "?threads_per_worker=0",
        "?queues=,",
    ):
        answer = call(bad, f"Bearer {TOKEN}")
        assert answer.status_code == 400, bad
        assert json.loads(answer.content)["error"]
    plain = User.objects.create_user("plain", password="x")
    assert call(user=plain).status_code == 403
    viewer = User.objects.create_user("viewer", password="x")
    viewer.user_permissions.add(Permission.objects.get(codename="view_queue"))
    viewer = User.objects.get(pk=viewer.pk)  # the permission cache
    assert call(user=viewer).status_code == 200
    post = rf.post("/scale/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert view(post).status_code == 405


def test_the_view_refuses_to_be_made_open_or_with_a_short_token() -> None:
    with pytest.raises(ValueError, match="16 characters"):
        scale_view(token="short")
    with pytest.raises(ValueError, match="token, a permission"):
        scale_view(token=None, permission=None)


def test_the_gauges_are_in_the_metrics() -> None:
    pytest.importorskip("prometheus_client")
    from django_zqueue.ops.metrics import exposition

    get_queue("default").publish_many([{"n": i} for i in range(5)])
    get_queue("other").pause()
    text = exposition().decode()
    assert 'zqueue_scale_ready{queue="default"} 5.0' in text
    assert 'zqueue_scale_ready{queue="other"} 0.0' in text
    assert 'zqueue_scale_desired_threads{queue="default"} 1.0' in text
    assert 'zqueue_scale_completed_per_second{queue="default"}' in text


def test_redis_down_is_one_line_for_the_command_and_a_503_for_the_view(
    zqueue_settings: dict[str, Any],
) -> None:
    from django_zqueue.engine.redis.embedded import free_port

    down = {
        **zqueue_settings,
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "SOCKET_CONNECT_TIMEOUT": 0.5,
    }
    with override_settings(ZQUEUE=down):
        conf.reset()
        try:
            with pytest.raises(CommandError, match="cannot reach Redis"):
                call_command("zqueue_scale", "--json")
            request = RequestFactory().get("/scale/", headers={"Authorization": f"Bearer {TOKEN}"})
            answer = scale_view(token=TOKEN)(request)
            assert answer.status_code == 503
            assert json.loads(answer.content)["error"].startswith("redis unreachable")
        finally:
            conf.reset()
