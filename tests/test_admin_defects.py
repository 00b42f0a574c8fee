"""Defects of the admin pages, each pinned by a test (with Django's test client, against a
real Redis): the Ready tab and pause/resume of a queue with ``priority_mode="aging"``,
the In-flight rows' checkboxes, the waiting job's state badge, and the contrast of the
notes in caption bars (computed from the CSS, tests/css.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from django_zqueue import get_queue
from django_zqueue.admin import dashboard, dashboard_lists

from .css import contrast, resolve, rules
from .test_admin import BASE, client_for, make_user, project, superuser  # noqa: F401

pytestmark = pytest.mark.django_db


def cells(row: str) -> int:
    """The number of cells (td and th) of a table row's HTML."""
    return len(re.findall(r"<t[dh][\s>]", row))


def rows_of(page: str) -> tuple[str, list[str]]:
    """The header row and the body rows of the page's job list."""
    table = page.split('id="result_list"', 1)[1].split("</table>", 1)[0]
    head = table.split("<thead>", 1)[1].split("</thead>", 1)[0]
    body = table.split("<tbody", 1)[1].split("</tbody>", 1)[0]
    return head, re.findall(r"<tr>.*?</tr>", body, re.S)


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
        r = c.post(f"{BASE}q/reports/pause/", {"op": op, "confirm": "yes"}, follow=True)
        assert r.status_code == 200 and r.redirect_chain[-1][0].endswith("/q/reports/")
    assert not q.is_paused()
    assert c.get(f"{BASE}q/reports/job/", {"id": tags[0]}).status_code == 200


def test_in_flight_rows_have_a_checkbox_and_their_cells_line_up(
    project: dict[str, Any],  # noqa: F811
) -> None:
    q = get_queue("default")
    tags = [q.publish({"task": "t.run", "args": [i]}) for i in range(2)]
    q.claim(2, consumer="host:1:w/0")
    c = client_for(make_user("canceller", "view_queue", "manage_jobs"))
    page = c.get(f"{BASE}q/default/", {"state": "leased"}).content.decode()
    head, rows = rows_of(page)
    assert len(rows) == 2 and all(cells(row) == cells(head) for row in rows)
    boxes = re.findall(r'<input type="checkbox" name="tags" value="([^"]+)"', page)
    assert sorted(boxes) == sorted(tags)
    # tick one, cancel it: the running job is cancelled, the other runs on
    r = c.post(
        f"{BASE}q/default/do/cancel/",
        {"tags": [boxes[0]], "confirm": "yes", "next": f"{BASE}q/default/?state=leased"},
    )
    assert r.status_code == 302 and r["Location"].endswith("state=leased")
    assert q.state(boxes[0]) is None and q.state(boxes[1]) == "leased"
    # without the permission: no checkbox, and the cells still line up
    onlooker = client_for(make_user("onlooker", "view_queue"))
    page = onlooker.get(f"{BASE}q/default/", {"state": "leased"}).content.decode()
    head, rows = rows_of(page)
    assert 'name="tags"' not in page and cells(rows[0]) == cells(head)


@pytest.mark.parametrize("state", ["ready", "delayed", "waiting", "leased", "dead"])
def test_every_tab_has_as_many_cells_per_row_as_headers(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
    state: str,
) -> None:
    q = get_queue("default")
    parent = q.publish({"task": "t.parent"}, tag="parent")
    q.publish({"task": "t.kid"}, depends_on=[parent])
    q.publish({"task": "t.later"}, delay=600)
    q.publish({"task": "t.doomed"}, tag="doomed", priority=-5)
    q.publish({"task": "t.run"}, tag="run", priority=-9)
    for m in q.claim(3)[0]:
        if m.tag == "doomed":
            q.nack(m, "RuntimeError: boom", dead=True)
        elif m.tag == "parent":
            q.release(m)
    page = superuser.get(f"{BASE}q/default/", {"state": state}).content.decode()
    head, rows = rows_of(page)
    assert rows and all(cells(row) == cells(head) for row in rows), state


def test_a_waiting_workflow_job_page_names_its_state(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
) -> None:
    """The badge names the state, and has a colour of its own: in the caption bar a
    badge without one took the bar's white text on its white background."""
    q = get_queue("default")
    kid = q.publish("k", depends_on=[q.publish("p")])
    page = superuser.get(f"{BASE}q/default/job/", {"id": kid}).content.decode()
    badges = re.findall(r'<span class="zq-state zq-state-(\w+)">([^<]*)</span>', page)
    assert badges[:2] == [("waiting", "waiting")] * 2  # the caption and the State row
    assert all(cls == text for cls, text in badges)  # the parent's too
    for theme in ("light", "dark"):
        back = resolve(rules(".zq-state")["background"], theme)
        for state in ("ready", "delayed", "waiting", "leased", "dead", "orphan"):
            colour = resolve(rules(f".zq-state-{state}")["color"], theme)
            assert contrast(colour, back) >= 4.5, (theme, state, colour, back)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_notes_in_a_caption_or_heading_bar_are_readable(theme: str) -> None:
    """A ``.quiet`` note in a caption or a module's heading sits on the bar's colour
    (``--header-bg``): at least WCAG AA's 4.5:1 (the admin's quiet grey is 1.2:1)."""
    bar = resolve("var(--header-bg)", theme)
    for selector in (".zq caption .quiet", ".zq h2 .quiet"):
        colour = resolve(rules(selector)["color"], theme)
        assert contrast(colour, bar) >= 4.5, (selector, colour, bar)


@pytest.mark.parametrize("state", ["ready", "delayed", "waiting", "leased", "dead"])
def test_a_row_that_left_its_state_spans_the_rest_of_the_row(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    state: str,
) -> None:
    """A job that left its state between the page's two reads is one cell after its id,
    as wide as the columns it has no values for."""
    q = get_queue("default")
    parent = q.publish({"task": "t.parent"}, tag="parent")
    q.publish({"task": "t.kid"}, depends_on=[parent])
    q.publish({"task": "t.later"}, delay=600)
    q.publish({"task": "t.doomed"}, tag="doomed", priority=-5)
    q.publish({"task": "t.run"}, tag="run", priority=-9)
    for m in q.claim(3)[0]:
        if m.tag == "doomed":
            q.nack(m, "RuntimeError: boom", dead=True)
        elif m.tag == "parent":
            q.release(m)
    monkeypatch.setattr(
        dashboard_lists,
        "job_row",
        lambda listing, i, job: dashboard.JobRow(job.tag, listing.state, job.score, gone=True),
    )
    page = superuser.get(f"{BASE}q/default/", {"state": state}).content.decode()
    head, rows = rows_of(page)
    assert rows and "left this state" in rows[0]
    spans = [int(n) for n in re.findall(r'colspan="(\d+)"', rows[0])]
    assert cells(rows[0]) - len(spans) + sum(spans) == cells(head), state
