"""Defects of the admin pages, each pinned by a test (with Django's test client, against a
real Redis): the Ready tab and pause/resume of a queue with ``priority_mode="aging"``."""

from __future__ import annotations

from typing import Any

import pytest

from django_zqueue import get_queue

from .test_admin import BASE, client_for, make_user, project  # noqa: F401

pytestmark = pytest.mark.django_db


def test_the_ready_tab_of_an_aging_queue_and_its_pause_and_resume(
    project: dict[str, Any],  # noqa: F811
) -> None:
    """testproject's ``reports`` queue orders by age plus priority: its ready scores are
    microseconds, not a time; the tab shows its jobs in line order, and pausing or
    resuming it lands on that tab."""
    q = get_queue("reports")
    assert q.options.priority_mode == "aging"
    tags = [q.publish({"task": "r.monthly", "args": [i]}, priority=i % 3) for i in range(5)]
    c = client_for(make_user("pauser", "view_queue", "manage_jobs"))
    r = c.get(f"{BASE}q/reports/")
    assert r.status_code == 200
    listed = [row.tag for row in r.context["page"].rows]
    assert sorted(listed) == sorted(tags) and [q.rank(t) for t in listed] == [0, 1, 2, 3, 4]
    for op in ("pause", "resume"):
        r = c.post(f"{BASE}q/reports/pause/", {"op": op}, follow=True)
        assert r.status_code == 200 and r.redirect_chain[-1][0].endswith("/q/reports/")
    assert not q.is_paused()
    assert c.get(f"{BASE}q/reports/job/", {"id": tags[0]}).status_code == 200
