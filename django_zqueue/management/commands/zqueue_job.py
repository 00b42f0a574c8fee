"""``manage.py zqueue_job <queue> <tag>``: one job's state, rank, score, attempts, error."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...engine.joblogs import JobLog
from ...queue import command_queue
from ..errors import redis_errors


class Command(BaseCommand):
    help = "Show one django_zqueue job."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("queue")
        parser.add_argument("tag")
        parser.add_argument(
            "--log", action="store_true", help="also print the job's log, attempt by attempt"
        )

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        q = command_queue(options["queue"])
        info = q.read.info(options["tag"])
        if info is None:
            gone = q.cancelled(options["tag"])
            if gone is not None:  # the terminal state kept after a cancel
                self.stdout.write("state: cancelled")
                self.stdout.write(f"cancelled_at: {gone.cancelled_at}")
                self.stdout.write(f"was: {gone.was}")
                self.stdout.write(f"attempts: {gone.attempts}")
                self.stdout.write(f"consumer: {gone.consumer}")
                return
            raise CommandError(f"no job {options['tag']!r} in queue {options['queue']!r}")
        for field in (
            "state",
            "rank",
            "score",
            "priority",
            "attempts",
            "max_retries",
            "enqueued_at",
            "started_at",
            "run_at",
            "lease_deadline",
            "died_at",
            "consumer",
            "progress",
        ):
            self.stdout.write(f"{field}: {getattr(info, field)}")
        if info.finished_at is not None:  # kept in the history of finished jobs
            label = "cancelled_at" if info.state == "cancelled" else "finished_at"
            self.stdout.write(f"{label}: {info.finished_at}")
            if info.was is not None:
                self.stdout.write(f"was: {info.was}")
            self.stdout.write(f"duration_ms: {info.duration_ms}")
            if info.state == "succeeded":
                self.stdout.write(f"result: {info.result if info.result_kept else '(none kept)'}")
        self.stdout.write(f"last_error: {info.last_error or ''}")
        if options["log"]:
            self._log(q.read.log(options["tag"]))

    def _log(self, log: JobLog) -> None:
        """The job's log (docs/admin.md, "Job logs"), attempt by attempt."""
        if log.dropped:
            self.stdout.write(f"log: ({log.dropped} earlier lines dropped)")
        for attempt, lines in log.by_attempt().items():
            self.stdout.write(f"log of attempt {attempt}:")
            for line in lines:
                self.stdout.write(f"  {line.at:%H:%M:%S} {line.level} {line.text}")
