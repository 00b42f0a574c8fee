"""``manage.py zqueue_scale``: the autoscaling signal of the queues (read/scale.py)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...exceptions import InvalidArgument
from ...queue import get_queue
from ...read.scale import DEFAULT_TARGET_SECONDS, scale_document
from ..errors import configured_queues, redis_errors

COLUMNS = (
    "ready",
    "inflight",
    "lag_seconds",
    "completed_per_second",
    "live_threads",
    "desired_threads",
    "desired_workers",
)


def seconds(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of seconds") from None
    if not 0 < n <= 604800:
        raise argparse.ArgumentTypeError("must be in (0, 604800] seconds")
    return n


def positive_int(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return n


class Command(BaseCommand):
    help = "Show how many worker threads would drain each queue within a target time."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="The document KEDA reads.")
        parser.add_argument(
            "--target-seconds",
            type=seconds,
            default=DEFAULT_TARGET_SECONDS,
            help=f"Drain what is ready within this time (default {DEFAULT_TARGET_SECONDS:g}).",
        )
        parser.add_argument(
            "--threads-per-worker",
            type=positive_int,
            default=1,
            help="A worker's --concurrency: desired_workers is desired_threads over it.",
        )
        parser.add_argument("--queues", default=None, help="Comma-separated (default: all).")

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        names = configured_queues(options["queues"])
        try:
            doc = scale_document(
                [get_queue(n).engine for n in names],
                options["target_seconds"],
                options["threads_per_worker"],
            )
        except InvalidArgument as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(doc, indent=2))
            return
        width = max(10, *(len(n) for n in names))
        self.stdout.write(" ".join([f"{'queue':<{width}}", *(f"{c:>20}" for c in COLUMNS)]))
        for row in [*doc["queues"].values(), doc["total"]]:
            name = row["queue"] + (" (paused)" if row["paused"] else "")
            values = [f"{row[c]:>20}" for c in COLUMNS]
            self.stdout.write(" ".join([f"{name:<{width}}", *values]))
