"""Producers in other languages (tests/producers/): a Node program with the npm
``redis`` client and a redis-cli script publish jobs through the wire protocol
(docs/protocol.md); a Django worker runs each once, with the right result.

Skipped when node, the npm module or redis-cli is missing, unless ``ZQ_CI=1`` (set by
``.ci/run``, which installs them): then it fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from django_zqueue import get_queue
from django_zqueue.worker import Worker

from .redis_server import TOPOLOGY, redis_url

ROOT = Path(__file__).resolve().parent.parent
PRODUCERS = ROOT / "tests" / "producers"
#: where ``npm install --prefix <it> redis@4`` put the npm module (.ci/run's default)
NODE_PREFIX = Path(os.environ.get("ZQ_NODE_PREFIX", ROOT / ".ci" / "work" / "node"))
ADD = "testproject.demo.tasks.add"


def need(what: str, present: object) -> None:
    if present:
        return
    if os.environ.get("ZQ_CI") == "1":
        pytest.fail(f"{what}: CI (ZQ_CI=1) must run this test; .ci/run installs it")
    pytest.skip(what)


def run(cmd: list[str], env: dict[str, str]) -> list[str]:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (cmd[:2], done.stdout, done.stderr)
    return done.stdout.split()


def test_node_and_redis_cli_producers_jobs_run_once(project: dict[str, str]) -> None:
    if TOPOLOGY != "standalone":
        pytest.skip("the producers connect to one server")
    node, cli = shutil.which("node"), shutil.which("redis-cli")
    need("node is not installed", node)
    need("redis-cli is not installed", cli)
    module = NODE_PREFIX / "node_modules" / "redis" / "package.json"
    need(f"the npm module redis is not installed ({module} is missing)", module.exists())
    assert node is not None
    call_command("zqueue_protocol")
    prefix, url = project["ZQUEUE_PREFIX"], redis_url()
    env = {**project, "ZQ_NODE_PREFIX": str(NODE_PREFIX)}
    from_node = run([node, str(PRODUCERS / "publish.mjs"), url, prefix, "default", ADD, "20"], env)
    from_cli = run(["bash", str(PRODUCERS / "publish.sh"), url, prefix, "default", ADD, "10"], env)
    assert len(set(from_node)) == 20
    assert from_cli == [f"cli-{i}" for i in range(1, 11)]
    q = get_queue("default")
    assert q.total_count() == 30
    Worker(["default"], burst=True, scan_interval=0.05).run()
    assert [q.result(t) for t in from_node] == [101 * i for i in range(1, 21)]
    assert [q.result(t) for t in from_cli] == [1001 * i for i in range(1, 11)]
    stats = q.stats()
    assert (stats["enqueued"], stats["acked"]) == (30, 30)
    assert not stats.get("failed") and not stats.get("retried")
    assert q.counts() == {**q.counts(), "ready": 0, "delayed": 0, "inflight": 0, "dead": 0}
