"""Redis errors in a management command: one ``CommandError`` line saying what to check.

Without it, a command run while Redis is down prints redis-py's whole chain of
tracebacks. Not a command module (Django skips modules outside ``commands/``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from django.core.management.base import CommandError

from .. import conf
from ..engine.redis.connection import UNAVAILABLE_ERRORS
from ..exceptions import CorruptKey, QueueUnavailable
from ..ops.doctor import redis_error_parts

R = TypeVar("R")


def explain_redis_error(exc: BaseException) -> str:
    """One line: what went wrong with Redis, and what to check."""
    problem, fix = redis_error_parts(exc)
    return f"{problem}. {fix[:1].upper()}{fix[1:]}."


#: what :func:`redis_errors` turns into a ``CommandError``
REDIS_ERRORS = (
    QueueUnavailable,
    *UNAVAILABLE_ERRORS,
    redis.exceptions.NoPermissionError,
    redis.exceptions.OutOfMemoryError,
)


def redis_errors(handle: Callable[..., R]) -> Callable[..., R]:
    """Decorate a command's ``handle``: Redis unreachable (or refusing, as a replica, an
    ACL or a full memory do), or a key of another type than its name says
    (:class:`CorruptKey`, with its fix), becomes one ``CommandError`` line instead of a
    traceback."""

    @functools.wraps(handle)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        try:
            return handle(*args, **kwargs)
        except REDIS_ERRORS as exc:
            raise CommandError(explain_redis_error(exc)) from exc
        except CorruptKey as exc:
            raise CommandError(str(exc)) from exc

    return wrapper


def configured_queues(option: str | None) -> list[str]:
    """The queues a command's ``--queues`` option names (comma-separated; None or empty:
    every configured queue); CommandError naming the unknown ones."""
    configured = conf.get_config().queues
    names = [n.strip() for n in option.split(",") if n.strip()] if option else list(configured)
    unknown = [n for n in names if n not in configured]
    if unknown:
        raise CommandError(f"unknown queue(s) {unknown}; configured: {sorted(configured)}")
    return names
