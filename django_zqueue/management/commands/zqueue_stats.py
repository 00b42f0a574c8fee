"""``manage.py zqueue_stats``: per-queue counts and lifetime counters."""

from __future__ import annotations

import argparse
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ... import conf, read
from ...queue import get_queue
from ..errors import redis_errors


class Command(BaseCommand):
    help = "Show django_zqueue queue counts and counters."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        fmt = parser.add_mutually_exclusive_group()
        fmt.add_argument("--json", action="store_true")
        fmt.add_argument(
            "--prometheus",
            action="store_true",
            help="print the Prometheus text format (needs the 'prometheus' extra)",
        )

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        if options["prometheus"]:
            from ...ops.metrics import exposition

            try:
                text = exposition()
            except ImportError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(text.decode("utf-8"), ending="")
            return
        rows = {}
        for f in read.overview([get_queue(name).engine for name in conf.get_config().queues]):
            # the counts last: "dead" is the dead letters now, not the lifetime counter
            counts = {"ready": f.ready, "delayed": f.delayed, "inflight": f.inflight}
            rows[f.name] = {**f.counters, **counts, "dead": f.dead, "workers": f.workers}
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        cols = ["ready", "delayed", "inflight", "dead", "enqueued", "acked", "failed", "retried"]
        self.stdout.write(" ".join(f"{c:>10}" for c in ["queue", *cols, "workers"]))
        for name, row in rows.items():
            values = [str(row.get(c, 0)) for c in [*cols, "workers"]]
            self.stdout.write(" ".join(f"{v:>10}" for v in [name, *values]))
