"""Small texts an operator and a waiting person read: the position widget's count with
the locale's thousands separator and no "60% 60%" (the progress bar carries no text of
its own), the admin's progress cells likewise, and an interval schedule as "every 300 s",
not "every 300.0 s"."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.template import Context, Template
from django.utils import translation

from django_zqueue import get_queue, read, schedules
from django_zqueue.read.schedules import every_text
from django_zqueue.tasks.watch import Position
from django_zqueue.web import position

from .test_admin import BASE, client_for, make_user, project  # noqa: F401


def test_the_count_ahead_has_the_locales_separator() -> None:
    pos = Position("waiting", 99_865, None, 0.0)
    assert position.describe(pos)[0] == "99,865 jobs ahead of yours."
    with translation.override("de"):
        assert position.describe(pos)[0].startswith("99.865 ")
    assert position.describe(Position("waiting", 1, None, 0.0))[0] == "1 job ahead of yours."


def test_every_text() -> None:
    assert every_text(300.0) == "every 300 s" and every_text(90) == "every 90 s"
    assert every_text(0.5) == "every 0.5 s" and every_text("x") == "every x s"
    assert every_text(None) == "every None s"  # a definition without one: shown as stored


def test_the_widget_progress_bar_has_no_text_of_its_own() -> None:
    pos = Position("running", None, None, 0.0, progress=60)
    line, eta = position.describe(pos)
    html = Template("{% include 'django_zqueue/position_widget.html' %}").render(
        Context({"pos": pos, "line": line, "eta": eta, "url": "/x/"})
    )
    text = re.sub(r"<[^>]+>", " ", html)
    assert text.count("60%") == 1 and 'value="60"' in html


@pytest.mark.django_db
def test_admin_progress_and_schedules_texts(project: dict[str, Any]) -> None:  # noqa: F811
    q = get_queue("default")
    tag = q.publish({"task": "t.slow"})
    (msg,), _ = q.claim(1, consumer="host:1:w")
    q.touch(msg, progress=0.6)
    schedules.add("tidy", "testproject.demo.tasks.record", every=300.0, args=["l", 1])
    c = client_for(make_user("v", "view_queue"))
    for url in (f"{BASE}q/default/?state=leased", f"{BASE}q/default/job/?id={tag}"):
        html = c.get(url).content.decode()
        text = re.sub(r"<[^>]+>", " ", html)
        assert "60%" in text and "60% 60%" not in re.sub(r"\s+", " ", text), url
    assert "every 300 s" in c.get(f"{BASE}schedules/").content.decode()
    rows = read.schedules([q.engine])
    assert "every 300 s" in [r.every for r in rows]
    out = io.StringIO()
    call_command("zqueue_schedules", "list", stdout=out)
    assert "every 300 s" in out.getvalue() and "300.0" not in out.getvalue()


@pytest.mark.django_db
def test_a_job_the_widget_cannot_find_is_not_called_done(
    zqueue_settings: dict[str, Any],
) -> None:
    from django_zqueue.tasks import watch

    watch._watches.clear()
    q = get_queue("default")
    finished, deleted = q.publish({"task": "t"}), q.publish({"task": "t"})
    (msg,), _ = q.claim(1)
    q.ack(msg, None)
    q.delete(deleted)
    got = watch.read_positions(q, [finished, deleted, "never-there"])
    assert got[finished].status == "done"  # in the history of finished jobs
    assert got[deleted].status == "gone" and got["never-there"].status == "gone"
    assert position.describe(got[deleted])[0].startswith("It is no longer in the queue")
    assert "gone" in watch.FINAL
    watch._watches.clear()
