"""``manage.py zqueue_schedules ACTION [NAME] [options]``: periodic schedules.

``list``, ``sync``; ``pause``, ``resume``, ``run`` any schedule; ``add``, ``update``,
``remove`` a runtime one (the checks of :mod:`django_zqueue.tasks.schedules`' runtime API: bad
input is one ``CommandError`` line, and nothing is written)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...exceptions import InvalidArgument
from ...read.schedules import every_text
from ...tasks import schedules
from ...tasks.schedules import Scheduler
from ..errors import redis_errors

ACTIONS = ["list", "sync", "add", "update", "remove", "pause", "resume", "run"]
#: the options of add and update, as the API names them
VALUE_OPTIONS = {
    "task": "task",
    "cron": "cron",
    "every": "every",
    "call_args": "args",
    "call_kwargs": "kwargs",
    "queue": "queue",
    "priority": "priority",
    "timezone": "timezone",
}


def _when(ms: int | None) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat() if ms else "-"


def _json(kind: type, what: str) -> Any:
    def parse(text: str) -> Any:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{what} is not JSON: {exc}") from exc
        if not isinstance(value, kind):
            raise argparse.ArgumentTypeError(f"{what} must be a JSON {kind.__name__}")
        return value

    return parse


class Command(BaseCommand):
    help = "List, sync, add, update, remove, pause, resume or run django_zqueue periodic schedules."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=ACTIONS)
        parser.add_argument("name", nargs="?")
        parser.add_argument("--task", help="registered task name (add, update)")
        parser.add_argument("--cron", help="cron expression, e.g. '0 8 * * 1-5'")
        parser.add_argument("--every", type=float, help="interval in seconds (> 0)")
        parser.add_argument(
            "--args",
            dest="call_args",
            type=_json(list, "--args"),
            help="JSON list, e.g. '[\"a\", 1]'",
        )
        parser.add_argument(
            "--kwargs",
            dest="call_kwargs",
            type=_json(dict, "--kwargs"),
            help="JSON object, e.g. '{\"n\": 1}'",
        )
        parser.add_argument("--queue", help="queue (add; default: the task's)")
        parser.add_argument("--priority", type=int)
        parser.add_argument("--timezone", help="IANA time zone of a cron schedule")

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        action, name = options["action"], options["name"]
        if action == "list":
            self._list()
            return
        if action == "sync":
            counts = Scheduler().sync()
            self.stdout.write(" ".join(f"{k}={v}" for k, v in counts.items()))
            return
        if not name:
            raise CommandError(f"{action} needs a schedule name")
        values = {v: options[k] for k, v in VALUE_OPTIONS.items() if options.get(k) is not None}
        if values and action not in ("add", "update"):
            raise CommandError(f"{action} takes no --{' --'.join(values)}")
        try:
            self._change(action, name, values)
        except InvalidArgument as exc:
            raise CommandError(str(exc)) from exc

    def _change(self, action: str, name: str, values: dict[str, Any]) -> None:
        if action == "add":
            if "task" not in values:
                raise CommandError("add needs --task")
            entry = schedules.add(name, values.pop("task"), **values)
            self.stdout.write(f"added {name}  next={_iso(entry.next_at)}")
        elif action == "update":
            if not values:
                raise CommandError("update needs at least one option to change")
            entry = schedules.update(name, **values)
            self.stdout.write(f"updated {name}  next={_iso(entry.next_at)}")
        elif action == "remove":
            schedules.remove(name)
            self.stdout.write(f"removed {name}")
        elif action == "run":
            self.stdout.write(f"enqueued {schedules.run_now(name)}")
        else:
            try:
                schedules.pause(name) if action == "pause" else schedules.resume(name)
            except schedules.UnknownSchedule as exc:
                raise CommandError(f"no schedule {name!r} in Redis (run 'sync' first?)") from exc
            self.stdout.write(f"{action}d {name}")

    def _list(self) -> None:
        for row in Scheduler().listing():
            every = row["cron"] or every_text(row["interval"])
            self.stdout.write(
                f"{row['name']}  queue={row['queue']}  task={row['task']}  {every}  "
                f"{'PAUSED' if row['paused'] else 'next=' + _when(row['next_ms'])}  "
                f"last={_when(row['last_ms'])}  last_job={row['last_job'] or '-'} "
                f"({row['last_job_state'] or '-'})  source={row['source']}"
            )


def _iso(when: datetime | None) -> str:
    return when.isoformat() if when is not None else "-"
