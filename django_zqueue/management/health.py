"""The ``--health-port``, ``--health-host`` and ``--health-timeout`` options of
``zqueue_worker`` and ``zqueue_scanner`` (the probes: ``worker/health.py``). Not a command
module (Django skips modules outside ``commands/``)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError

from ..worker.health import DEFAULT_TIMEOUT, HealthServer, Probes, serve


def port_number(value: str) -> int:
    n = int(value)
    if not 1 <= n <= 65535:
        raise argparse.ArgumentTypeError("must be a port number, 1 to 65535")
    return n


def health_timeout(value: str) -> float:
    seconds = float(value)
    if not 1 <= seconds <= 86400:
        raise argparse.ArgumentTypeError("must be between 1 and 86400 seconds")
    return seconds


def add_health_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--health-port",
        type=port_number,
        default=None,
        help="Serve GET /livez and /readyz on this port (default: no probes).",
    )
    parser.add_argument(
        "--health-host",
        default="127.0.0.1",
        help="The address the probes listen on (default 127.0.0.1; 0.0.0.0 for a pod's kubelet).",
    )
    parser.add_argument(
        "--health-timeout",
        type=health_timeout,
        default=DEFAULT_TIMEOUT,
        help="Seconds a loop may not tick, or Redis stay unreachable, before /livez "
        f"says 503 (default {DEFAULT_TIMEOUT:g}).",
    )


def health_server(probes: Probes, options: dict[str, Any], *, threaded: bool) -> HealthServer:
    """The probes' server on ``--health-host:--health-port``: served from a daemon thread
    (``threaded``) or left to the caller's loop; a port in use is a CommandError."""
    host, port = options["health_host"], options["health_port"]
    try:
        if threaded:
            return serve(probes, port, host)
        return HealthServer(probes, port, host)
    except OSError as exc:
        raise CommandError(f"cannot serve the health probes on {host}:{port}: {exc}") from exc
