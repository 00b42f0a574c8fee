"""Periodic schedules: exactly once per tick with several scanners, DST, catch-up."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from django_zqueue import InvalidArgument, get_queue
from django_zqueue.engine import schedstore
from django_zqueue.tasks.schedules import Schedule, Scheduler, from_settings
from django_zqueue.worker import Worker

MIN = 60_000
T0 = int(datetime(2026, 1, 5, 0, 0, tzinfo=UTC).timestamp() * 1000)  # a Monday, 00:00 UTC


def fired(queue: str = "default") -> Counter[tuple[str, int]]:
    """(schedule, tick) pairs that produced a job, from the jobs' tags cron:<name>:<tick>."""
    q = get_queue(queue)
    tags = [t.decode() for t in q.engine._client.zrange(q.engine._keys.ready, 0, -1)]
    tags += [t.decode() for t in q.engine._client.zrange(q.engine._keys.delayed, 0, -1)]
    pairs = (t.split(":", 1)[1].rsplit(":", 1) for t in tags if t.startswith("cron:"))
    return Counter((name, int(tick)) for name, tick in pairs)


def fired_ticks(queue: str = "default") -> Counter[int]:
    return Counter(tick for _name, tick in fired(queue).elements())


def sched(**kw: Any) -> Schedule:
    base: dict[str, Any] = {"name": "s", "task": "testproject.demo.tasks.noop", "timezone": "UTC"}
    return Schedule(**{**base, **kw})


def test_schedule_validation() -> None:
    for bad in (
        {"cron": "61 * * * *"},
        {},
        {"cron": "* * * * *", "interval": 5},
        {"interval": 0},
        {"cron": "* * * * *", "catch_up": "some"},
        {"cron": "* * * * *", "timezone": "Mars/Olympus"},
    ):
        with pytest.raises(InvalidArgument):
            sched(**bad)


@pytest.mark.slow
def test_three_scanners_fire_each_tick_exactly_once(project: dict[str, str]) -> None:
    """3 scanners race through 6 simulated hours, each on its own (shared) clock."""
    schedules = {
        "every5": sched(name="every5", cron="*/5 * * * *"),
        "every7s": sched(name="every7s", interval=420),  # 7 minutes
    }
    setup = Scheduler(["default"], schedules, now_ms=lambda: T0)
    setup.sync()
    steps = [T0 + i * 20_000 for i in range(6 * 180 + 1)]  # every 20 s for 6 h
    errors: list[BaseException] = []

    def scanner() -> None:
        try:
            clock = {"now": T0}
            s = Scheduler(["default"], schedules, now_ms=lambda: clock["now"])
            for now in steps:
                clock["now"] = now
                s.step()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=scanner) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    got = fired()
    end = steps[-1]
    expected = {
        (name, tick) for name, s in schedules.items() for tick in s.ticks(s.first_tick(T0), end)
    }
    assert len(expected) == 72 + 51  # every 5 min and every 7 min for 6 h
    assert set(got) == expected
    assert max(got.values()) == 1  # exactly once, though 3 scanners saw every tick


def test_dst_gap_and_overlap() -> None:
    paris = ZoneInfo("Europe/Paris")
    s = sched(cron="30 2 * * *", timezone="Europe/Paris")
    start = int(datetime(2026, 3, 27, tzinfo=paris).timestamp() * 1000)
    end = int(datetime(2026, 3, 31, tzinfo=paris).timestamp() * 1000)
    days = [datetime.fromtimestamp(t / 1000, tz=paris) for t in s.ticks(s.first_tick(start), end)]
    # 29 March 2026: 02:00 -> 03:00, so 02:30 does not exist that day: it fires once,
    # at 03:00, the first valid time after the gap (croniter's rule)
    assert [(d.day, d.hour, d.minute) for d in days] == [
        (27, 2, 30),
        (28, 2, 30),
        (29, 3, 0),
        (30, 2, 30),
    ]
    start = int(datetime(2026, 10, 24, tzinfo=paris).timestamp() * 1000)
    end = int(datetime(2026, 10, 27, tzinfo=paris).timestamp() * 1000)
    ticks = list(s.ticks(s.first_tick(start), end))
    days = [datetime.fromtimestamp(t / 1000, tz=paris) for t in ticks]
    # 25 October 2026: 03:00 -> 02:00, so 02:30 happens twice: it fires once
    assert [d.day for d in days] == [24, 25, 26]
    assert len(set(ticks)) == len(ticks)


def test_dst_gap_hourly_keeps_real_hours() -> None:
    s = sched(cron="0 * * * *", timezone="Europe/Paris")
    start = int(datetime(2026, 3, 29, 0, 0, tzinfo=UTC).timestamp() * 1000)
    ticks = list(s.ticks(s.first_tick(start - 1), start + 4 * 3600_000))
    gaps = {b - a for a, b in itertools.pairwise(ticks)}
    assert gaps == {3600_000}  # one hour apart in real time across the jump


@pytest.mark.parametrize(
    ("policy", "expected_jobs"), [("last", 1), ("none", 0), ("all", 10), ("all-capped", 4)]
)
def test_catch_up_after_an_outage(project: dict[str, str], policy: str, expected_jobs: int) -> None:
    kw: dict[str, Any] = {"interval": 60, "catch_up": policy.split("-")[0]}
    if policy == "all-capped":
        kw["max_catch_up"] = 4
    schedules = {"s": sched(**kw)}
    clock = {"now": T0}
    s = Scheduler(["default"], schedules, now_ms=lambda: clock["now"])
    s.sync()  # first tick at T0 + 1 min
    clock["now"] = T0 + 10 * MIN + 30_000  # an outage: ticks 1..10 were missed
    for _ in range(20):
        s.step()
    fired = fired_ticks()
    assert sum(fired.values()) == expected_jobs
    if policy == "last":
        assert set(fired) == {T0 + 10 * MIN}
    if policy == "all-capped":
        assert set(fired) == {T0 + m * MIN for m in (7, 8, 9, 10)}  # the most recent 4
    q = get_queue("default")
    nxt = q.engine._client.zscore(q.engine._keys.sched, "s")
    assert nxt == T0 + 11 * MIN  # on schedule again


def test_none_policy_fires_a_tick_within_grace(project: dict[str, str]) -> None:
    clock = {"now": T0}
    s = Scheduler(
        ["default"],
        {"s": sched(interval=60, catch_up="none", grace=30)},
        now_ms=lambda: clock["now"],
    )
    s.sync()
    clock["now"] = T0 + MIN + 10_000  # 10 s late: within grace
    assert s.step() == 1


def test_sync_removes_and_changes(project: dict[str, str]) -> None:
    q = get_queue("default")
    a, b = sched(name="a", interval=60), sched(name="b", interval=60)
    s = Scheduler(["default"], {"a": a, "b": b}, now_ms=lambda: T0)
    assert s.sync() == {"added": 2, "changed": 0, "removed": 0}
    assert s.sync() == {"added": 0, "changed": 0, "removed": 0}
    s2 = Scheduler(["default"], {"a": sched(name="a", interval=120)}, now_ms=lambda: T0)
    assert s2.sync() == {"added": 0, "changed": 1, "removed": 1}
    assert q.engine._client.hexists(q.engine._keys.sched_defs, "b") == 0
    assert q.engine._client.zscore(q.engine._keys.sched, "b") is None
    assert q.engine._client.zscore(q.engine._keys.sched, "a") == T0 + 2 * MIN


def test_pause_resume_and_listing(project: dict[str, str]) -> None:
    clock = {"now": T0}
    s = Scheduler(["default"], {"a": sched(name="a", interval=60)}, now_ms=lambda: clock["now"])
    s.sync()
    assert s.pause("a") and not s.pause("nope")
    clock["now"] = T0 + 5 * MIN
    assert s.step() == 0
    assert s.listing()[0]["paused"] is True
    s.sync()  # a paused schedule stays paused across syncs
    assert s.listing()[0]["paused"] is True
    assert s.resume("a")
    clock["now"] = T0 + 6 * MIN
    assert s.step() == 1
    row = s.listing()[0]
    assert row["last_ms"] == T0 + 6 * MIN and row["last_job"] == f"cron:a:{T0 + 6 * MIN}"
    assert row["last_job_state"] == "ready" and row["next_ms"] == T0 + 7 * MIN


def test_fire_script_compare_and_set(project: dict[str, str]) -> None:
    q = get_queue("default")
    s = Scheduler(["default"], {"a": sched(name="a", interval=60)}, now_ms=lambda: T0)
    s.sync()
    job = q.prepare({"task": "x"}, "cron:a:1", 0)
    assert schedstore.fire(q, "a", T0 + 1, T0 + 2 * MIN, job) is False  # wrong tick
    assert q.total_count() == 0
    assert schedstore.fire(q, "a", T0 + MIN, T0 + 2 * MIN, job) is True
    assert schedstore.fire(q, "a", T0 + MIN, T0 + 2 * MIN, job) is False  # repeat
    assert q.total_count() == 1


def test_settings_schedules_and_task_cron(project: dict[str, str]) -> None:
    from django_zqueue.tasks.schedules import all_schedules

    found = from_settings({"n": {"task": "t", "cron": "0 3 * * *", "args": [1]}})
    assert found[0].args == (1,) and found[0].cron == "0 3 * * *"
    everything = all_schedules()
    assert "testproject.demo.tasks.heartbeat" in everything  # @task(cron=...)
    assert everything["testproject.demo.tasks.heartbeat"].cron == "*/10 * * * *"


def test_worker_fires_due_schedule_and_runs_it(project: dict[str, str]) -> None:
    w = Worker(["default"], burst=True, scan_interval=0.05)
    q = get_queue("default")
    # the worker syncs the declared schedules at start; make heartbeat due first
    Scheduler(["default"]).sync()
    q.engine._client.zadd(q.engine._keys.sched, {"testproject.demo.tasks.heartbeat": 1000})
    w.run()
    assert w.processed == 1
    assert (
        q.engine._client.hget(q.engine._keys.sched_last, "testproject.demo.tasks.heartbeat")
        is not None
    )


def test_dst_overlap_hourly_keeps_real_hours() -> None:
    s = sched(cron="0 * * * *", timezone="Europe/Paris")
    start = int(datetime(2026, 10, 24, 23, 0, tzinfo=UTC).timestamp() * 1000)
    ticks = list(s.ticks(s.first_tick(start - 1), start + 5 * 3600_000))
    gaps = {b - a for a, b in itertools.pairwise(ticks)}
    assert gaps == {3600_000}  # 02:00 CEST and 02:00 CET both run: they are an hour apart


def test_dst_overlap_fixed_hour_every_15_minutes_runs_once() -> None:
    paris = ZoneInfo("Europe/Paris")
    s = sched(cron="*/15 2 * * *", timezone="Europe/Paris")
    start = int(datetime(2026, 10, 25, 0, 0, tzinfo=paris).timestamp() * 1000)
    ticks = list(s.ticks(s.first_tick(start), start + 6 * 3600_000))
    assert len(ticks) == 4  # 02:00, 02:15, 02:30, 02:45 once, not again after 03:00 -> 02:00


def test_last_policy_after_a_very_long_outage_fires_one_job(project: dict[str, str]) -> None:
    clock = {"now": T0}
    s = Scheduler(["default"], {"s": sched(interval=60)}, now_ms=lambda: clock["now"])
    s.sync()
    clock["now"] = T0 + 30 * 24 * 60 * MIN  # 30 days = 43,200 missed ticks
    for _ in range(5):
        s.step()
    assert sum(fired_ticks().values()) == 1
    assert s.listing()[0]["last_ms"] == clock["now"]  # the tick that fired, not the stale one


@pytest.mark.parametrize(
    "entry",
    [
        {"task": "t", "cron": "not a cron"},
        {"task": "t", "cron": "* * * * *", "colour": "red"},
        {"task": "t", "interval": 60, "queue": "nope"},
        {"task": "no.such.task", "interval": 60},  # not a registered @task
    ],
)
def test_bad_settings_schedules_fail_the_check(entry: dict[str, Any]) -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError
    from django.test import override_settings

    queues = {"default": {}, "emails": {}, "reports": {}}
    with override_settings(ZQUEUE={"QUEUES": queues, "SCHEDULES": {"bad": entry}}):
        with pytest.raises(SystemCheckError, match=r"django_zqueue\.E013"):
            call_command("check")


@pytest.mark.parametrize("bad", [{"priority": 5000}, {"args": ({1, 2},)}, {"priority": True}])
def test_schedule_rejects_bad_priority_and_arguments(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        sched(interval=60, **bad)


def test_periodic_declares_a_schedule_above_task(project: dict[str, str]) -> None:
    from django_zqueue import schedules, task
    from django_zqueue.exceptions import ConfigurationError
    from django_zqueue.periodic import periodic
    from django_zqueue.tasks.schedules import spec as schedule_spec

    def every_minute() -> None: ...

    every_minute.__module__ = "tests.periodic_probe"  # a name of its own in the registry
    declared = dict(schedule_spec._declared)
    try:
        t = periodic(interval=60, name="probe-every-minute", args=(1,))(task(every_minute))
        s = schedules.all_schedules()["probe-every-minute"]
        assert (s.task, s.interval, s.args, s.queue) == (t.name, 60, (1,), t.queue_name)
        with pytest.raises(ConfigurationError, match="above @task"):
            periodic(interval=60)(every_minute)  # type: ignore[arg-type]
    finally:
        schedule_spec._declared.clear()
        schedule_spec._declared.update(declared)
