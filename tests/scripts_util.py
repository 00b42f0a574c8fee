"""What a server that lost its scripts looks like: restarted without persistence, or a
replica promoted before the library reached it."""

from __future__ import annotations

from typing import Any

from redis.exceptions import ResponseError

from django_zqueue.engine.scripts import SCRIPT_NAMES
from django_zqueue.engine.scripts.source import library


def lose_scripts(client: Any) -> None:
    """``SCRIPT FLUSH``, and delete this package's Functions library (only this one: the
    shared server may hold others')."""
    client.script_flush()
    try:
        client.function_delete(library(SCRIPT_NAMES).name)
    except ResponseError as exc:
        if "not found" not in str(exc).lower():  # else: it was not loaded
            raise
