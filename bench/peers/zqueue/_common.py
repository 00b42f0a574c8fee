"""Shared by enqueue.py, process.py and latency.py: paths, arguments, Django setup.

Workers are ``testproject/manage.py zqueue_worker`` processes with
``DJANGO_SETTINGS_MODULE=bench.django_settings``; their autodiscovery imports
``bench.tasks``, which imports this folder's ``tasks`` (``ZQBENCH_TASK_MODULES``). The
queue and the job's INCR both go to the harness's Redis, db ``--db`` (BENCH_DB).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # the repository
sys.path[:0] = [p for p in (HERE, os.environ.get("BENCH_COMMON"), ROOT) if p]
os.chdir(HERE)

from benchlib import common_args, redis_url  # noqa: E402

ARGS = common_args()
os.environ["BENCH_DB"] = str(ARGS.db)
# inherited by the workers (benchlib.spawn copies os.environ)
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.django_settings"
os.environ["ZQUEUE_REDIS_URL"] = redis_url(ARGS.db)
os.environ["ZQUEUE_PREFIX"] = "zqbench"
os.environ["ZQBENCH_TASK_MODULES"] = "tasks"

import django  # noqa: E402

django.setup()

from tasks import noop  # noqa: E402, F401  (after django.setup)

MANAGE = os.path.join(ROOT, "testproject", "manage.py")


def worker_cmd(*args):
    """One ``zqueue_worker`` process tree; no arguments = the command's defaults
    (all configured queues, --concurrency 1, --prefetch 1, -v 1)."""
    return [sys.executable, MANAGE, "zqueue_worker", *args]


def queued():
    from django_zqueue import get_queue

    return get_queue("default").total_count()
