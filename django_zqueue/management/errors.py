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
from ..connection import UNAVAILABLE_ERRORS
from ..exceptions import QueueUnavailable

R = TypeVar("R")


def explain_redis_error(exc: BaseException) -> str:
    """One line: what went wrong with Redis, and what to check."""
    if isinstance(exc, QueueUnavailable) and exc.__cause__ is not None:
        exc = exc.__cause__
    try:
        url = conf.redacted_url(conf.get_config().redis_url)
    except Exception:  # settings unreadable: the checks say why
        url = "ZQUEUE['REDIS_URL']"
    detail = (str(exc).strip() or type(exc).__name__).rstrip(".")
    if isinstance(exc, redis.AuthenticationError):
        return (
            f"Redis at {url} refused the login: {detail}. Check the user name and password "
            "in ZQUEUE['REDIS_URL']."
        )
    if isinstance(exc, redis.ReadOnlyError):
        return (
            f"Redis at {url} is a read-only replica: {detail}. Point ZQUEUE['REDIS_URL'] at "
            "the master."
        )
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return (
            f"Redis at {url} refused a command: {detail}. Give the ACL user of "
            "ZQUEUE['REDIS_URL'] the rules in docs/operations.md (A Redis user for "
            "django_zqueue)."
        )
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return (
            f"Redis at {url} is out of memory: {detail}. Raise maxmemory, or drain or purge "
            "queues (python manage.py zqueue_stats shows what they hold)."
        )
    return (
        f"cannot reach Redis at {url}: {detail}. Check that Redis is running there and that "
        "ZQUEUE['REDIS_URL'] points to it."
    )


#: what :func:`redis_errors` turns into a ``CommandError``
REDIS_ERRORS = (
    QueueUnavailable,
    *UNAVAILABLE_ERRORS,
    redis.exceptions.NoPermissionError,
    redis.exceptions.OutOfMemoryError,
)


def redis_errors(handle: Callable[..., R]) -> Callable[..., R]:
    """Decorate a command's ``handle``: Redis unreachable (or refusing, as a replica, an
    ACL or a full memory do) becomes one ``CommandError`` line instead of a traceback."""

    @functools.wraps(handle)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        try:
            return handle(*args, **kwargs)
        except REDIS_ERRORS as exc:
            raise CommandError(explain_redis_error(exc)) from exc

    return wrapper
