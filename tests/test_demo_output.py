"""docs/tutorial.md's sample output of the demo (step 10) is what the demo prints.

The demo runs for real (``testproject/run_demo.py`` on the test Redis, under this test's
key prefix), and the tutorial's sample is checked against it with ids, times, the worker's
name and the Redis URL masked:

- the sample's printed lines (not ``event=`` lines) are the demo's standard output, line
  for line, in order (blank lines aside; the ``stats:`` dict compared by its keys, since
  Redis keeps a hash's fields in the order they were first written, which depends on the
  timing of the two threads);
- the sample's log lines (``event=...``; a line ``…`` stands for lines left out) appear
  in the demo's log (standard error) in the same order, each with the same event, fields
  and values: so a renamed field, a new event or a line the demo no longer logs fails.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .redis_server import TOPOLOGY, redis_url

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"

#: a job id: generated tags are 12 characters of A-Z a-z 0-9 _ . (20 or 22 in earlier versions)
JOB_ID = re.compile(r"(?<![\w.-])[A-Za-z0-9_.-]{12,22}(?![\w.-])")


def sample() -> list[str]:
    """The lines of the first code block of the tutorial's "## 10. The demo" section that
    shows the demo's output (it starts with ``redis:``)."""
    text = TUTORIAL.read_text()
    section = text[text.index("## 10. The demo") :]
    section = section[: section.index("\n## ", 1)]
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", section, flags=re.S | re.M):
        if block.startswith("redis:"):
            return block.splitlines()
    raise AssertionError("no sample output (a block starting with 'redis:') in step 10")


def mask(line: str) -> str:
    line = line.rstrip()
    if line.startswith("redis: using "):
        # the URL is the test's; a database holding other keys adds a clause the tutorial
        # describes in its text
        return "redis: using <url>"
    if line.startswith("stats: "):
        stats = ast.literal_eval(line[len("stats: ") :])
        return "stats: " + repr(
            {k: ("<ms>" if k == "run_ms" else v) for k, v in sorted(stats.items())}
        )
    line = re.sub(r"\bms=[0-9.]+", "ms=<ms>", line)
    line = re.sub(r"\b(worker|scanner)=\S+", r"\1=<worker>", line)
    return JOB_ID.sub("<id>", line)


def is_log(line: str) -> bool:
    return line.startswith("event=")


def in_order(wanted: list[str], got: list[str]) -> list[str]:
    """The lines of ``wanted`` not found in ``got`` in that order (greedy: each one after
    the previous match)."""
    missing, at = [], 0
    for line in wanted:
        try:
            at = got.index(line, at) + 1
        except ValueError:
            missing.append(line)
    return missing


def test_the_sample_has_both_parts() -> None:
    lines = sample()
    assert any(is_log(x) for x in lines) and any(x.startswith("results: ") for x in lines)


@pytest.mark.slow
@pytest.mark.skipif(TOPOLOGY != "standalone", reason="the demo's local Redis is one server")
def test_the_tutorials_sample_output_is_what_the_demo_prints(
    tmp_path: Path, prefix: str, redis_client: Any
) -> None:
    demo_prefix = f"{prefix}-demo"
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
    finally:
        keys = list(redis_client.scan_iter(match=f"{{{demo_prefix}:*", count=1000))
        if keys:
            redis_client.delete(*keys)
    assert out.returncode == 0, out.stdout + out.stderr

    shown = [mask(x) for x in sample() if x.strip() and x.strip() != "…"]
    printed = [mask(x) for x in out.stdout.splitlines() if x.strip()]
    logged = [mask(x) for x in out.stderr.splitlines() if is_log(x)]

    assert [x for x in shown if not is_log(x)] == printed, out.stdout
    missing = in_order([x for x in shown if is_log(x)], logged)
    assert not missing, "\n".join(["not in the demo's log, in this order:", *missing, "", *logged])
