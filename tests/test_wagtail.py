"""A real client: a minimal Wagtail site (tests/wagtail_site) whose background work, sent
through Django's Tasks framework (the ``django_tasks`` backport's ``@task``), runs on
ZQueueBackend. Pages are created and published through Wagtail's API; a burst worker
runs; every task Wagtail enqueued must have succeeded: the pages' reference index rows
and search index entries are there, nothing is dead.

Needs the ``wagtail`` package (``pip install -e '.[test-wagtail]'``): skips without it,
and fails instead with ZQUEUE_REQUIRE_WAGTAIL=1 (CI installs it and sets that). Runs in a
subprocess, with its own settings module (tests/wagtail_site/settings.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .redis_server import redis_url

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = os.environ.get("ZQUEUE_REQUIRE_WAGTAIL") == "1"
MISSING = (
    None
    if importlib.util.find_spec("wagtail") is not None
    else "wagtail is not installed (pip install -e '.[test-wagtail]')"
)

pytestmark = [
    pytest.mark.skipif(MISSING is not None and not REQUIRED, reason=str(MISSING)),
    pytest.mark.slow,
]


def test_wagtail_site_background_work_runs_on_zqueue(prefix: str, tmp_path: Path) -> None:
    if MISSING is not None:
        pytest.fail(f"ZQUEUE_REQUIRE_WAGTAIL=1 but {MISSING}")
    env = {
        **os.environ,
        "WAGTAIL_DB": str(tmp_path / "wagtail.sqlite3"),
        "ZQUEUE_REDIS_URL": redis_url(),
        "ZQUEUE_PREFIX": prefix,
        "PYTHONPATH": str(ROOT),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.wagtail_site.scenario"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    pages = [f"Zebracorn page {i}" for i in range(4)]
    statuses = report["statuses"]
    # what Wagtail 8 enqueues when four pages are created and published
    assert report["enqueued"] >= 8, report
    assert all(key.endswith(" SUCCESSFUL") for key in statuses), statuses
    assert sum(statuses.values()) == report["enqueued"]
    assert statuses.get("wagtail.tasks.update_reference_index_task SUCCESSFUL", 0) >= 4
    # modelsearch is not in INSTALLED_APPS (nor in Wagtail's project template)
    assert statuses.get("modelsearch.tasks.insert_or_update_object_task SUCCESSFUL", 0) >= 4
    assert report["pages_with_references"] == pages
    assert report["search_hits_before_worker"] == 0
    assert report["search_hits"] == pages
    assert report["queue"] == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
