"""A queue page's charts over 1 hour, 24 hours and 7 days (``?range=``,
admin/chart_ranges.py), through Django's test client against a real Redis: the switcher's
links (no JavaScript), a point per minute / 10 minutes / hour with its value on hover
(an SVG ``<title>``), a bucket no roll-up wrote drawn as a gap, never a zero."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from django.test import Client

from django_zqueue import get_queue
from django_zqueue.admin import chart_ranges

from .test_admin_charts import BASE, project, redis_minute, viewer  # noqa: F401 - fixtures
from .test_rollup import fill_minutes

pytestmark = pytest.mark.django_db


def titles(html: str, chart: int) -> list[str]:
    """The hover texts of the ``chart``-th chart of the range section."""
    section = html.split('id="zq-range-charts"', 1)[1]
    figure = section.split("<figure", 3)[chart + 1].split("</figure>", 1)[0]
    return re.findall(r"<title>([^<]*)</title>", figure)


def test_the_switcher_links_each_range_and_marks_the_shown_one(
    viewer: Client,  # noqa: F811
    project: dict[str, Any],  # noqa: F811
) -> None:
    get_queue("default").publish_many(range(3))
    for asked, shown in (("", "1h"), ("24h", "24h"), ("7d", "7d"), ("nonsense", "1h")):
        r = viewer.get(f"{BASE}q/default/?state=dead&range={asked}")
        assert r.status_code == 200
        links = r.context["ranges"]
        assert [link["label"] for link in links] == ["1 hour", "24 hours", "7 days"]
        assert [link["current"] for link in links] == [k == shown for k in ("1h", "24h", "7d")]
        assert all("state=dead" in link["url"] for link in links)  # the tab is kept
        html = r.content.decode()
        assert html.count('aria-current="true"') == 1
        depth, per = r.context["range_charts"]
        assert depth.span == per.span == chart_ranges.RANGES[shown].span
        assert [label for _, label in depth.xticks] == {
            "1h": ["-45 min", "-30 min", "-15 min", "now"],
            "24h": ["-18 h", "-12 h", "-6 h", "now"],
            "7d": ["-6 d", "-5 d", "-4 d", "-3 d", "-2 d", "-1 d", "now"],
        }[shown]
        assert (
            per.title
            == {
                "1h": "Jobs per minute",
                "24h": "Jobs per 10 minutes",
                "7d": "Jobs per hour",
            }[shown]
        )


def test_24_hours_show_the_rolled_up_buckets_with_their_values_and_gaps(
    viewer: Client,  # noqa: F811
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    q = get_queue("default")
    now = redis_minute(redis_client)
    minutes = fill_minutes(q, redis_client, now, range(1, 40))
    q.engine.stats.roll_up()
    r = viewer.get(f"{BASE}q/default/?range=24h")
    if redis_minute(redis_client) != now:
        pytest.skip("the minute turned")
    depth, per = r.context["range_charts"]
    enqueued = per.lines[0]
    assert len(enqueued.segments) == 1  # the rolled-up hour: one run, the day before: gap
    rolled = sorted({m // 10 for m in minutes if m // 10 * 10 >= now - 63})
    assert len(enqueued.samples) == len(rolled)
    totals = [sum(v["e"] for m, v in minutes.items() if m // 10 == b) for b in rolled]
    assert [int(t.rsplit(" ", 1)[1].replace(",", "")) for *_, t in enqueued.samples] == totals
    html = r.content.decode()
    hover = titles(html, 1)
    assert len(hover) == 3 * len(rolled)  # enqueued, acked, failed at each bucket
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d0 \S+: enqueued \d", hover[0]), hover[0]
    assert hover[len(rolled) - 1].endswith(f"enqueued {totals[-1]}")
    assert "over the last 24 hours" in html
    # the depth: the last sample of each bucket, the current one the live count
    assert depth.lines[0].latest == q.counts()["ready"]


def test_7_days_of_a_queue_never_rolled_up_are_gaps_not_zeros(
    viewer: Client,  # noqa: F811
    project: dict[str, Any],  # noqa: F811
) -> None:
    q = get_queue("default")
    q.publish_many(range(5))
    r = viewer.get(f"{BASE}q/default/?range=7d")
    depth, per = r.context["range_charts"]
    assert all(not line.samples for line in per.lines)  # no bucket: no point at all
    assert [t for *_, t in depth.lines[0].samples][-1].endswith("ready 5")  # now: live
    assert "no activity in the last 7 days" in r.content.decode()
