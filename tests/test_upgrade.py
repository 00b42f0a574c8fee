"""Jobs already in Redis survive an upgrade: the code of the last release writes jobs in
every state (ready, delayed, leased, dead, waiting for a parent, debounced, unique, fair,
partitioned), and the new worker runs them all, each once (docs/operations.md,
"Upgrading").

The old code is taken from git (``git archive`` of :data:`LAST_RELEASE` into a temporary
folder) and run in a subprocess; the test skips when the commit is not in this clone (a
shallow one), unless ZQUEUE_REQUIRE_UPGRADE is set, as CI sets it.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from django_zqueue import DuplicateJob, conf, get_queue, task
from django_zqueue.worker import Worker

from .redis_server import TOPOLOGY, redis_url

ROOT = Path(__file__).resolve().parent.parent
#: the last release: the main branch as it landed before the job spec (one argument per
#: job), the expiry keys and max_length
LAST_RELEASE = "ef9d25f"

OLD_WRITER = r"""
import os, sys
import django
from django.conf import settings

old, url, prefix, ledger = sys.argv[1:5]
settings.configure(
    ZQUEUE={
        "REDIS_URL": url,
        "PREFIX": prefix,
        "QUEUES": {
            "default": {"max_retries": 1},
            "fair": {"fairness": "groups"},
            "parts": {"partitions": 2},
        },
    },
    INSTALLED_APPS=["django_zqueue"],
    USE_TZ=True,
)
django.setup()
import django_zqueue
assert django_zqueue.__file__.startswith(old), django_zqueue.__file__
from django_zqueue import get_queue

def body(label):
    return {"task": "tests.upgrade.record", "args": [ledger, label], "kwargs": {}}

q = get_queue("default")
q.publish(body("leased"), tag="leased", visibility_timeout=1)
(held,), _ = q.claim(1, "old-worker")  # leased, never acked: its lease runs out
q.publish(body("dead"), tag="dead")
(doomed,), _ = q.claim(1, "old-worker")
assert q.nack(doomed, "boom", dead=True) == "dead"
q.publish(body("ready"), tag="ready")
q.publish(body("prio"), tag="prio", priority=5)
q.publish(body("delayed"), tag="delayed", delay=1)
q.publish(body("parent"), tag="parent", delay=0.5)
q.publish(body("child"), tag="child", depends_on=["parent"])
q.publish(body("debounced-1"), tag="deb", debounce=0.5)
assert q.publish_once(q.prepare(body("debounced-2"), "deb"), debounce=0.5) == "replaced"
q.publish(body("unique"), tag="uniq", unique_for=600)
fair = get_queue("fair")
fair.publish(body("fair-a"), group="a")
fair.publish(body("fair-b"), group="b")
get_queue("parts").publish_many([body(f"part{i}") for i in range(6)])
assert q.state("child") == "waiting" and q.state("leased") == "leased"
print("written")
"""

EXPECTED = {
    "leased",
    "dead",
    "ready",
    "prio",
    "delayed",
    "parent",
    "child",
    "debounced-2",
    "unique",
    "fair-a",
    "fair-b",
    *(f"part{i}" for i in range(6)),
}


@task(name="tests.upgrade.record")
def record(path: str, label: str) -> None:
    with open(path, "a") as f:
        f.write(label + "\n")


def old_code(tmp_path: Path) -> Path:
    """The package of LAST_RELEASE, unpacked under ``tmp_path``; skips without it."""
    try:
        data = subprocess.run(
            ["git", "archive", "--format=tar", LAST_RELEASE, "django_zqueue"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        if os.environ.get("ZQUEUE_REQUIRE_UPGRADE"):
            raise
        pytest.skip(f"the last release's code is not in this clone ({exc})")
    target = tmp_path / "old"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(target, filter="data")
    return target


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.skipif(TOPOLOGY != "standalone", reason="the old writer speaks to one server")
def test_the_new_worker_runs_jobs_written_by_the_last_release(tmp_path: Path, prefix: str) -> None:
    old = old_code(tmp_path)
    ledger = tmp_path / "ledger"
    env = {**os.environ, "PYTHONPATH": str(old)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run(
        [sys.executable, "-c", OLD_WRITER, str(old), redis_url(), prefix, str(ledger)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "written" in out.stdout, out.stderr[-3000:]

    settings: dict[str, Any] = {
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "QUEUES": {
            "default": {"max_retries": 1},
            "fair": {"fairness": "groups"},
            "parts": {"partitions": 2},
        },
    }
    with override_settings(ZQUEUE=settings):
        try:
            q = get_queue("default")
            assert q.state("dead") == "dead" and q.state("child") == "waiting"
            info = q.info("leased")
            assert info is not None and info.state == "leased" and info.consumer == "old-worker"
            assert q.requeue_dead("dead")  # the new code on an old record
            w = Worker(["default", "fair", "parts"], scan_interval=0.05, concurrency=2)
            t = threading.Thread(target=w.run, daemon=True)
            t.start()
            try:
                deadline = time.monotonic() + 60
                while set(lines(ledger)) != EXPECTED and time.monotonic() < deadline:
                    time.sleep(0.1)
                time.sleep(0.3)  # anything run twice would show by now
            finally:
                w.stop()
                t.join(15)
            ran = lines(ledger)
            assert sorted(ran) == sorted(EXPECTED), ran  # each once, nothing lost
            assert ran.index("parent") < ran.index("child")
            for name in ("default", "fair", "parts"):
                counts = get_queue(name).counts()
                assert counts == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}, name
            with pytest.raises(DuplicateJob):  # its unique_for reservation holds
                q.publish("again", tag="uniq", unique_for=600)
        finally:
            conf.reset()
