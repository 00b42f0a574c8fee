"""``manage.py zqueue_dead <queue> list|requeue|purge``: dead letters."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...queue import command_queue


def page_size(value: str) -> int:
    n = int(value)
    if not 1 <= n <= 1000:
        raise argparse.ArgumentTypeError("must be in [1, 1000]")
    return n


class Command(BaseCommand):
    help = "List, requeue or purge django_zqueue dead letters."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("queue")
        parser.add_argument("action", choices=["list", "requeue", "purge"])
        parser.add_argument("tags", nargs="*", help="requeue: these tags (default: all listed)")
        parser.add_argument("--limit", type=page_size, default=50, help="1 to 1000")

    def handle(self, *args: Any, **options: Any) -> None:
        q = command_queue(options["queue"])
        action = options["action"]
        if action == "purge":
            self.stdout.write(f"purged {q.purge_dead()} dead letters")
            return
        if action == "list":
            for info in q.read.dead_letters(limit=options["limit"]):
                first = (info.last_error or "").splitlines()[0:1]
                self.stdout.write(
                    f"{info.tag}  died={info.died_at}  attempts={info.attempts}  "
                    f"error={first[0] if first else ''}"
                )
            return
        tags = options["tags"] or [i.tag for i in q.read.dead_letters(limit=options["limit"])]
        moved = sum(q.requeue_dead(t) for t in tags)
        if options["tags"] and moved < len(tags):
            raise CommandError(f"requeued {moved} of {len(tags)}: the others are not dead letters")
        self.stdout.write(f"requeued {moved} dead letters")
