"""The numbers of the fault suite's summary lines, safe on any data: a summary is a report,
never a check, so an empty or odd list reads ``n/a`` instead of failing a run whose checks
all passed (``statistics.median([])`` raises)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence

NONE = "n/a"


def _finite(values: Iterable[object]) -> list[float]:
    return [
        float(v)
        for v in values
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    ]


def _fmt(values: Iterable[object], how: Callable[[list[float]], float], digits: int) -> str:
    got = _finite(values)
    if not got:
        return NONE
    try:
        return f"{how(got):.{digits}f}"
    except (ValueError, ArithmeticError, statistics.StatisticsError):
        return NONE


def median(values: Iterable[object], digits: int = 2) -> str:
    """The median of the finite numbers of ``values``, formatted; ``n/a`` for none."""
    return _fmt(values, statistics.median, digits)


def maximum(values: Iterable[object], digits: int = 2) -> str:
    """The largest finite number of ``values``, formatted; ``n/a`` for none."""
    return _fmt(values, max, digits)


def nth(ordered: Sequence[float], fraction: float) -> float | None:
    """The value at ``fraction`` (0-1) of an ascending list; None when it is empty."""
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, int(len(ordered) * fraction)))]


def ms(value: float | None) -> str:
    """Seconds as milliseconds with two decimals; ``n/a`` for None or a non-number."""
    return NONE if value is None or not math.isfinite(value) else f"{value * 1000:.2f}"
