"""Bounds where a value becomes a lease, a delay or a count (issue 15): settings (system
checks), ``@task`` (raises at decoration), ``Task.using`` and ``publish`` (raise
``InvalidArgument``, nothing written)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.utils import timezone

from django_zqueue import conf, task
from django_zqueue.conf import bounds, fairness
from django_zqueue.engine.records.spec import SPEC_FIELDS
from django_zqueue.exceptions import InvalidArgument
from django_zqueue.queue import Queue

BAD_LEASES = [1e-6, 0.001, 0.999, 7 * 86400 + 1, 1e300]
GOOD_LEASES = [1, 1.5, 300, 7 * 86400]


@pytest.mark.parametrize("vt", BAD_LEASES)
def test_settings_refuse_a_lease_out_of_range(vt: float) -> None:
    _, problems = conf.parse({"QUEUES": {"q": {"visibility_timeout": vt}}})
    assert [p.id for p in problems] == ["django_zqueue.E007"]
    assert "[1, 604800]" in problems[0].msg


@pytest.mark.parametrize("vt", GOOD_LEASES)
def test_settings_take_a_lease_in_range(vt: float) -> None:
    config, problems = conf.parse({"QUEUES": {"q": {"visibility_timeout": vt}}})
    assert problems == [] and config.queues["q"].visibility_timeout == vt


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 10**30}, "max_retries"),
        ({"max_retries": 1001}, "max_retries"),
        ({"retry_backoff": {"base": 1e9}}, "retry_backoff base"),
        ({"retry_backoff": {"max": 8 * 86400}}, "retry_backoff max"),
    ],
)
def test_settings_refuse_counts_and_backoffs_out_of_range(
    options: dict[str, Any], needle: str
) -> None:
    _, problems = conf.parse({"QUEUES": {"q": options}})
    assert problems and needle in problems[0].msg


def test_manage_check_reports_a_bad_lease(settings: Any) -> None:
    from django.core import checks

    settings.ZQUEUE = {"QUEUES": {"default": {"visibility_timeout": 1e-6}}}
    errors = [e for e in checks.run_checks() if e.id == "django_zqueue.E007"]
    assert errors and "visibility_timeout" in errors[0].msg


@pytest.mark.parametrize("vt", BAD_LEASES)
def test_publish_refuses_a_lease_out_of_range(
    q: Queue, redis_client: redis.Redis, vt: float
) -> None:
    with pytest.raises(InvalidArgument, match="visibility_timeout"):
        q.publish("x", visibility_timeout=vt)
    assert q.total_count() == 0 and not redis_client.exists(q.engine._keys.meta)


@pytest.mark.parametrize("retries", [-1, 1001, 10**30])
def test_publish_refuses_max_retries_out_of_range(q: Queue, retries: int) -> None:
    with pytest.raises(InvalidArgument, match="max_retries"):
        q.publish("x", max_retries=retries)
    assert q.total_count() == 0


def test_publish_refuses_a_delay_beyond_the_horizon(q: Queue) -> None:
    with pytest.raises(InvalidArgument, match="horizon"):
        q.publish("x", delay=bounds.MAX_DELAY + 60)
    with pytest.raises(InvalidArgument, match="horizon"):
        q.publish("x", run_at=timezone.now() + timedelta(seconds=bounds.MAX_DELAY + 60))
    assert q.total_count() == 0
    q.publish("x", delay=bounds.MAX_DELAY - 60)  # within: taken
    assert q.counts()["delayed"] == 1


def test_nack_and_touch_refuse_waits_beyond_the_bounds(q: Queue) -> None:
    q.publish("x")
    msg = q.get()
    assert msg is not None
    with pytest.raises(InvalidArgument, match="horizon"):
        q.nack(msg, "e", retry_in=bounds.MAX_DELAY + 60)
    with pytest.raises(InvalidArgument, match="extend"):
        q.touch(msg, extend=bounds.MAX_VISIBILITY_TIMEOUT + 1)
    assert q.state(msg.tag) == "leased"


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"visibility_timeout": 1e-6}, "visibility_timeout"),
        ({"visibility_timeout": 1e300}, "visibility_timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 10**30}, "max_retries"),
        ({"retry_backoff": {"base": 1e9}}, "retry_backoff"),
        ({"retry_backoff": conf.Backoff(base=1, max=1e12)}, "retry_backoff max"),
    ],
)
def test_task_decorator_raises_at_decoration(options: dict[str, Any], needle: str) -> None:
    with pytest.raises((InvalidArgument, conf.ConfigurationError), match=needle):

        @task(name=f"tests.bounds.never_{needle.replace(' ', '_')}", **options)
        def never() -> None: ...


def test_task_using_refuses_a_lease_out_of_range() -> None:
    from testproject.demo import tasks

    with pytest.raises(InvalidArgument, match="visibility_timeout"):
        tasks.add.using(visibility_timeout=0.001)
    with pytest.raises(InvalidArgument, match="max_retries"):
        tasks.add.using(max_retries=10**30)


# ---------------------------------------------------------------- no bound as a literal in Lua

#: a number in Lua code (not in a comment or a string), with what stands right before it
_LUA_NUMBER = re.compile(r"(?<![\w.])(0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![\w.])")
#: what is no bound though its value is one, each with why: (script, the line's text)
LITERAL_ALLOWED = {
    ("_group_room", "local GROUP_SLACK = 1000"): "entries read past a group's limit: work",
    ("_group_room", "local GROUP_STEP = 1000"): "ids per command (unpack's limit): work",
    ("_group_limits", "local SWEEP_IDLE = 200"): "entries swept per idle poll: work",
    # 100 is MAX_PUBLISH_JOBS too; these are other bounds of the same value (each call's
    # own, from the Python side's CLAIM_CHUNK, ACK_CHUNK, RESOLVE_CHUNK), work or time
    ("_expire", "local EXPIRED_MAX = 100"): "expired jobs moved per call: work",
    ("_group_limits", "local PARK_MAX = 100"): "jobs set aside per call: work",
    ("ack_many", "if n < 1 or n > 100 then"): "acks per call (ACK_CHUNK), not publish's",
    ("claim", "local ORDER_KEYS, ORDER_POLL_MS, ORDER_SWEEP = 8, 100, 2"): "a poll: ms",
    (
        "claim",
        "if not is_int(batch, 1, 100) or not is_int(vt, MIN_LEASE_MS, MAX_LEASE_MS)",
    ): "jobs leased per call (CLAIM_CHUNK), not publish's",
    (
        "claim_fair",
        "if not is_int(batch, 1, 100) or not is_int(vt, MIN_LEASE_MS, MAX_LEASE_MS)",
    ): "jobs leased per call (CLAIM_CHUNK), not publish's",
    ("wf_resolve", "if m < 1 or m > 100 or #KEYS ~= 10 + m then"): "entries (RESOLVE_CHUNK)",
}


def _bound_values() -> set[float]:
    values = {float(v) for v in bounds.LUA_CONSTANTS.values()}
    for lo, hi, _ in bounds.JOB_BOUNDS.values():
        values |= {float(lo), float(hi)}
    return values - {0.0, 1.0, -1.0}  # the empty, the first and the none: no bounds


def _code(line: str) -> str:
    """A Lua line without its comment and with its strings emptied."""
    line = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "''", line)
    return line.split("--", 1)[0]


def literal_bounds(name: str, text: str) -> list[str]:
    """The numbers in Lua ``text`` (script ``name``) whose value is a bound of
    :mod:`~django_zqueue.conf.bounds` (a unit factor, a number multiplied or divided by,
    is not one; nor what :data:`LITERAL_ALLOWED` lists)."""
    values = _bound_values()
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if (name, line.split("--", 1)[0].strip()) in LITERAL_ALLOWED:
            continue
        code = _code(line)
        for m in _LUA_NUMBER.finditer(code):
            x = float(int(m.group(1), 16)) if m.group(1).startswith("0x") else float(m.group(1))
            before, after = code[: m.start()].rstrip(), code[m.end() :].lstrip()
            if before.endswith(("*", "/")) or after.startswith(("*", "/")):
                continue  # a unit: ms in a second, us in a ms
            if x in values or (before.endswith("-") and -x in values):
                found.append(f"{name}.lua:{number}: {m.group(1)} in {line.strip()!r}")
    return found


def test_no_script_holds_a_bound_as_a_literal() -> None:
    """Every bound the scripts check is named from the one table (lua/_bounds.lua,
    generated from bounds.py): a number in a script equal to a bound's value fails."""
    lua = Path(bounds.__file__).parents[1] / "engine" / "lua"
    generated = ("_bounds.lua", "_job_options.lua")  # bounds.py's table, as Lua
    scripts = sorted(p for p in lua.glob("*.lua") if p.name not in generated)
    assert len(scripts) > 60
    found = [f for p in scripts for f in literal_bounds(p.stem, p.read_text("utf-8"))]
    assert not found, "bounds written as literals (name them from _bounds.lua):\n" + "\n".join(
        found
    )


@pytest.mark.parametrize(
    "line",
    [
        "if not is_int(p, -1000, 1000) then",
        "if #g > 200 then",
        "local ok = w >= 0.001",
        "if n > 10000 then error('x') end",
        "local MAX = 1125899906842624",
        "if not is_int(n, 1, 100) then",
        "if seq >= 9007199254740992 then",
    ],
)
def test_a_literal_bound_is_found(line: str) -> None:
    """The scan is not blind: a bound written as a number in any form is reported."""
    assert literal_bounds("any", line)


@pytest.mark.parametrize(
    "line",
    [
        "local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000",
        "error('priority must be in [-1000, 1000]') -- 1000",
        "local GROUP_SLACK = 1000",
        "if n < 1 or n > 50 then",
    ],
)
def test_units_text_and_other_numbers_are_no_bounds(line: str) -> None:
    assert not literal_bounds("_group_room", line)


def test_every_script_constant_is_in_the_generated_helper() -> None:
    """The constants the scripts name are bounds.py's, each defined once in _bounds.lua."""
    text = bounds.lua_source()
    for name, value in bounds.LUA_CONSTANTS.items():
        assert f"local {name} = {bounds.lua_number(value)}\n" in text
    assert fairness.MAX_GROUP_CONCURRENCY == bounds.MAX_GROUP_CONCURRENCY
    assert fairness.MAX_GROUP_QPS == bounds.MAX_GROUP_QPS
    assert fairness.MAX_VTIME == bounds.MAX_VTIME


# ---------------------------------------------------------------- a job's option names


def test_the_option_names_are_the_job_specs_fields() -> None:
    """One table of option names (bounds.JOB_OPTIONS and ONCE_OPTIONS) is the JobSpec's
    fields, each number with its bounds; the wire protocol's are among them."""
    assert set(bounds.JOB_OPTIONS) | set(bounds.ONCE_OPTIONS) == set(SPEC_FIELDS)
    assert not set(bounds.JOB_OPTIONS) & set(bounds.ONCE_OPTIONS)
    for name, kind in bounds.JOB_OPTIONS.items():
        assert kind in ("number", "text"), name
        assert (kind == "number") == (name in bounds.JOB_BOUNDS), name
    assert all(name in bounds.JOB_BOUNDS for name in bounds.ONCE_OPTIONS)
    assert set(bounds.PROTOCOL_OPTIONS) - {"id"} <= set(bounds.JOB_OPTIONS)


def test_the_scripts_option_names_are_generated() -> None:
    """lua/_job_options.lua is bounds.py's option tables as Lua, to the letter (regenerate
    with ``python -m django_zqueue.conf.bounds``), and no other script lists them by hand."""
    lua = Path(bounds.__file__).parents[1] / "engine" / "lua"
    assert (lua / "_job_options.lua").read_text("utf-8") == bounds.options_lua_source()
    for path in lua.glob("*.lua"):
        if path.name == "_job_options.lua":
            continue
        code = "\n".join(_code(line) for line in path.read_text("utf-8").splitlines())
        assert len(options_listed(code)) < 2, (path.name, options_listed(code))


def options_listed(code: str) -> list[str]:
    """The job options ``code`` (Lua) sets as the fields of a table it makes."""
    return [n for n in bounds.JOB_OPTIONS if re.search(rf"[{{,]\s*{n}\s*=(?!=)", code)]


@pytest.mark.parametrize("script", ["_new_job", "proto_publish"])
def test_a_list_of_option_names_by_hand_is_found(script: str) -> None:
    """The check is not blind: the lists these scripts held before are found."""
    before = {
        "_new_job": "local JOB_FIELDS = {id = true, group = true, priority = bounds_of('priority'),"
        " score = bounds_of('score')}",
        "proto_publish": "local OPTIONS = {id = true, priority = true, delay_ms = true}",
    }
    assert len(options_listed(before[script])) >= 2


def test_the_protocol_documents_its_option_names() -> None:
    protocol = (Path(bounds.__file__).parents[2] / "docs" / "protocol.md").read_text("utf-8")
    for name in bounds.PROTOCOL_OPTIONS:
        assert f"`{name}`" in protocol, name
