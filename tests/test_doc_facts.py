"""Facts a newcomer copies from the docs, checked against the code: the length of a
generated job id, the demo's choice of server, what ``zqueue_stats --json`` prints with
Redis down, the job-control page's options."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from django_zqueue.engine.records import new_tag
from django_zqueue.engine.redis.embedded import free_port

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: pages kept by others (their facts are checked where they are written)
NOT_CHECKED = {"commands.md", "operations.md", "reliability.md", "protocol.md"}


def pages() -> list[Path]:
    found = [p for p in sorted(DOCS.rglob("*.md")) if p.name not in NOT_CHECKED]
    return [ROOT / "README.md", *found]


def test_a_generated_job_id_is_12_characters_and_the_docs_say_so() -> None:
    assert {len(new_tag()) for _ in range(1000)} == {12}
    said = []
    for page in pages():
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for m in re.finditer(r"\b(\d+)[ -](?:URL-safe |random )?characters?\b", line):
                generated = re.search(r"\b(random|generat\w*)\b", line, re.IGNORECASE)
                if generated and m.group(1) != "12":
                    said.append(f"{page.name}:{n}: {line.strip()}")
    assert not said, "a generated tag is 12 characters:\n" + "\n".join(said)


def test_the_example_job_ids_in_log_lines_are_12_characters() -> None:
    wrong = []
    for page in pages():
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for m in re.finditer(r"\bjobs?=([A-Za-z0-9_.-]+)", line):
                token = m.group(1)
                if len(token) >= 8 and len(token) != 12:  # (not `jobs=N`, `jobs=<id>`)
                    wrong.append(f"{page.name}:{n}: {token}")
    assert not wrong, wrong


def test_the_readme_says_which_server_the_demo_prefers() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    demo = text[text.index("The demo, from a fresh clone") :][:400]
    assert demo.index("redis-server") < demo.index("valkey")


def test_job_control_covers_expires_and_max_length() -> None:
    text = (DOCS / "job-control.md").read_text()
    for anchor in ("#a-deadline-to-start-expires", "#a-cap-on-waiting-jobs-max_length"):
        assert f"]({anchor})" in text
    assert "## A deadline to start: expires" in text and "QueueFull" in text


def test_zqueue_stats_json_with_redis_down_prints_one_line_as_documented() -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
        "ZQUEUE_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "ZQUEUE_PREFIX": "zqt-docfacts",
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), "zqueue_stats", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("CommandError: cannot reach Redis at ")
    assert "Traceback" not in done.stderr
    page = " ".join((DOCS / "operations.md").read_text().split())
    assert "unreachable it prints one line on stderr (`CommandError: cannot reach Redis" in page
