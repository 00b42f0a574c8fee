"""Bounds of what becomes a lease, a delay or a count (docs/settings.md, "Bounds").

``lua/_bounds.lua`` holds the same numbers and the scripts refuse what lies outside them
(``tests/test_scripts.py`` checks they agree). The ``*_problem`` functions say why a
value is out of bounds (or None); :mod:`django_zqueue.conf` reports them for the settings,
:func:`check_job_options` and :mod:`django_zqueue.validate` raise them for calls.
"""

from __future__ import annotations

import math
from typing import Protocol

from .exceptions import InvalidArgument

MIN_VISIBILITY_TIMEOUT = 1  # seconds: a shorter lease expires under a running job
MAX_VISIBILITY_TIMEOUT = 7 * 86400  # seconds: a longer one hides a dead worker's job for days
MAX_RETRIES = 1000
MAX_DELAY = 3650 * 86400  # seconds: the horizon of delay, run_at and a retry's wait
MAX_BACKOFF = 7 * 86400  # seconds: retry_backoff base and max
#: numbers beyond 2**53 lose precision as doubles (scores, Lua numbers)
MAX_EXACT = 2**53


class BackoffValues(Protocol):
    """What :func:`backoff_problem` reads of a retry backoff (:class:`conf.Backoff`)."""

    @property
    def base(self) -> float: ...
    @property
    def max(self) -> float: ...
    @property
    def jitter(self) -> float: ...


def is_number(v: object) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def is_int(v: object) -> bool:
    """An int (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


def visibility_timeout_problem(v: object) -> str | None:
    """Why ``v`` (seconds) cannot be a visibility timeout, or None."""
    lo, hi = MIN_VISIBILITY_TIMEOUT, MAX_VISIBILITY_TIMEOUT
    if not is_number(v) or not lo <= v <= hi:  # type: ignore[operator]
        return f"visibility_timeout must be a number of seconds in [{lo}, {hi}] (7 days), got {v!r}"
    return None


def max_retries_problem(v: object) -> str | None:
    """Why ``v`` cannot be a ``max_retries``, or None."""
    if not is_int(v) or not 0 <= v <= MAX_RETRIES:  # type: ignore[operator]
        return (
            f"max_retries must be an integer in [0, {MAX_RETRIES}] (retries after the first "
            f"run; 0: never retried), got {v!r}"
        )
    return None


def backoff_problem(b: BackoffValues) -> str | None:
    """Why ``b`` cannot be a retry backoff, or None."""
    for what, v in (("base", b.base), ("max", b.max)):
        if not is_number(v) or not 0 <= v <= MAX_BACKOFF:
            return f"retry_backoff {what} must be in [0, {MAX_BACKOFF}] seconds (7 days), got {v!r}"
    if not is_number(b.jitter) or not 0 <= b.jitter <= 1:
        return f"retry_backoff jitter must be in [0, 1], got {b.jitter!r}"
    return None


def delay_problem(seconds: float, what: str = "delay") -> str | None:
    """Why a wait of ``seconds`` from now lies beyond the horizon, or None."""
    if seconds > MAX_DELAY:
        return (
            f"{what} is {seconds:.0f} s from now, beyond the horizon of {MAX_DELAY} s (3650 days)"
        )
    return None


def check_job_options(
    owner: str,
    *,
    max_retries: object = None,
    visibility_timeout: object = None,
    retry_backoff: BackoffValues | None = None,
) -> None:
    """Raise :class:`InvalidArgument` (``owner``: what the values belong to) for a value
    out of bounds; None means "not given"."""
    problems = [
        max_retries_problem(max_retries) if max_retries is not None else None,
        visibility_timeout_problem(visibility_timeout) if visibility_timeout is not None else None,
        backoff_problem(retry_backoff) if retry_backoff is not None else None,
    ]
    found = [p for p in problems if p]
    if found:
        raise InvalidArgument(f"{owner}: {'; '.join(found)}")
