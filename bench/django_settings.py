"""Django settings for benchmark workers and clients: the test project's settings, plus
the ``bench`` app so that the worker's task autodiscovery imports :mod:`bench.tasks`.

Used as ``DJANGO_SETTINGS_MODULE=bench.django_settings`` with ``testproject/manage.py``;
the Redis URL and key prefix come from ``ZQUEUE_REDIS_URL`` / ``ZQUEUE_PREFIX`` as usual.
"""

import os

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS, ZQUEUE

INSTALLED_APPS = [*INSTALLED_APPS, "bench"]

# Name our connections after the run's prefix (CLIENT SETNAME), so that on a shared Redis
# the bench counts only its own script calls in SLOWLOG.
ZQUEUE = {
    **ZQUEUE,
    "CONNECTION_OPTIONS": {
        **ZQUEUE.get("CONNECTION_OPTIONS", {}),
        "client_name": os.environ.get("ZQUEUE_PREFIX", "zq"),
    },
}

# ZQUEUE_BENCH_KEEP_FINISHED=N: the default queue keeps N finished jobs in its history
# (keep_finished; 0 keeps none), to measure what the history costs
_keep = os.environ.get("ZQUEUE_BENCH_KEEP_FINISHED")
if _keep is not None:
    ZQUEUE["QUEUES"] = {
        **ZQUEUE["QUEUES"],
        "default": {**ZQUEUE["QUEUES"].get("default", {}), "keep_finished": int(_keep)},
    }
