"""Publish pages through Wagtail's API, run a burst worker, report what happened.

    WAGTAIL_DB=... ZQUEUE_PREFIX=... python -m tests.wagtail_site.scenario

Prints one JSON object (the last line): the tasks Wagtail enqueued, by name and final
status, the reference index rows and search hits of the pages, and the dead letters.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from typing import Any


def main() -> dict[str, Any]:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.wagtail_site.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from wagtail.models import Page, ReferenceIndex

    from django_zqueue import get_queue
    from django_zqueue.tasks.django_tasks.compat import FRAMEWORKS, task_backends
    from django_zqueue.worker import Worker

    from .models import LinkPage

    enqueued: list[Any] = []
    for framework in FRAMEWORKS:  # Wagtail's tasks: whichever framework sends the signal
        framework.task_enqueued.connect(
            lambda sender, task_result, **kw: enqueued.append(task_result), weak=False
        )
    root = Page.objects.get(depth=1)
    home = root.get_children().first()
    assert home is not None
    pages = []
    for i in range(4):
        page = home.add_child(
            instance=LinkPage(title=f"Zebracorn page {i}", slug=f"zebra-{i}", related=home)
        )
        page.save_revision().publish()
        pages.append(page)
    before = Page.objects.live().search("Zebracorn").count()  # the index is the tasks' work
    Worker(["default"], burst=True, scanner=False).run()

    statuses: Counter[str] = Counter()
    for result in enqueued:
        done = task_backends[result.backend].get_result(result.id)
        statuses[f"{done.task.module_path} {done.status.value}"] += 1
    q = get_queue("default")
    hits = Page.objects.live().search("Zebracorn")
    return {
        "django": django.get_version(),
        "enqueued": len(enqueued),
        "statuses": dict(statuses),
        "pages_with_references": sorted(
            p.title for p in pages if ReferenceIndex.get_references_for_object(p).exists()
        ),
        "search_hits_before_worker": before,
        "search_hits": sorted(p.title for p in hits),
        "queue": q.counts(),
    }


if __name__ == "__main__":
    report = main()
    sys.stdout.write(json.dumps(report) + "\n")
