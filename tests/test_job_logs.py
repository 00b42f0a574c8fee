"""Job logs: what a job says while it runs (``current_job().log`` and, with
``ZQUEUE["JOB_LOGS"]["LEVEL"]``, the ``logging`` records of its runs), kept per attempt
in the queue's ``logs`` hash (a bounded field per job), read by ``queue.read.log(tag)``
and shown on the admin's job page."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import override_settings

from django_zqueue import conf, current_job, get_queue, task
from django_zqueue.conf.joblogs import parse_job_logs
from django_zqueue.engine.joblogs import cut
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue
from django_zqueue.tasks import joblog, registry
from django_zqueue.worker import Worker

from .test_admin import job_url, superuser  # noqa: F401

log = logging.getLogger("tests.joblogs")
log.setLevel(logging.INFO)  # the records a logger lets through are the ones captured
NO_WAIT = {"base": 0.0, "max": 0.0, "jitter": 0.0}
seen_handler: list[bool] = []


@task(name="tests.joblogs.twice", max_retries=1, retry_backoff=NO_WAIT)
def twice() -> None:
    ctx = current_job()
    assert ctx is not None
    n = ctx.attempt
    log.info("start of attempt %d", n)
    ctx.log(f"explicit line of attempt {n}")
    log.warning("end of attempt %d", n)
    log.debug("below the level: not kept")
    if n == 1:
        raise RuntimeError("first attempt fails")


@task(name="tests.joblogs.huge")
def huge() -> None:
    ctx = current_job()
    assert ctx is not None
    ctx.log("x" * 10_000_000)


@task(name="tests.joblogs.quiet")
def quiet() -> None:
    seen_handler.append(joblog.installed())
    log.warning("not captured: no level set")
    ctx = current_job()
    assert ctx is not None
    ctx.log("explicit")


@pytest.fixture
def logs_on(zqueue_settings: dict[str, Any]) -> Iterator[dict[str, Any]]:
    value = {**zqueue_settings, "JOB_LOGS": {"LEVEL": "INFO"}, "ENQUEUE_ON_COMMIT": False}
    with override_settings(ZQUEUE=value):
        yield value
    conf.reset()


def lines_of(attempt: int, texts: list[str]) -> list[tuple[int, int, str, str]]:
    """``joblogs.append``'s lines: each text said by ``attempt`` at INFO, at ms 1000+i."""
    return [(attempt, 1000 + i, "INFO", t) for i, t in enumerate(texts)]


def _run() -> None:
    Worker(["default"], burst=True, scan_interval=0.05).run()


def test_three_lines_on_each_of_two_attempts_read_in_order(logs_on: dict[str, Any]) -> None:
    job = twice.enqueue()
    _run()
    q = get_queue("default")
    info = q.info(job.id)
    assert info is not None and info.state == "succeeded"
    got = q.read.log(job.id)
    assert got.dropped == 0
    by = got.by_attempt()
    assert list(by) == [1, 2]
    for n in (1, 2):
        assert [(x.level, x.text) for x in by[n]] == [
            ("INFO", f"start of attempt {n}"),
            ("INFO", f"explicit line of attempt {n}"),
            ("WARNING", f"end of attempt {n}"),
        ]
    assert [x.attempt for x in got.lines] == [1, 1, 1, 2, 2, 2]
    assert not joblog.installed()  # the worker took its handler away when it stopped


@pytest.mark.django_db
def test_the_admin_job_page_shows_both_attempts_in_order(
    logs_on: dict[str, Any],
    superuser: Any,  # noqa: F811
) -> None:
    job = twice.enqueue()
    _run()
    page = superuser.get(job_url(job.id)).content.decode()
    assert 'id="zq-log"' in page
    one, two = page.index('data-attempt="1"'), page.index('data-attempt="2"')
    assert one < two
    order = [
        "start of attempt 1",
        "explicit line of attempt 1",
        "end of attempt 1",
        "start of attempt 2",
        "explicit line of attempt 2",
        "end of attempt 2",
    ]
    places = [page.index(line) for line in order]
    assert places == sorted(places) and places[0] > one and places[3] > two


@pytest.mark.django_db
def test_the_admin_hides_the_log_without_the_payload_permission(
    logs_on: dict[str, Any],
) -> None:
    from .test_admin import client_for, make_user

    job = twice.enqueue()
    _run()
    viewer = client_for(make_user("viewer", "view_queue"))
    page = viewer.get(job_url(job.id)).content.decode()
    assert 'id="zq-log"' in page and "explicit line" not in page


def test_a_10_mb_line_is_cut_at_the_cap_with_a_marker(
    logs_on: dict[str, Any], redis_client: redis.Redis
) -> None:
    job = huge.enqueue()
    _run()
    (line,) = get_queue("default").read.log(job.id).lines
    assert line.text.startswith("x" * 2000)
    assert line.text.endswith(f"… [line cut: {10_000_000 - 2000:,} more bytes]")
    assert len(line.text.encode()) < 2100


def test_10_mb_of_lines_keeps_the_newest_within_the_cap(
    q: Queue, redis_client: redis.Redis
) -> None:
    lines = lines_of(1, [f"{i:06d} " + "y" * 993 for i in range(10_000)])  # 10 MB
    for start in range(0, 10_000, 1000):
        q.engine.joblogs.append(
            "big", lines[start : start + 1000], max_lines=1000, max_line_bytes=2000
        )
    got = q.read.log("big")
    assert got.dropped == 9000
    assert [x.text[:6] for x in got.lines] == [f"{i:06d}" for i in range(9000, 10_000)]
    used = redis_client.memory_usage(q.engine._keys.logs) or 0
    assert 0 < used < 2_000_000  # about 1 MB kept of 10 MB written
    assert not list(redis_client.scan_iter(match=f"{{{q.engine.prefix}:q}}:log:*"))


def test_capture_off_installs_no_handler_and_keeps_explicit_lines(
    zqueue_settings: dict[str, Any],
) -> None:
    seen_handler.clear()
    job = quiet.enqueue()
    _run()
    assert seen_handler == [False]
    got = get_queue("default").read.log(job.id)
    assert [(x.attempt, x.text) for x in got.lines] == [(1, "explicit")]


def test_bad_input_raises_and_writes_nothing(q: Queue, redis_client: redis.Redis) -> None:
    msg_tag = q.publish("x")
    msg = q.get()
    assert msg is not None and msg.tag == msg_tag
    from django_zqueue.tasks.context import JobContext

    ctx = JobContext(msg, q, "t")
    for bad in (b"bytes", None, 3):
        with pytest.raises(InvalidArgument):
            ctx.log(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        ctx.log("x", level="")
    assert q.read.log(msg_tag).lines == ()
    with pytest.raises(InvalidArgument):
        q.read.log("")


def test_a_corrupt_log_key_reads_as_no_log(q: Queue, redis_client: redis.Redis) -> None:
    redis_client.set(f"{{{q.engine.prefix}:q}}:log:bad", "not a stream")
    assert q.read.log("bad").lines == ()
    redis_client.xadd(f"{{{q.engine.prefix}:q}}:log:odd", {"zz": "1"})
    assert q.read.log("odd").lines == ()  # an entry not written here is left out


def test_the_setting_is_checked() -> None:
    found: list[str] = []

    def add(id: str, msg: str, hint: str) -> None:
        found.append(msg)

    o = parse_job_logs({"LEVEL": "info", "MAX_LINES": 5, "MAX_LINE_BYTES": 100}, add)
    assert (o.level, o.max_lines, o.max_line_bytes, found) == (logging.INFO, 5, 100, [])
    assert parse_job_logs(None, add).level is None
    for bad in ("INFO", {"LEVEL": "LOUD"}, {"MAX_LINES": 0}, {"MAX_LINE_BYTES": True}, {"X": 1}):
        found.clear()
        parse_job_logs(bad, add)
        assert found, bad
    _, problems = conf.parse({"JOB_LOGS": {"MAX_LINES": -1}})
    assert [p.id for p in problems] == ["django_zqueue.E030"]


def test_cut_keeps_whole_characters() -> None:
    assert cut("short", 100) == "short"
    out = cut("é" * 100, 101)  # 200 bytes; 101 would split a character
    assert out.startswith("é" * 50 + " … [line cut: 100 more bytes]")


def test_tasks_registered_here_are_known() -> None:
    assert registry.get("tests.joblogs.twice") is not None


@task(name="tests.joblogs.async_lines")
async def async_lines() -> None:
    ctx = current_job()
    assert ctx is not None
    await ctx.alog("from a coroutine")
    log.info("captured in a coroutine")


def test_an_async_task_logs_too(logs_on: dict[str, Any]) -> None:
    job = async_lines.enqueue()
    Worker(["default"], burst=True, scan_interval=0.05, async_concurrency=4).run()
    got = get_queue("default").read.log(job.id)
    assert [(x.attempt, x.text) for x in got.lines] == [
        (1, "from a coroutine"),
        (1, "captured in a coroutine"),
    ]


@task(name="tests.joblogs.isolated", isolation="process")
def isolated() -> None:
    ctx = current_job()
    assert ctx is not None
    ctx.log("from the child")
    log.info("captured in the child")


def test_a_process_isolated_task_logs_too(logs_on: dict[str, Any]) -> None:
    job = isolated.enqueue()
    _run()
    q = get_queue("default")
    info = q.info(job.id)
    assert info is not None and info.state == "succeeded", info
    got = q.read.log(job.id)
    assert [x.text for x in got.lines] == ["from the child", "captured in the child"]


@pytest.mark.django_db
def test_the_admin_says_how_many_lines_were_dropped(
    logs_on: dict[str, Any],
    superuser: Any,  # noqa: F811
) -> None:
    q = get_queue("default")
    tag = q.publish({"task": "tests.joblogs.quiet", "args": [], "kwargs": {}})
    lines = [f"{i:06d} " + "y" * 993 for i in range(10_000)]  # 10 MB
    for start in range(0, 10_000, 1000):
        q.engine.joblogs.append(
            tag, lines_of(1, lines[start : start + 1000]), max_lines=1000, max_line_bytes=2000
        )
    page = superuser.get(job_url(tag)).content.decode()
    assert "9,000 earlier lines dropped (past the cap)." in page
    assert "009000 " in page and "008999 " not in page and "009999 " in page


def test_zqueue_job_prints_the_log_by_attempt(logs_on: dict[str, Any]) -> None:
    from io import StringIO

    from django.core.management import call_command

    job = twice.enqueue()
    _run()
    out = StringIO()
    call_command("zqueue_job", "default", job.id, "--log", stdout=out)
    text = out.getvalue()
    one, two = text.index("log of attempt 1:"), text.index("log of attempt 2:")
    assert one < text.index("INFO explicit line of attempt 1") < two
    assert two < text.index("WARNING end of attempt 2")
    plain = StringIO()
    call_command("zqueue_job", "default", job.id, stdout=plain)
    assert "log of attempt" not in plain.getvalue()


@task(name="tests.joblogs.silent")
def silent() -> None:
    log.debug("below the level: not kept")


@task(name="tests.joblogs.burst")
def burst() -> None:
    for i in range(250):
        log.info("burst %03d", i)


def test_a_job_that_says_nothing_writes_no_log(
    logs_on: dict[str, Any], redis_client: redis.Redis
) -> None:
    job = silent.enqueue()
    _run()
    q = get_queue("default")
    info = q.info(job.id)
    assert info is not None and info.state == "succeeded"
    assert not redis_client.exists(q.engine._keys.logs)


def test_a_burst_of_lines_is_written_in_batches_all_kept_in_order(
    logs_on: dict[str, Any],
) -> None:
    job = burst.enqueue()
    _run()
    got = get_queue("default").read.log(job.id)
    assert [x.text for x in got.lines] == [f"burst {i:03d}" for i in range(250)]


def test_a_log_that_cannot_be_written_never_fails_the_job(
    logs_on: dict[str, Any], redis_client: redis.Redis
) -> None:
    q = get_queue("default")
    redis_client.set(q.engine._keys.logs, "not a hash")
    job = burst.enqueue()
    _run()
    info = q.info(job.id)
    assert info is not None and info.state == "succeeded"
    assert redis_client.get(q.engine._keys.logs) == b"not a hash"
