"""The job page's "Send event" form for a durable job that waits for an event
(admin_durable.py): POST only, CSRF, ``manage_jobs`` and ``ADMIN_ACTIONS`` checked, a
refusal shown with nothing written."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.test import Client, override_settings

from django_zqueue import conf, durable, get_queue
from django_zqueue.exceptions import Parked
from django_zqueue.queue import durable_calls as dc
from django_zqueue.tasks.context import JobContext, set_current_job

from .conftest import snapshot
from .test_admin import BASE, client_for, make_user, project  # noqa: F401

pytestmark = pytest.mark.django_db


def waiting_job() -> str:
    """A job of the default queue parked in ``durable.wait_for("approved")``."""
    q = get_queue("default")
    tag = q.publish({"task": "x"})
    (msg,), _ = q.claim(1, "c")
    set_current_job(JobContext(msg, q, "x"))
    try:
        with pytest.raises(Parked):
            durable.wait_for("approved", timeout=3600)
    finally:
        set_current_job(None)
    return tag


def signal_url(queue: str = "default") -> str:
    return f"{BASE}q/{queue}/signal/"


def test_an_operator_sends_the_event_and_the_job_runs_again(
    project: dict[str, Any],  # noqa: F811
) -> None:
    tag = waiting_job()
    c = client_for(make_user("op", "view_queue", "manage_jobs"))
    page = c.get(f"{BASE}q/default/job/?id={tag}").content.decode()
    assert 'id="zq-signal"' in page and signal_url() in page
    assert c.get(signal_url()).status_code == 405  # POST only
    r = c.post(
        signal_url(), {"id": tag, "name": "approved", "payload": '{"by": "ops"}'}, follow=True
    )
    assert "Event approved delivered to job" in r.content.decode()
    q = get_queue("default")
    (msg,), _ = q.claim(1, "c")  # due now (it was parked until the timeout)
    assert msg.tag == tag and dc.parked(q, tag) is None
    set_current_job(JobContext(msg, q, "x"))
    try:
        assert durable.wait_for("approved", timeout=3600) == {"by": "ops"}
    finally:
        set_current_job(None)
    # a second event of the same name is refused, in one line, nothing written
    r = c.post(signal_url(), {"id": tag, "name": "approved", "payload": "1"}, follow=True)
    assert "Nothing sent:" in r.content.decode()


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"name": "approved", "payload": "{not json"}, "the payload is not JSON"),
        ({"name": "", "payload": ""}, "Nothing sent:"),
        ({"name": "approved", "payload": "", "id": "no-such-job"}, "Nothing sent:"),
    ],
)
def test_a_refused_event_writes_nothing(
    project: dict[str, Any],  # noqa: F811
    redis_client: redis.Redis,
    prefix: str,
    form: dict[str, str],
    says: str,
) -> None:
    tag = waiting_job()
    before = snapshot(redis_client, prefix)
    c = client_for(make_user("op", "view_queue", "manage_jobs"))
    r = c.post(signal_url(), {"id": tag, **form}, follow=True)
    assert says in r.content.decode()
    assert snapshot(redis_client, prefix) == before
    assert get_queue("default").state(tag) == "delayed"


def test_the_form_needs_manage_jobs_csrf_and_admin_actions(
    project: dict[str, Any],  # noqa: F811
) -> None:
    tag = waiting_job()
    viewer = client_for(make_user("viewer", "view_queue", "view_payload"))
    assert 'id="zq-signal"' not in viewer.get(f"{BASE}q/default/job/?id={tag}").content.decode()
    assert viewer.post(signal_url(), {"id": tag, "name": "approved"}).status_code == 403
    strict = client_for(make_user("op", "view_queue", "manage_jobs"), enforce_csrf_checks=True)
    assert strict.post(signal_url(), {"id": tag, "name": "approved"}).status_code == 403
    with override_settings(ZQUEUE={**project, "ADMIN_ACTIONS": False}):
        conf.reset()
        try:
            op = Client()
            op.force_login(make_user("op2", "view_queue", "manage_jobs"))
            assert op.post(signal_url(), {"id": tag, "name": "approved"}).status_code == 404
        finally:
            conf.reset()
    assert get_queue("default").state(tag) == "delayed"  # nothing delivered
