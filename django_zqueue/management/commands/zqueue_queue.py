"""``manage.py zqueue_queue pause|resume|status NAME``: pause and resume a queue."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand

from ...queue import command_queue
from ..errors import redis_errors


class Command(BaseCommand):
    help = (
        "Pause a django_zqueue queue (it takes enqueues, workers claim nothing from it), "
        "resume it, or show whether it is paused."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=["pause", "resume", "status"])
        parser.add_argument("queue")

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        q = command_queue(options["queue"])
        action = options["action"]
        if action == "pause":
            q.pause()
        elif action == "resume":
            q.resume()
        counts = q.counts()
        state = "paused" if q.is_paused() else "running"
        self.stdout.write(
            f"queue {q.name}: {state}  ready={counts['ready']} delayed={counts['delayed']} "
            f"inflight={counts['inflight']} dead={counts['dead']}"
        )
