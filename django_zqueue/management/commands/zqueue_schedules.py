"""``manage.py zqueue_schedules list|sync|pause NAME|resume NAME``: periodic schedules."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...schedules import Scheduler
from ..errors import redis_errors


def _when(ms: int | None) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat() if ms else "-"


class Command(BaseCommand):
    help = "List, sync, pause or resume django_zqueue periodic schedules."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=["list", "sync", "pause", "resume"])
        parser.add_argument("name", nargs="?")

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        scheduler = Scheduler()
        action, name = options["action"], options["name"]
        if action in ("pause", "resume"):
            if not name:
                raise CommandError(f"{action} needs a schedule name")
            ok = scheduler.pause(name) if action == "pause" else scheduler.resume(name)
            if not ok:
                raise CommandError(f"no schedule {name!r} in Redis (run 'sync' first?)")
            self.stdout.write(f"{action}d {name}")
            return
        if action == "sync":
            self.stdout.write(" ".join(f"{k}={v}" for k, v in scheduler.sync().items()))
            return
        for row in scheduler.listing():
            every = row["cron"] or f"every {row['interval']} s"
            self.stdout.write(
                f"{row['name']}  queue={row['queue']}  task={row['task']}  {every}  "
                f"{'PAUSED' if row['paused'] else 'next=' + _when(row['next_ms'])}  "
                f"last={_when(row['last_ms'])}  last_job={row['last_job'] or '-'} "
                f"({row['last_job_state'] or '-'})"
            )
