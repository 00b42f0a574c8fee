#!/usr/bin/env python
"""The demo, from a fresh machine: python testproject/run_demo.py

1. Redis: $ZQUEUE_REDIS_URL if set; else redis://127.0.0.1:6379/0 if it answers; else a
   private, non-persistent server (redis-server from PATH, or valkey-server from the
   'embedded' extra's wheel), stopped when the demo ends.
2. Migrates the demo database (SQLite), enqueues demo tasks and shows their ranks.
3. Runs a burst worker (2 threads) and prints what happened.

A Redis database that holds other data is left alone: the demo works under its own key
prefix, "zqdemo" ($ZQUEUE_PREFIX if set), and deletes what it wrote when it ends (the
queue's keys, and the results it stored, which would otherwise expire in 5 minutes).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")


def ensure_redis() -> None:
    import redis

    from django_zqueue import embedded

    if os.environ.get("ZQUEUE_REDIS_URL"):
        print(f"redis: using ZQUEUE_REDIS_URL={os.environ['ZQUEUE_REDIS_URL']}")
        return
    local = os.environ.get("ZQUEUE_DEMO_LOCAL_URL", "redis://127.0.0.1:6379/0")  # tests
    if embedded.answers(local):
        os.environ["ZQUEUE_REDIS_URL"] = local
        others = redis.Redis.from_url(local).dbsize()
        print(
            f"redis: using {local}"
            + (
                f", which holds {others} other keys: the demo touches only keys starting "
                f"with {{{os.environ['ZQUEUE_PREFIX']}:, and deletes them at the end"
                if others
                else ""
            )
        )
        return
    server = embedded.start()
    os.environ["ZQUEUE_REDIS_URL"] = server.url
    print(
        f"redis: nothing on localhost:6379; started a private, NON-PERSISTENT server "
        f"({server.binary}) at {server.url}; it stops when the demo ends"
    )


def main() -> None:
    os.environ.setdefault("ZQUEUE_PREFIX", "zqdemo")
    ensure_redis()
    import django

    django.setup()
    from django.core.management import call_command

    from django_zqueue import get_queue
    from django_zqueue.worker import Worker
    from testproject.demo import tasks
    from testproject.demo.models import Article

    call_command("migrate", verbosity=0)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # one line per job, as `zqueue_worker -v 2` shows (DEBUG: not logged by default)
    logging.getLogger("django_zqueue.worker").setLevel(logging.DEBUG)
    q = get_queue("default")
    q.clear()
    article = Article.objects.create(title="Hello, queue")
    jobs = [tasks.add.enqueue(i, i) for i in range(3)]
    urgent = tasks.add.using(priority=10).enqueue(100, 1)
    try:
        tasks.with_progress.enqueue(4)
        tasks.bump_views.enqueue(article)
        tasks.always_fails.enqueue()
        later = tasks.noop.enqueue_in(0.5)
        print("\nin line:")
        for job in [urgent, *jobs]:
            print(f"  job {job.id}  rank={job.rank()}  score={job.score()}")
        print(f"  delayed job {later.id}: {later.status()}")
        print(f"counts: {q.counts()}\n")
        time.sleep(1.0)  # let the delayed job fall due: a burst worker does not wait for it
        Worker(["default"], concurrency=2, burst=True, scan_interval=0.2).run()
        article.refresh_from_db()
        print(f"\nresults: {[j.result() for j in [urgent, *jobs]]}")
        print(f"article views: {article.views}")
        print(f"counts: {q.counts()}  (the always-failing job is a dead letter)")
        for info in q.dead_letters():
            print(f"dead: {info.tag}: {(info.last_error or '').splitlines()[0]}")
        print(f"stats: {q.stats()}")
    finally:
        # the queue's keys, and the stored results (keys of their own, with a TTL)
        q.clear()
        q.engine._client.delete(*[q.engine._keys.result(j.id) for j in [urgent, *jobs]])


def run() -> None:
    """main(), with Redis unreachable said in one line, as the management commands do."""
    try:
        main()
    except Exception as exc:
        from django_zqueue.management.errors import REDIS_ERRORS, explain_redis_error

        if not isinstance(exc, REDIS_ERRORS):
            raise
        sys.exit(f"demo: {explain_redis_error(exc)}")


if __name__ == "__main__":
    run()
