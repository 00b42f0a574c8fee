"""``zqueue_schedules`` add / update / remove / pause / resume / run / list, on real Redis:
the API's checks, one CommandError line each, nothing written on bad input."""

from __future__ import annotations

import io

import pytest
import redis
from django.core.management import CommandError, call_command

from django_zqueue import get_queue, schedules

from .conftest import snapshot

RECORD = "testproject.demo.tasks.record"

pytestmark = pytest.mark.usefixtures("project")


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("zqueue_schedules", *args, stdout=out)
    return out.getvalue()


def test_the_command_manages_a_runtime_schedule() -> None:
    out = run("add", "nightly", "--task", RECORD, "--cron", "0 3 * * *", "--args", '["l", 1]')
    assert out.startswith("added nightly  next=20")
    line = next(x for x in run("list").splitlines() if x.startswith("nightly "))
    assert "task=testproject.demo.tasks.record" in line and line.endswith("source=runtime")
    assert "0 3 * * *  next=" in line
    out = run("update", "nightly", "--every", "90", "--kwargs", '{"value": 2}', "--args", '["l"]')
    assert out.startswith("updated nightly")
    e = schedules.get("nightly")
    assert (e.every, e.cron, e.args, e.kwargs) == (90.0, None, ("l",), {"value": 2})
    assert run("pause", "nightly") == "paused nightly\n"
    assert "PAUSED" in next(x for x in run("list").splitlines() if x.startswith("nightly "))
    tag = run("run", "nightly").split()[1]
    assert get_queue("default").state(tag) == "ready"
    assert run("resume", "nightly") == "resumed nightly\n"
    assert run("remove", "nightly") == "removed nightly\n"
    assert "nightly" not in run("list")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "x", "--task", RECORD, "--cron", "99 * * * *", "--args", '["l", 1]'], "cron"),
        (["add", "x", "--task", "nope", "--every", "5"], "unknown task 'nope'"),
        (["add", "x", "--task", RECORD, "--every", "5"], "do not fit"),
        (["add", "x", "--task", RECORD, "--every", "0", "--args", '["l", 1]'], "> 0"),
        (
            [
                "add",
                "x",
                "--task",
                "testproject.demo.tasks.noop",
                "--cron",
                "* * * * *",
                "--timezone",
                "No/Where",
            ],
            "unknown time zone 'No/Where'",
        ),
        (["add", "x", "--task", RECORD, "--every", "5", "--args", "{"], "not JSON"),
        (["add", "x", "--every", "5"], "needs --task"),
        (["add", "bad\x07name", "--task", RECORD, "--every", "5"], "control characters"),
        (["update", "kept", "--cron", "nope"], "invalid cron"),
        (["update", "kept"], "at least one option"),
        (["update", "ghost", "--every", "5"], "no schedule 'ghost'"),
        (["remove", "ghost"], "no schedule 'ghost'"),
        (["pause", "ghost"], "no schedule 'ghost'"),
        (["run", "ghost"], "no schedule 'ghost'"),
        (["pause"], "needs a schedule name"),
        (["pause", "kept", "--every", "5"], "takes no --every"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    args: list[str], message: str, redis_client: redis.Redis, prefix: str
) -> None:
    schedules.add("kept", RECORD, every=60, args=["l", 1])
    before = snapshot(redis_client, prefix)
    with pytest.raises(CommandError, match=message) as err:
        run(*args)
    assert "\n" not in str(err.value)
    assert snapshot(redis_client, prefix) == before
