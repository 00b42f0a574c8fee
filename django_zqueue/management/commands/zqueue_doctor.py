"""``manage.py zqueue_doctor``: diagnoses the first things that go wrong, on the live Redis.

One line per finding, with what to do; exit status 1 when any is an error. ``--repair``
lists the repairs of the queues' keys that are safe to make (a dry run); ``--repair
--yes`` makes them."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...ops.doctor import diagnose, repairs
from ..errors import redis_errors


class Command(BaseCommand):
    help = (
        "Check settings, Redis (reachable, eviction policy, clock), workers and scanners of "
        "every queue, dead letters, periodic schedules and the admin's permissions."
    )
    # the system checks are one of the diagnoses: report them, do not stop on them
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--problems-only",
            action="store_true",
            help="print warnings and errors only (also with -v 0)",
        )
        parser.add_argument(
            "--repair",
            action="store_true",
            help="list the repairs of wrong keys that are safe to make (nothing is written "
            "without --yes), then diagnose",
        )
        parser.add_argument(
            "--yes",
            "--noinput",
            "--no-input",
            action="store_true",
            dest="yes",
            help="with --repair: make the repairs",
        )

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        quiet = options["problems_only"] or options["verbosity"] == 0
        if options["yes"] and not options["repair"]:
            raise CommandError("--yes makes the repairs of --repair: give both")
        if options["repair"]:
            self.repair(apply=options["yes"])
        findings = diagnose()
        for finding in findings:
            if quiet and finding.level in ("ok", "note"):
                continue
            style = {"error": self.style.ERROR, "warning": self.style.WARNING}.get(
                finding.level, str
            )
            self.stdout.write(style(finding.line()))
        errors = sum(f.level == "error" for f in findings)
        warnings = sum(f.level == "warning" for f in findings)
        if errors:
            raise CommandError(
                f"{errors} error{'s' if errors > 1 else ''} and {warnings} "
                f"warning{'' if warnings == 1 else 's'}: see the lines above, and "
                "docs/troubleshooting.md"
            )
        if warnings:
            self.stdout.write(
                f"no error, {warnings} warning{'' if warnings == 1 else 's'}: see the lines above"
            )
        else:
            self.stdout.write("no error, no warning")

    def repair(self, *, apply: bool) -> None:
        """Make (``apply``) or list the safe repairs; each writes only a value that is
        still the bad one it saw."""
        todo = repairs()
        if not todo:
            self.stdout.write("repair: nothing to repair")
            return
        for r in todo:
            if not apply:
                self.stdout.write(f"would repair: {r.what}")
            elif r.run():
                self.stdout.write(f"repaired: {r.what}")
            else:  # the value changed since it was read: nothing was written
                self.stdout.write(f"not repaired (changed since it was read): {r.what}")
        if not apply:
            self.stdout.write(
                f"dry run: {len(todo)} repair{'s' if len(todo) > 1 else ''} not made: give "
                "--yes to make them"
            )
