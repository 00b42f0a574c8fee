"""Settings for running Django's own tests/tasks suite against ZQueueBackend.

Django's test package ``tasks`` (fetched by tests/conformance/fetch.py, never committed)
must be importable: $ZQUEUE_DJANGO_TESTS (set by .ci/run) names the folder holding it.
"""

import os
import sys
import uuid

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS, ZQUEUE

from .alias import install

BACKPORT = install()  # Django 5.2: django.tasks -> the django-tasks backport

sys.path.insert(0, os.environ["ZQUEUE_DJANGO_TESTS"])  # the folder holding Django's "tasks"
INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "django.contrib.admin"] + ["tasks"]
USE_TZ = True
# The queues' own options are the defaults (max_retries 3): the backend's default is
# Django's semantics (one attempt), whatever the queue says.
ZQUEUE = {
    **ZQUEUE,
    "PREFIX": f"zqconf-{uuid.uuid4().hex[:8]}",
    "QUEUES": {
        name: {}
        for name in ("default", "queue_1", "queue-1", "queue-2", "high", "emails", "reports")
    },
}
TASKS = {
    "default": {
        "BACKEND": "tests.conformance.backend.ConformanceBackend",
        "QUEUES": [],
    }
}
