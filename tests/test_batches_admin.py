"""A batch's progress in the admin: the page of its ``on_complete`` callback says how many
members ended of how many (failures included)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from django_zqueue import get_queue, optional
from django_zqueue.engine.records.links import FlowJob, Ref, Resolution

from .test_admin import BASE, project, superuser  # noqa: F401

pytestmark = pytest.mark.django_db


def test_the_callback_page_shows_members_ended_of_total(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
) -> None:
    q = get_queue("default")
    a, b, c = q.publish("a"), q.publish("b"), q.publish("c")
    callback = FlowJob(
        q.prepare("cb", "cb"),
        (Ref("default", a), Ref("default", b), Ref("default", c)),
        any_end=True,
    )
    assert q.engine.run(q.engine._shard_for("cb").wf_publish([callback])) == []
    # member b was deleted: its end, as the dispatcher applies it
    q.engine.run(q.engine._shard_for("cb").wf_resolve([Resolution("cb", 2, "0", "deleted", b)]))
    page = superuser.get(f"{BASE}q/default/job/", {"id": "cb"}).content.decode()
    assert "Batch callback: 1 of 3 members ended (succeeded or not)." in page
    # a job with an optional parent only is no batch callback: the usual words
    kid = q.publish("k", depends_on=[optional(a)])
    page = superuser.get(f"{BASE}q/default/job/", {"id": kid}).content.decode()
    assert "Needs 1 parent to succeed; 0 did." in page
