"""``manage.py zqueue_worker``: run registered tasks from the given queues."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError

from ... import conf
from ...engine.redis.connection import redis_eviction_warning
from ...tasks import registry
from ...worker import Worker, run_processes
from ...worker.coro import default_async_concurrency
from ...worker.health import Board, Probes
from ..errors import redis_errors
from ..health import add_health_arguments, health_server


def positive_int(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return n


def non_negative_int(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return n


def prefetch_value(value: str) -> int | None:
    """'auto' -> None (adaptive), or an int >= 1."""
    if value == "auto":
        return None
    try:
        return positive_int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be 'auto' or an int >= 1") from None


def queue_list(value: str) -> list[tuple[str, float]]:
    """'a,b' or 'a:3,b:1' -> [(name, weight)]"""
    out = []
    for part in value.split(","):
        name, _, weight = part.strip().partition(":")
        if not name:
            raise argparse.ArgumentTypeError(f"empty queue name in {value!r}")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad weight in {part!r}") from None
        if w <= 0:
            raise argparse.ArgumentTypeError(f"weight must be > 0 in {part!r}")
        out.append((name, w))
    return out


class Command(BaseCommand):
    help = "Run a django_zqueue worker."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--queues",
            type=queue_list,
            default=None,
            help="Comma-separated queues, in strict priority order (default: all configured). "
            "With weights, 'a:3,b:1', the first queue tried is drawn by weight.",
        )
        parser.add_argument("--concurrency", type=positive_int, default=1, help="Threads.")
        parser.add_argument(
            "--processes", type=positive_int, default=1, help="Forked worker processes."
        )
        parser.add_argument(
            "--prefetch",
            type=prefetch_value,
            default=None,
            help="Jobs each thread claims at once: 'auto' (default: 1 to 20, by the "
            "length of the line and the run time of recent jobs) or a fixed N.",
        )
        parser.add_argument(
            "--async-concurrency",
            type=non_negative_int,
            default=None,
            help="async def tasks run at once on the worker's event-loop lane (default: "
            "100 when an async task is registered, else 0: no lane).",
        )
        parser.add_argument("--burst", action="store_true", help="Exit when nothing is ready.")
        parser.add_argument("--max-jobs", type=positive_int, default=None)
        parser.add_argument("--no-scanner", action="store_true", help="No embedded scanner.")
        parser.add_argument("--grace", type=float, default=30.0, help="Shutdown grace, seconds.")
        parser.add_argument(
            "--pool",
            choices=["thread", "process"],
            default="thread",
            help="Where tasks run: 'thread' (default) or 'process' (a child process per "
            "job, killed past its timeout; a task's isolation= wins).",
        )
        parser.add_argument(
            "--cancel-grace",
            type=float,
            default=5.0,
            help="Seconds a cancelled running job may take to stop by itself before "
            "JobCancelled is raised in it.",
        )
        add_health_arguments(parser)
        parser.add_argument(
            "--max-jobs-per-child",
            type=positive_int,
            default=None,
            help="Recycle a worker process after it ran about N jobs (+0 to 10%% jitter): "
            "it stops as on SIGTERM and the parent starts a fresh one.",
        )
        parser.add_argument(
            "--max-memory",
            type=positive_int,
            default=None,
            metavar="MB",
            help="Recycle a worker process whose resident memory is past MB MiB after a job.",
        )

    @redis_errors  # --burst with Redis down: one line (a long-running worker rides it out)
    def handle(self, *args: Any, **options: Any) -> None:
        config = conf.get_config()
        pairs = options["queues"] or [(name, 1.0) for name in config.queues]
        names = [n for n, _ in pairs]
        unknown = [n for n in names if n not in config.queues]
        if unknown:
            raise CommandError(f"unknown queue(s) {unknown}; configured: {sorted(config.queues)}")
        weighted = any(w != 1.0 for _, w in pairs)
        if options["verbosity"] >= 2:
            logging.getLogger("django_zqueue").setLevel(logging.DEBUG)
        elif options["verbosity"] >= 1:
            logging.getLogger("django_zqueue").setLevel(logging.INFO)
        if not logging.getLogger().handlers and not logging.getLogger("django_zqueue").handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logging.getLogger("django_zqueue").addHandler(handler)
        if options["verbosity"] == 1:  # per-job lines cost the hot path: DEBUG, on demand
            logging.getLogger("django_zqueue.worker").info(
                'event=worker_logging per_job=off hint="-v 2 logs one line per job '
                '(job_start, job_done); failures are logged at every verbosity"'
            )
        registry.autodiscover()
        try:
            warning = redis_eviction_warning(config)
        except redis.RedisError:
            warning = None  # Redis down: the worker reports it and retries
        if warning:
            logging.getLogger("django_zqueue.worker").warning("event=redis_eviction %s", warning)

        lanes = options["async_concurrency"]
        if lanes is None:
            lanes = default_async_concurrency(names)

        def make() -> Worker:
            return Worker(
                names,
                concurrency=options["concurrency"],
                prefetch=options["prefetch"],
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                scanner=not options["no_scanner"],
                weights=[w for _, w in pairs] if weighted else None,
                grace=options["grace"],
                cancel_grace=options["cancel_grace"],
                pool=options["pool"],
                async_concurrency=lanes,
                health_timeout=options["health_timeout"],
                max_jobs_per_child=options["max_jobs_per_child"],
                max_memory_mb=options["max_memory"],
            )

        run(make, options)


def run(make: Callable[[], Worker], options: dict[str, Any]) -> None:
    """Run the worker ``make`` makes, in this process or ``--processes`` forked ones, and
    the health probes with ``--health-port`` (the parent answers for its children)."""
    probed = options["health_port"] is not None
    recycled = options["max_jobs_per_child"] is not None or options["max_memory"] is not None
    if options["processes"] > 1 or recycled:  # a recycled worker needs a parent to replace it
        health = None
        if probed:  # the parent answers for its children (worker/health.py)
            board = Board(options["processes"], options["health_timeout"])
            server = health_server(Probes(board.live, board.ready), options, threaded=False)
            health = (server, board)
        run_processes(options["processes"], make, health)
        return
    worker = make()
    if probed:
        health_server(Probes(worker.vitals.live, worker.vitals.ready), options, threaded=True)
    worker.install_signal_handlers()
    worker.run()
