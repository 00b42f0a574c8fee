"""Counts, times and durations as people read them (admin pages, the position widget,
``zqueue_doctor``), through Django's formatting and translation: counts with the
locale's thousands separator (``django.contrib.humanize``'s ``intcomma``, which needs
no entry in ``INSTALLED_APPS``), durations from ``django.utils.timesince`` and
``ngettext``, times in the current time zone with its name, to the second.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.contrib.humanize.templatetags.humanize import intcomma
from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import ngettext

#: a fixed instant to measure durations from: ``timesince`` counts calendar months and
#: years, so a duration must not depend on today's date
_EPOCH = datetime(2001, 1, 1, tzinfo=UTC)


def count(n: int | None) -> str:
    """An integer with the locale's thousands separator (``12,345`` in English); ''
    for None."""
    return "" if n is None else str(intcomma(n))


_CENTURY = 100 * 365.25 * 86400


def duration(seconds: float | None) -> str:
    """Seconds as words: ``850 milliseconds``, ``90 seconds`` (up to two minutes), then
    ``3 minutes``, ``2 hours, 4 minutes``, ``3 days, 4 hours`` (the two largest units,
    from ``django.utils.timesince``); '' for None. Negative values are shown as their
    absolute value."""
    if seconds is None or seconds != seconds:  # None or NaN
        return ""
    s = abs(seconds)
    if s < 1:
        ms = int(s * 1000)
        return ngettext("%(n)s millisecond", "%(n)s milliseconds", ms) % {"n": ms}
    if s < 120:
        n = int(s)
        return ngettext("%(n)s second", "%(n)s seconds", n) % {"n": n}
    # beyond a century (a lease deadline of +inf read as the last day there is): a century
    text = timesince(_EPOCH - timedelta(seconds=min(s, _CENTURY)), _EPOCH)
    return text.replace("\xa0", " ")


def when(dt: datetime | None) -> str:
    """``YYYY-MM-DD HH:MM:SS ZONE`` in the current time zone ('' for None): one format
    for every time the admin shows, to the second, with the zone's name."""
    return "" if dt is None else timezone.localtime(dt).strftime("%Y-%m-%d %H:%M:%S %Z")


def minute(dt: datetime) -> str:
    """``HH:MM ZONE``: a minute of today's charts, in the current time zone."""
    return timezone.localtime(dt).strftime("%H:%M %Z")
