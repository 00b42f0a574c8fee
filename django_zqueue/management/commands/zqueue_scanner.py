"""``manage.py zqueue_scanner``: promote due delayed jobs, recover expired leases, trim
dead letters, fire periodic schedules. Safe with any number running at once (each step
is one atomic script).

Rides out Redis outages (restart, failover, ``LOADING``, ``READONLY``, ``BUSY``) with
capped exponential backoff, logging one line when Redis is lost and one when it is back;
it exits non-zero only on a configuration error (or when ``--once`` cannot finish its
pass). SIGTERM/SIGINT stop it after the current step (exit 0)."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError

from ...exceptions import ZQueueError
from ...queue import get_queue
from ...tasks.schedules import Scheduler
from ...worker.health import Probes, Vitals
from ...worker.scanner import Scanner, StepTotals
from ...worker.stopsignals import SignalRelay
from ..errors import REDIS_ERRORS, configured_queues, redis_errors
from ..health import add_health_arguments, health_server


def _interval(value: str) -> float:
    seconds = float(value)
    if not 0.01 <= seconds <= 3600:
        raise argparse.ArgumentTypeError("must be between 0.01 and 3600 seconds")
    return seconds


class Command(BaseCommand):
    help = "Run the django_zqueue scanner."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--interval", type=_interval, default=1.0, help="Seconds between passes."
        )
        parser.add_argument("--once", action="store_true", help="One full pass, then exit.")
        parser.add_argument("--queues", default=None, help="Comma-separated (default: all).")
        add_health_arguments(parser)

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        # configuration errors: before the loop, and the only ones that exit non-zero
        names = configured_queues(options["queues"])
        verbose = options["verbosity"] >= 2
        logger = logging.getLogger("django_zqueue")
        logger.setLevel(logging.DEBUG if verbose else logging.INFO)
        if not logging.getLogger().handlers and not logger.handlers:  # lost/back lines
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)

        def report(totals: StepTotals) -> None:
            if totals.fired or verbose:
                self.stdout.write(f"schedules fired={totals.fired}")
            for name, (p, r, b, t) in totals.queues.items():
                if p or r or b or t or verbose:
                    self.stdout.write(
                        f"queue={name} promoted={p} recovered={r} buried={b} trimmed={t}"
                    )
            self.stdout.flush()

        scanner = Scanner(
            [get_queue(n) for n in names], Scheduler(names), name="zqueue_scanner", report=report
        )
        if options["once"]:
            try:
                report(scanner.step())
            except REDIS_ERRORS:
                raise  # one line saying what to check (redis_errors)
            except (ZQueueError, redis.RedisError) as exc:
                raise CommandError(f"the pass did not finish: {exc}") from exc
            return
        stop = threading.Event()
        SignalRelay(lambda signum: stop.set()).install()  # not set inside the handler
        vitals = None
        if options["health_port"] is not None:
            # a loop that sleeps ``interval`` between turns is not blocked before 3 of them
            timeout = max(options["health_timeout"], 3 * options["interval"])
            vitals = Vitals(scanner.outage, timeout, stopping=stop)
            health_server(Probes(vitals.live, vitals.ready), options, threaded=True)
        scanner.run(stop, options["interval"], vitals)
