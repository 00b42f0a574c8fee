"""``manage.py zqueue_dead <queue> list|requeue|purge``: dead letters."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...queue import command_queue
from ..errors import redis_errors


def page_size(value: str) -> int:
    n = int(value)
    if not 1 <= n <= 1000:
        raise argparse.ArgumentTypeError("must be in [1, 1000]")
    return n


def letters(n: int) -> str:
    return f"{n} dead letter" if n == 1 else f"{n} dead letters"


class Command(BaseCommand):
    help = "List, requeue or purge django_zqueue dead letters."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("queue")
        parser.add_argument("action", choices=["list", "requeue", "purge"])
        parser.add_argument("tags", nargs="*", help="requeue: these tags (default: all listed)")
        parser.add_argument("--limit", type=page_size, default=50, help="1 to 1000")
        parser.add_argument(
            "--front",
            action="store_true",
            help="requeue: to the front of the line, claimed next (retry now)",
        )
        parser.add_argument(
            "--yes",
            "--noinput",
            "--no-input",
            action="store_false",
            dest="interactive",
            help="purge: do not ask for confirmation",
        )

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        q = command_queue(options["queue"])
        action = options["action"]
        if action == "purge":
            if options["interactive"]:
                self.confirm_purge(q.name, q.counts()["dead"])
            self.stdout.write(f"purged {letters(q.purge_dead())}")
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
        moved = sum(q.requeue_dead(t, front=options["front"]) for t in tags)
        if options["tags"] and moved < len(tags):
            others = "the other is not a dead letter"
            if len(tags) - moved > 1:
                others = "the others are not dead letters"
            raise CommandError(f"requeued {moved} of {len(tags)}: {others}")
        self.stdout.write(f"requeued {letters(moved)}")

    def confirm_purge(self, queue: str, count: int) -> None:
        """Ask before deleting, as the admin does; anything but 'yes' cancels."""
        if not count:
            return  # nothing to lose
        try:
            answer = input(
                f"This deletes {letters(count)} of queue {queue!r} for good "
                "(their arguments and errors too).\nType 'yes' to continue, or 'no' to cancel: "
            )
        except EOFError:  # no terminal: use --yes
            answer = ""
        if answer.strip().lower() != "yes":
            raise CommandError("purge cancelled: nothing was deleted (--yes skips this question)")
