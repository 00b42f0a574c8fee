"""Schedules managed at run time (``schedules.add`` and the rest), on real Redis: the API,
its checks (nothing written on bad input), edits racing with scanners, code vs runtime."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis

from django_zqueue import InvalidArgument, get_queue, schedules
from django_zqueue.engine import schedstore
from django_zqueue.tasks.schedules import Schedule, Scheduler
from django_zqueue.tasks.schedules import spec as schedule_spec

from .conftest import snapshot

RECORD = "testproject.demo.tasks.record"  # record(ledger, value)
NOOP = "testproject.demo.tasks.noop"
HEARTBEAT = "testproject.demo.tasks.heartbeat"  # @task(cron="*/10 * * * *")

pytestmark = pytest.mark.usefixtures("project")


def jobs(queue: str = "default") -> list[dict[str, Any]]:
    """The bodies of the jobs waiting in ``queue``, oldest first."""
    q = get_queue(queue)
    tags = [t.decode() for t in q.engine._client.zrange(q.engine._keys.ready, 0, -1)]
    out = []
    for tag in tags:
        info = q.info(tag)
        assert info is not None
        out.append({"tag": tag, **info.body})
    return out


def fired_ticks(name: str, queue: str = "default") -> Counter[int]:
    return Counter(
        int(j["tag"].rsplit(":", 1)[1]) for j in jobs(queue) if j["tag"].startswith(f"cron:{name}:")
    )


def stored(name: str, queue: str = "default") -> schedstore.Stored:
    found = schedstore.stored(get_queue(queue), [name])
    assert found, f"{name} is not stored"
    return found[0]


def fire_at(now: int, names: Any = None) -> int:
    """One scanner step with the clock at ``now`` (code schedules: none unless named)."""
    return Scheduler(["default"], names or {}, now_ms=lambda: now).step()


# ------------------------------------------------------------------ the API


def test_add_lists_fires_and_removes_a_runtime_schedule() -> None:
    entry = schedules.add("tidy", RECORD, every=60, args=["ledger"], kwargs={"value": 1})
    assert (entry.source, entry.paused, entry.every, entry.cron) == ("runtime", False, 60.0, None)
    assert entry.next_at is not None and entry.last_at is None
    assert (entry.queue, entry.task, entry.args, entry.kwargs) == (
        "default",
        RECORD,
        ("ledger",),
        {"value": 1},
    )
    assert [e.name for e in schedules.entries() if e.source == "runtime"] == ["tidy"]
    tick = stored("tidy").next_ms
    assert tick is not None
    assert fire_at(tick) == 1  # a scanner with no code schedule fires it
    assert fired_ticks("tidy") == Counter({tick: 1})
    assert jobs()[0]["schedule"] == "tidy"
    after = schedules.get("tidy")
    assert after.last_at is not None and after.last_job == f"cron:tidy:{tick}"
    assert stored("tidy").next_ms == tick + 60_000
    schedules.remove("tidy")
    assert not schedstore.stored(get_queue("default"), ["tidy"])
    with pytest.raises(schedules.UnknownSchedule, match="no schedule 'tidy'"):
        schedules.get("tidy")


def test_cron_schedule_in_a_time_zone_on_the_tasks_queue() -> None:
    e = schedules.add("paris", NOOP, cron="0 8 * * 1-5", timezone="Europe/Paris", priority=3)
    assert (e.cron, e.timezone, e.priority, e.queue) == (
        "0 8 * * 1-5",
        "Europe/Paris",
        3,
        "default",
    )
    assert e.next_at is not None
    local = e.next_at.astimezone(ZoneInfo("Europe/Paris"))
    assert (local.hour, local.minute) == (8, 0) and local.weekday() < 5
    e = schedules.add("report", NOOP, every=5, queue="reports")
    assert e.queue == "reports"


def test_pause_resume_and_run_now() -> None:
    schedules.add("p", RECORD, every=60, args=["l", 1])
    tick = stored("p").next_ms
    assert schedules.pause("p").paused
    assert stored("p").next_ms is None  # out of the due set: no scanner fires it
    assert tick is not None and fire_at(tick + 600_000) == 0
    tag = schedules.run_now("p")  # paused or not, one job now
    assert [j["tag"] for j in jobs()] == [tag] and not tag.startswith("cron:")
    assert stored("p").next_ms is None
    resumed = schedules.resume("p")
    assert not resumed.paused and resumed.next_at is not None
    nxt = stored("p").next_ms
    schedules.run_now("p")  # the next tick does not move
    assert stored("p").next_ms == nxt
    assert schedules.resume("p").next_at == resumed.next_at  # resuming again: no change
    assert len(jobs()) == 2


def test_update_keeps_the_tick_unless_the_timing_changes() -> None:
    schedules.add("u", RECORD, every=60, args=["l", 1])
    tick = stored("u").next_ms
    e = schedules.update("u", args=["l", 2], priority=4)
    assert (e.args, e.priority) == (("l", 2), 4)
    assert stored("u").next_ms == tick  # same timing: same next tick
    e = schedules.update("u", cron="*/5 * * * *")
    assert (e.cron, e.every) == ("*/5 * * * *", None)
    assert stored("u").next_ms != tick and stored("u").next_ms % 300_000 == 0
    e = schedules.update("u", every=30)
    assert (e.cron, e.every) == (None, 30.0)
    schedules.pause("u")
    e = schedules.update("u", args=["l", 3])  # a paused schedule stays paused
    assert e.paused and stored("u").next_ms is None
    with pytest.raises(InvalidArgument, match="cannot change queue"):
        schedules.update("u", queue="reports")


def test_a_timing_edit_while_a_tick_is_due_fires_it_once_with_the_new_values(
    redis_client: redis.Redis,
) -> None:
    schedules.add("d", RECORD, every=3600, args=["l", "old"])
    q = get_queue("default")
    due = schedstore.now_ms(q) - 1000  # a tick due now that no scanner has fired yet
    redis_client.zadd(q.engine._sched_keys.sched, {"d": due})
    schedules.update("d", every=60, args=["l", "new"])
    assert stored("d").next_ms == due  # kept: it fires once, not skipped
    assert fire_at(due + 500) == 1
    assert fire_at(due + 500) == 0
    assert [j["args"] for j in jobs()] == [["l", "new"]]
    assert stored("d").next_ms == due + 60_000


# ------------------------------------------------------------------ exactly once


def test_a_stale_scanner_cannot_fire_a_changed_definition() -> None:
    schedules.add("s", RECORD, every=60, args=["l", "old"])
    st = stored("s")
    assert st.next_ms is not None
    stale = Scheduler(["default"], {}, now_ms=lambda: st.next_ms or 0)
    old = stale._schedule("s", st.definition)
    assert old is not None
    schedules.update("s", args=["l", "new"])  # same tick, new digest
    q = get_queue("default")
    job = schedule_spec.job_of(q, old[0], f"cron:s:{st.next_ms}")
    assert not schedstore.fire(q, "s", st.next_ms, st.next_ms + 60_000, job, old[1])
    assert jobs() == []
    assert stale.step() == 1
    assert [j["args"] for j in jobs()] == [["l", "new"]]


@pytest.mark.slow
def test_two_schedulers_racing_over_edits_fire_every_tick_once() -> None:
    """Two scanners step through an hour together while an editor changes the schedule
    without pause: no tick fires twice, and none is lost. A firing that meets an edit is
    refused (the definition's digest moved) and made at a later step; with
    ``catch_up="all"`` those later steps fire every tick missed, so after the edits stop
    each tick has fired exactly once. (With the default ``"last"``, a tick refused at every
    step until the next one is due is skipped by design.)"""
    schedules.add("race", RECORD, every=60, args=["l", 0], catch_up="all")
    start = stored("race").next_ms
    assert start is not None
    steps = [start + i * 15_000 for i in range(4 * 60 + 1)]  # every 15 s for an hour
    errors: list[BaseException] = []
    done = threading.Event()
    # the two scanners step together, each on its own clock at the same time
    together = threading.Barrier(2)

    def scanner() -> None:
        try:
            clock = {"now": start}
            s = Scheduler(["default"], {}, now_ms=lambda: clock["now"])
            for now in steps:
                clock["now"] = now
                together.wait(timeout=30)
                s.step()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def editor() -> None:
        n = 0
        try:
            while not done.is_set():  # a firing does not change the digest: no conflict
                n += 1
                schedules.update("race", args=["l", n])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=scanner) for _ in range(2)]
    edit = threading.Thread(target=editor)
    edit.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    done.set()
    edit.join(30)
    assert not errors
    assert len({j["args"][1] for j in jobs()}) > 1  # the edits were seen mid-run
    for _ in range(100):  # the edits have stopped: what was refused fires now
        if not fire_at(steps[-1]):
            break
    ticks = fired_ticks("race")
    assert set(ticks.values()) == {1}  # none twice
    assert sorted(ticks) == list(range(start, steps[-1] + 1, 60_000))  # none lost


# ------------------------------------------------------------------ bad input


BAD: list[tuple[dict[str, Any], str]] = [
    ({"cron": "61 * * * *"}, "invalid cron"),
    ({"cron": "every day"}, "invalid cron"),
    ({"task": "no.such.task", "every": 5}, "unknown task 'no.such.task'"),
    ({"every": 5, "args": ["only-one"]}, "do not fit"),
    ({"every": 5, "args": ["l", 1], "kwargs": {"colour": 1}}, "unexpected keyword"),
    ({"every": 5, "args": ["l", 1, 2]}, "do not fit"),
    ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
    ({"every": 0}, "every must be > 0"),
    ({"every": -5}, "every must be > 0"),
    ({"every": float("nan")}, "every must be > 0"),
    ({"every": True}, "every must be a number"),
    ({}, "exactly one of cron, every"),
    ({"cron": "* * * * *", "every": 5}, "exactly one of cron, every"),
    ({"every": 5, "queue": "nowhere"}, "unknown queue 'nowhere'"),
    ({"every": 5, "priority": 10_000}, "priority"),
    ({"every": 5, "args": ["l", object()]}, "arguments"),
    ({"name": "", "every": 5}, "non-empty"),
    ({"name": "x" * 101, "every": 5}, "at most 100"),
    ({"name": "bad\nname", "every": 5}, "control characters"),
    ({"name": "bad\x00name", "every": 5}, "control characters"),
    ({"name": HEARTBEAT, "every": 5}, "declared in code"),
]


@pytest.mark.parametrize(("values", "message"), BAD)
def test_bad_input_is_refused_in_one_line_with_nothing_written(
    values: dict[str, Any], message: str, redis_client: redis.Redis, prefix: str
) -> None:
    schedules.add("kept", RECORD, every=60, args=["l", 1])
    before = snapshot(redis_client, prefix)
    opts = {"name": "new", "task": RECORD, "args": ["l", 1], **values}
    with pytest.raises(InvalidArgument, match=message) as err:
        schedules.add(opts.pop("name"), opts.pop("task"), **opts)
    assert "\n" not in str(err.value).replace("bad\nname", "")
    if values and "name" not in values:  # the same change to an existing schedule
        with pytest.raises(InvalidArgument):
            schedules.update("kept", **values)
    assert snapshot(redis_client, prefix) == before


def test_a_name_in_use_is_refused(redis_client: redis.Redis, prefix: str) -> None:
    schedules.add("twice", NOOP, every=60)
    before = snapshot(redis_client, prefix)
    with pytest.raises(InvalidArgument, match="already exists"):
        schedules.add("twice", NOOP, every=30)
    with pytest.raises(InvalidArgument, match="already exists"):
        schedules.add("twice", NOOP, every=30, queue="reports")  # names span the queues
    with pytest.raises(schedules.UnknownSchedule):
        schedules.pause("missing")
    with pytest.raises(InvalidArgument, match="cannot change colour"):
        schedules.update("twice", colour="red")
    assert snapshot(redis_client, prefix) == before


# ------------------------------------------------------------------ code vs runtime


def test_code_schedules_sit_beside_runtime_ones_and_code_wins_at_deploy(
    redis_client: redis.Redis,
) -> None:
    code = {"nightly": Schedule(name="nightly", task=NOOP, cron="0 3 * * *", timezone="UTC")}
    Scheduler(["default"], code).sync()
    schedules.add("extra", NOOP, every=60)
    listed = {e.name: e.source for e in schedules.entries()}
    assert listed["nightly"] == "code" and listed["extra"] == "runtime"
    assert listed[HEARTBEAT] == "code"  # declared, not stored yet: listed all the same
    for change in (
        lambda: schedules.update("nightly", every=5),
        lambda: schedules.remove("nightly"),
    ):
        with pytest.raises(InvalidArgument, match="declared in code"):
            change()
    schedules.pause("nightly")  # an operator may pause a code schedule
    changed = {"nightly": Schedule(name="nightly", task=NOOP, cron="0 4 * * *", timezone="UTC")}
    result = Scheduler(["default"], changed).sync()  # a deploy with new code values
    assert result == {"added": 0, "changed": 1, "removed": 0}  # the runtime one is kept
    nightly = schedules.get("nightly")
    assert (nightly.cron, nightly.paused, nightly.next_at) == ("0 4 * * *", True, None)
    assert schedules.get("extra").source == "runtime"
    schedules.resume("nightly")
    assert schedules.get("nightly").next_at is not None
    assert Scheduler(["default"], {}).sync()["removed"] == 1  # nightly: gone from code
    assert [e.name for e in schedules.entries() if e.source == "runtime"] == ["extra"]


def test_code_takes_over_a_runtime_schedule_of_its_name_at_deploy() -> None:
    schedules.add("clash", RECORD, every=60, args=["l", 1])
    schedules.pause("clash")
    code = {"clash": Schedule(name="clash", task=NOOP, cron="0 3 * * *", timezone="UTC")}
    assert Scheduler(["default"], code).sync()["changed"] == 1
    e = schedules.get("clash")
    assert (e.source, e.task, e.cron, e.paused) == ("code", NOOP, "0 3 * * *", True)


def test_the_layout_written_by_code_schedules_still_works(redis_client: redis.Redis) -> None:
    """A definition as code schedules have always stored it (no "source"): listed as code,
    fired by the scanners that declare it, paused and resumed as before."""
    s = Schedule(name="legacy", task=NOOP, interval=60, timezone="UTC")
    q = get_queue("default")
    definition = {**s.definition(), "paused": False}
    assert "source" not in definition
    redis_client.hset(q.engine._sched_keys.sched_defs, "legacy", json.dumps(definition))
    redis_client.zadd(q.engine._sched_keys.sched, {"legacy": 1_000_000})
    assert Scheduler(["default"], {"legacy": s}).sync() == {"added": 0, "changed": 0, "removed": 0}
    assert schedules.get("legacy").source == "code"
    assert fire_at(1_000_000) == 0  # not declared by this scanner: left to those that do
    assert fire_at(1_000_000, {"legacy": s}) == 1
    assert fired_ticks("legacy") == Counter({1_000_000: 1})
    assert Scheduler(["default"], {"legacy": s}).pause("legacy")
    assert stored("legacy").next_ms is None
    assert Scheduler(["default"], {"legacy": s}).resume("legacy")
    assert stored("legacy").next_ms is not None
