"""``manage.py zqueue_doctor``: diagnoses the first things that go wrong, on the live Redis.

One line per finding, with what to do; exit status 1 when any is an error."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...doctor import diagnose
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

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        quiet = options["problems_only"] or options["verbosity"] == 0
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
