"""What the doctor's parts share: its thresholds and how it words counts and ages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils.translation import ngettext

from ... import conf
from ...conf.redis_url import redacted_url
from ...engine.keycheck import Finding as Finding
from ...engine.keycheck import Level as Level
from ...web.humanize import count, duration

if TYPE_CHECKING:
    pass


#: (an embedded scanner passes every 2 s, ``zqueue_scanner`` every 1 s)
SCANNER_SLACK_MS = 30_000
#: a periodic schedule whose next tick is this late is one no scanner fires
SCHEDULE_SLACK_MS = 60_000
#: worker threads seen within this many seconds count as live (Queue.live_threads)
LIVE_WITHIN = 30.0
#: clock skew between this host and Redis: a warning from here, an error from CLOCK_ERROR
CLOCK_WARNING_MS = 1_000
CLOCK_ERROR_MS = 30_000
MIN_REDIS = (7, 0)


def _ago(ms: float) -> str:
    """Milliseconds as words (:func:`django_zqueue.web.humanize.duration`)."""
    return duration(ms / 1000)


def _count(n: int, singular: str, plural: str) -> str:
    """``ngettext(singular, plural, n)``, each with ``%(n)s``: the count, with the
    locale's thousands separator."""
    return ngettext(singular, plural, n) % {"n": count(n)}


def redis_error_parts(exc: BaseException) -> tuple[str, str]:
    """(what went wrong with Redis, what to check) for an error of redis-py, or a
    :class:`~django_zqueue.exceptions.QueueUnavailable` wrapping one."""
    import redis

    from ...exceptions import QueueUnavailable

    if isinstance(exc, QueueUnavailable) and exc.__cause__ is not None:
        exc = exc.__cause__
    try:
        url = redacted_url(conf.get_config().redis_url)
    except Exception:  # settings unreadable: the checks say why
        url = "ZQUEUE['REDIS_URL']"
    detail = (str(exc).strip() or type(exc).__name__).rstrip(".")
    if isinstance(exc, redis.AuthenticationError):
        return (
            f"Redis at {url} refused the login: {detail}",
            "check the user name and password in ZQUEUE['REDIS_URL']",
        )
    if isinstance(exc, redis.ReadOnlyError):
        return (
            f"Redis at {url} is a read-only replica: {detail}",
            "point ZQUEUE['REDIS_URL'] at the master",
        )
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return (
            f"Redis at {url} refused a command: {detail}",
            "give the ACL user of ZQUEUE['REDIS_URL'] the rules in docs/operations.md "
            "(A Redis user for django_zqueue)",
        )
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return (
            f"Redis at {url} is out of memory: {detail}",
            "raise maxmemory, or drain or purge queues (python manage.py zqueue_stats shows "
            "what they hold)",
        )
    return (
        f"cannot reach Redis at {url}: {detail}",
        "check that Redis is running there and that ZQUEUE['REDIS_URL'] points to it",
    )
