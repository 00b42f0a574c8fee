"""Input checks of the queue core: each returns the value as the scripts take it, or
raises :class:`~django_zqueue.exceptions.InvalidArgument` (a ``ValueError``) before
anything is written."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from ... import conf
from ...conf import bounds
from ...exceptions import InvalidArgument

#: a tag is 1..MAX_TAG_BYTES bytes of UTF-8
MAX_TAG_BYTES = bounds.MAX_TAG_BYTES


def tag(value: object) -> str:
    if type(value) is str and 0 < len(value) <= MAX_TAG_BYTES // 4:
        return value  # at most 4 bytes of UTF-8 per character: within bounds
    if not isinstance(value, str):
        raise InvalidArgument(f"tag must be a str, not {type(value).__name__}")
    size = len(value.encode("utf-8"))
    if size == 0 or size > MAX_TAG_BYTES:
        raise InvalidArgument(f"tag must be 1 to {MAX_TAG_BYTES} bytes of UTF-8, got {size}")
    return value


def priority(value: object) -> int:
    if type(value) is int and conf.PRIORITY_MIN <= value <= conf.PRIORITY_MAX:
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(
            f"priority must be an int in [{conf.PRIORITY_MIN}, {conf.PRIORITY_MAX}], got {value!r}"
        )
    if not conf.PRIORITY_MIN <= value <= conf.PRIORITY_MAX:
        raise InvalidArgument(
            f"priority must be in [{conf.PRIORITY_MIN}, {conf.PRIORITY_MAX}], got {value}"
        )
    return value


def score(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"score must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(f"score must be finite, got {value!r}")
    if abs(value) > bounds.MAX_EXACT:
        raise InvalidArgument(f"score must be within ±2**53 to be exact, got {value!r}")
    return float(value)


def seconds(value: object, what: str) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{what} must be seconds (int/float) or a timedelta, got {value!r}")
    if not math.isfinite(value):
        raise InvalidArgument(f"{what} must be finite, got {value!r}")
    return float(value)


def max_retries(value: object) -> int:
    if type(value) is int and 0 <= value <= bounds.MAX_RETRIES:
        return value
    problem = bounds.max_retries_problem(value)
    if problem or not isinstance(value, int):
        raise InvalidArgument(problem or f"max_retries must be an int, got {value!r}")
    return value


def visibility_timeout_ms(value: object) -> int:
    secs = seconds(value, "visibility_timeout")
    problem = bounds.visibility_timeout_problem(secs)
    if problem:
        raise InvalidArgument(problem)
    return int(secs * 1000)


def horizon(secs: float, what: str) -> float:
    """``secs`` (a wait from now), refused beyond the horizon (``bounds.MAX_DELAY``)."""
    problem = bounds.delay_problem(secs, what)
    if problem:
        raise InvalidArgument(problem)
    return secs


def when(delay: object, run_at: object) -> tuple[int | None, int | None]:
    """(delay_ms, run_at_ms) of a job; None means not given (a delay under 1 ms is none)."""
    if delay is None and run_at is None:
        return None, None
    if delay is not None and run_at is not None:
        raise InvalidArgument("give delay or run_at, not both")
    if delay is not None:
        ms = horizon(seconds(delay, "delay"), "delay") * 1000
        return (int(ms) if ms >= 1 else None), None
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise InvalidArgument(f"run_at must be a datetime, got {run_at!r}")
        if timezone.is_naive(run_at):
            if settings.USE_TZ:
                raise InvalidArgument(
                    "run_at is a naive datetime while USE_TZ = True; pass an aware datetime"
                )
            run_at = timezone.make_aware(run_at, timezone.get_default_timezone())
        horizon(run_at.timestamp() - time.time(), "run_at")
        return None, int(run_at.timestamp() * 1000)
    return None, None
