"""``manage.py zqueue_worker_ctl list | quiet <worker-id> | stop <worker-id>``: the workers
of the queues, and orders to one of them from any host (ops/workerctl.py)."""

from __future__ import annotations

import argparse
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from ...admin import audit
from ...exceptions import InvalidArgument
from ...ops import workerctl
from ...queue import get_queue
from ...read.workers import read_workers
from ..errors import configured_queues, redis_errors

SAID = {
    "quiet": "claims no more jobs, finishes the {n} it holds, then stays idle until stopped",
    "stop": "claims no more jobs, finishes the {n} it holds within its --grace, then exits",
}


class Command(BaseCommand):
    help = (
        "List the workers of the queues (with their state: running, quiet, stopping), or "
        "quiet or stop one of them, on any host: it reads the order within a second."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=["list", "quiet", "stop"])
        parser.add_argument("worker", nargs="?", help="The worker's id (see 'list').")
        parser.add_argument("--queues", default=None, help="Comma-separated (default: all).")
        parser.add_argument(
            "--user",
            default=None,
            help="Record the order in Django's admin log (LogEntry) as this user's.",
        )

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        queues = [get_queue(n) for n in configured_queues(options["queues"])]
        action, worker = options["action"], options["worker"]
        if action == "list":
            if worker:
                raise CommandError("'list' takes no worker id")
            self.list(queues)
            return
        if not worker:
            raise CommandError(f"'{action}' needs a worker id (see: zqueue_worker_ctl list)")
        user = None
        if options["user"] is not None:
            model = get_user_model()
            try:
                user = model._default_manager.get(**{model.USERNAME_FIELD: options["user"]})
            except model.DoesNotExist:
                raise CommandError(f"no user {options['user']!r}") from None
        try:
            sent = workerctl.send(worker, action, queues)
        except InvalidArgument as exc:
            raise CommandError(str(exc)) from exc
        if user is not None:
            audit.worker_order(user.pk, action, worker, sent.queues, sent.running)
        self.stdout.write(
            f"{action}: worker {worker} (queues {', '.join(sent.queues)}) "
            + SAID[action].format(n=sent.running)
            + "; it reads the order within a second."
        )

    def list(self, queues: list[Any]) -> None:
        reading = read_workers([q.engine for q in queues])
        if not reading.workers:
            self.stdout.write("no worker registered")
            return
        for w in reading.workers:
            state = w.state if w.live else "gone (heartbeat stopped)"
            if w.order and w.live:
                state += f", {w.order} ordered"
            self.stdout.write(
                f"{w.id}  {state}  threads={w.threads}  jobs={len(w.jobs)}  "
                f"queues={','.join(sorted(w.queues))}"
            )
