"""``manage.py zqueue_protocol``: set the configured queues up for producers in other
languages (docs/protocol.md): the protocol library loaded, each queue's policy in its
proto hash; ``--check`` prints what the server holds and writes nothing."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ... import conf
from ...engine.scripts import package_version
from ...engine.scripts.source import PROTOCOL_LIBRARY, PROTOCOL_VERSION
from ...exceptions import ZQueueError
from ...queue import get_queue
from ..errors import redis_errors

WORDS = {
    "loaded": "loaded",
    "current": "already loaded",
    "replaced": "replaced",
    "kept": "kept",
}


class Command(BaseCommand):
    help = (
        "Load the wire protocol's function library and write the policy of every "
        "configured queue for producers in other languages (docs/protocol.md)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--check",
            action="store_true",
            help="print the library the server holds and each queue's stored policy; "
            "write nothing (exit status 1 when something is not set up)",
        )

    @redis_errors
    def handle(self, *args: Any, **options: Any) -> None:
        names = list(conf.get_config().queues)
        if options["check"]:
            self._check(names)
            return
        for name in names:
            engine = get_queue(name).engine
            try:
                done = engine.protocol.publish()
            except ZQueueError as exc:
                raise CommandError(str(exc)) from exc
            if done.action == "kept":
                said = f"kept {done.found}, newer than this package's {done.build}"
            elif done.action == "replaced":
                said = f"replaced {done.found or '(no version)'} by {done.build}"
            else:
                said = f"{WORDS[done.action]} ({done.build})"
            self.stdout.write(f"queue {name}: {PROTOCOL_LIBRARY} {said}; {engine.protocol.key()}")
            if engine.partitions > 1:
                self.stdout.write(
                    f"  note: {engine.partitions} partitions: protocol {PROTOCOL_VERSION} "
                    "refuses to publish to a partitioned queue"
                )

    def _check(self, names: list[str]) -> None:
        missing = []
        for name in names:
            engine = get_queue(name).engine
            held = engine.protocol.loaded()
            lib = (
                f"{PROTOCOL_LIBRARY} {held.build or '(no version)'}"
                if held
                else f"{PROTOCOL_LIBRARY} not loaded"
            )
            stored = engine.protocol.stored()
            want = engine.protocol.policy()
            if not stored:
                state = "not set up"
            elif stored == want:
                state = "set up"
            else:
                state = "set up with other settings: run manage.py zqueue_protocol"
            policy = " ".join(f"{k}={v}" for k, v in sorted(stored.items()))
            line = f"queue {name}: {lib}; {engine.protocol.key()} {state} {policy}"
            self.stdout.write(line.rstrip())
            if held is None or not stored:
                missing.append(name)
        self.stdout.write(f"this package: {package_version()}")
        if missing:
            raise CommandError(
                f"not set up for producers: {', '.join(missing)} (run manage.py zqueue_protocol)"
            )
