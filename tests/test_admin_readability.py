"""What the admin pages show, as people read it (test client, real Redis): counts with the
locale's thousands separator, one time format with the zone and no microseconds."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client, override_settings

from django_zqueue import get_queue
from django_zqueue.engine import records

from .test_admin import BASE, project, superuser  # noqa: F401

pytestmark = pytest.mark.django_db

#: a time as the admin shows it: to the second, then the zone's name
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z][A-Za-z0-9+-]*"


@pytest.fixture
def many(project: dict[str, Any]) -> list[str]:  # noqa: F811
    """1,234 ready jobs in "default", one of them in flight and one dead."""
    q = get_queue("default")
    tags = q.publish_many([{"task": "t.n", "args": [i]} for i in range(1236)])
    msgs = q.claim(2)[0]
    q.nack(msgs[1], "RuntimeError: boom", dead=True)
    return list(tags)


def test_counts_have_thousands_separators(many: list[str], superuser: Client) -> None:  # noqa: F811
    overview = superuser.get(BASE).content.decode()
    assert ">1,234</a>" in overview
    page = superuser.get(f"{BASE}q/default/").content.decode()
    assert '<span class="zq-badge">1,234</span>' in page
    assert "1\u201350 of 1,234 ready jobs" in page
    last = superuser.get(f"{BASE}q/default/", {"page": 25}).content.decode()
    assert '<td class="zq-num">1,200</td>' in last and "1,201\u20131,234 of 1,234" in last
    job = superuser.get(f"{BASE}q/default/job/", {"id": many[1233]}).content.decode()
    assert '<strong class="zq-rank">1,231</strong>' in job and "1,231 jobs ahead" in job
    with override_settings(LANGUAGE_CODE="de"):
        page = superuser.get(f"{BASE}q/default/").content.decode()
    assert '<span class="zq-badge">1.234</span>' in page


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_one_time_format_with_the_zone_and_no_microseconds(
    many: list[str],
    superuser: Client,  # noqa: F811
    zone: str,
) -> None:
    q = get_queue("default")
    q.publish({"task": "t.later"}, delay=600)
    with override_settings(TIME_ZONE=zone):
        pages = {
            "ready": superuser.get(f"{BASE}q/default/").content.decode(),
            "delayed": superuser.get(f"{BASE}q/default/", {"state": "delayed"}).content.decode(),
            "leased": superuser.get(f"{BASE}q/default/", {"state": "leased"}).content.decode(),
            "dead": superuser.get(f"{BASE}q/default/", {"state": "dead"}).content.decode(),
            "job": superuser.get(f"{BASE}q/default/job/", {"id": many[0]}).content.decode(),
        }
    name = {"UTC": "UTC", "Europe/Paris": "CE"}[zone]
    for state, html in pages.items():
        shown = re.findall(TIME, html)
        assert shown and all(name in t for t in shown), (state, shown)
        # no other shape of a time: nothing like 12:34:56.789012, nor a time without zone
        assert not re.search(r"\d\d:\d\d:\d\d\.\d", html), state
        bare = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?! [A-Z])", html)
        assert not bare, (state, bare)


def test_scores_are_shown_as_what_they_mean(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
) -> None:
    """A ready job's score is an order (a sequence in a priority band, or microseconds
    less a priority's worth): lists and pages show its position instead; a delayed
    job's score is when it runs, shown as a time."""
    q = get_queue("default")
    tags = [q.publish({"task": "t.n", "args": [i]}, priority=1 + i) for i in range(3)]
    later = q.publish({"task": "t.later"}, delay=600)
    scores = [records.score_text(q.score(t)) for t in tags]
    page = superuser.get(f"{BASE}q/default/").content.decode()
    assert ">Position</th>" in page and ">Score</th>" not in page
    assert all(s.startswith("-") and s not in page for s in scores)
    job = superuser.get(f"{BASE}q/default/job/", {"id": tags[0]}).content.decode()
    assert '<strong class="zq-rank">2</strong>' in job and scores[0] not in job
    get_queue("emails").publish({}, tag=later)  # one tag in two queues: a list of both
    found = superuser.get(f"{BASE}search/", {"q": later}).content.decode()
    assert ">Score</th>" not in found and re.search(f"runs at {TIME}", found)
    assert records.score_text(q.info(later).run_at.timestamp() * 1000) not in found
