"""``manage.py zqueue_scanner``: promote due delayed jobs, recover expired leases, trim
dead letters. Safe with any number running at once (each step is one atomic script)."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ... import conf
from ...queue import get_queue
from ...schedules import Scheduler
from ..errors import redis_errors


class Command(BaseCommand):
    help = "Run the django_zqueue scanner."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="Seconds between passes.")
        parser.add_argument("--once", action="store_true", help="One full pass, then exit.")
        parser.add_argument("--queues", default=None, help="Comma-separated (default: all).")

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        configured = conf.get_config().queues
        names = (
            [n.strip() for n in options["queues"].split(",") if n.strip()]
            if options["queues"]
            else list(configured)
        )
        unknown = [n for n in names if n not in configured]
        if unknown:
            raise CommandError(f"unknown queue(s) {unknown}; configured: {sorted(configured)}")
        queues = [get_queue(n) for n in names]
        scheduler = Scheduler(names)
        scheduler.sync()
        stop = threading.Event()
        if not options["once"]:
            signal.signal(signal.SIGTERM, lambda *a: stop.set())
            signal.signal(signal.SIGINT, lambda *a: stop.set())
        while True:
            fired = scheduler.step()
            if fired or options["verbosity"] >= 2:
                self.stdout.write(f"schedules fired={fired}")
            for q in queues:
                totals = [0, 0, 0, 0]
                for _ in range(1000):  # bounded: at most 1000 steps per queue per pass
                    r = q.scan()
                    for i, v in enumerate((r.promoted, r.recovered, r.buried, r.trimmed)):
                        totals[i] += v
                    if not r.more or stop.is_set():
                        break
                if any(totals) or options["verbosity"] >= 2:
                    self.stdout.write(
                        f"queue={q.name} promoted={totals[0]} recovered={totals[1]} "
                        f"buried={totals[2]} trimmed={totals[3]}"
                    )
            if options["once"] or stop.wait(options["interval"]):
                return
