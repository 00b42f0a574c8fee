"""docs/tutorial.md runs end to end as written: its project is built from its code blocks.

A ``python`` block whose first line is ``# <path>.py`` is a file of the project (``: add
at the end`` appends to the file ``startproject`` wrote); every other ``python`` block is
typed into ``manage.py shell``: those of steps 1-6 before the worker starts, the later
ones while it runs (step 7). The commands are run as the tutorial shows them, and the
log lines it shows must have the level, event and fields of the real ones. Change the
tutorial or the code, and this test says where they part.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from .redis_server import redis_url

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"
FILE_LINE = re.compile(r"^# (?P<path>[\w./]+\.py)(?P<rest>.*)$")
#: the commands the test runs, each as the tutorial spells it in a ```sh block
COMMANDS = [
    "django-admin startproject mysite",
    "cd mysite",
    "python manage.py startapp shop",
    "python manage.py makemigrations shop",
    "python manage.py migrate",
    "python manage.py check",
    "python manage.py zqueue_worker -v 2",
    "python manage.py zqueue_doctor",
    "python manage.py test shop",
]
#: checks of what the tutorial's comments say, run after the block containing the key
CLAIMS = {
    "job.info()": "assert job.rank() == 1 and vip.rank() == 0 and job.status() == 'ready'\n"
    "assert job.eta() is None and job.score() is not None\n",
    "later.cancel()": "assert later.status() == 'cancelled'\n",
    'Job(job.id, "emails")': "assert Job(job.id, 'emails').status() == 'ready'\n",
    "response.json()": "assert response.json()['order'] == 3 and response.json()['rank'] == 3\n",
    "job.result()": "assert job.result() == 5\n",
}


@dataclass
class Block:
    step: int | None  # the number of the "## N." section it is in; None outside one
    lang: str
    text: str


def blocks() -> list[Block]:
    out, step, fence, lines = [], None, None, []
    for line in TUTORIAL.read_text().splitlines():
        if fence is None:
            if line.startswith("## "):
                m = re.match(r"## (\d+)\.", line)
                step = int(m.group(1)) if m else None
            elif line.startswith("```"):
                fence, lines = line[3:].strip(), []
        elif line.startswith("```"):
            out.append(Block(step, fence, "\n".join(lines) + "\n"))
            fence = None
        else:
            lines.append(line)
    return out


def project_files(found: list[Block]) -> list[tuple[str, bool, str]]:
    """(path, append, text) of each file block, in the tutorial's order."""
    files = []
    for b in found:
        m = FILE_LINE.match(b.text.splitlines()[0]) if b.lang == "python" else None
        if m:
            files.append((m["path"], "add at the end" in m["rest"], b.text))
    return files


def shell_code(found: list[Block], before_worker: bool) -> str:
    code = []
    for b in found:
        if b.lang != "python" or FILE_LINE.match(b.text.splitlines()[0]) or b.step is None:
            continue
        if (b.step < 7) != before_worker:
            continue
        code.append(b.text)
        code += [check for key, check in CLAIMS.items() if key in b.text]
    return "\n".join(code)


def test_the_tutorial_spells_the_commands_the_test_runs() -> None:
    shown = {
        line.split("  #")[0].strip()
        for b in blocks()
        if b.lang == "sh"
        for line in b.text.splitlines()
    }
    assert [c for c in COMMANDS if c not in shown] == []


@pytest.mark.slow
def test_the_tutorial_runs_end_to_end(tmp_path: Path, prefix: str) -> None:
    found = blocks()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "ZQUEUE_"))}
    env["PYTHONPATH"] = str(ROOT)  # django_zqueue from this checkout, as `pip install -e .`
    site = tmp_path / "mysite"

    def run(*args: str, cwd: Path = site) -> str:
        out = subprocess.run(
            [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
        return out.stdout

    run("-m", "django", "startproject", "mysite", cwd=tmp_path)  # django-admin startproject
    run("manage.py", "startapp", "shop")
    for path, append, text in project_files(found):
        target = site / path
        assert target.parent.is_dir(), f"{path}: the tutorial does not create its folder"
        with target.open("a" if append else "w") as f:
            f.write(("\n" if append else "") + text)
    with (site / "mysite" / "settings.py").open("a") as f:
        # the test's Redis and a key prefix of its own instead of the tutorial's localhost
        f.write(f'\nZQUEUE["REDIS_URL"] = {redis_url()!r}\nZQUEUE["PREFIX"] = {prefix!r}\n')
    assert "System check identified no issues" in run("manage.py", "check")
    run("manage.py", "makemigrations", "shop")
    run("manage.py", "migrate")

    run("manage.py", "shell", "-c", shell_code(found, before_worker=True))  # steps 4-6

    log = tmp_path / "worker.log"
    mails = tmp_path / "worker.out"
    with log.open("w") as err, mails.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "zqueue_worker", "-v", "2"],
            cwd=site,
            env=env,
            stdout=out,
            stderr=err,
            text=True,
        )
        try:
            run("manage.py", "shell", "-c", shell_code(found, before_worker=False))  # step 8
            deadline = time.monotonic() + 30
            while log.read_text().count("task=shop.tasks.send_receipt attempt=1 ms=") < 4:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
    text = log.read_text()
    assert worker.returncode == 0, text
    assert "Traceback" not in text and "event=job_failed" not in text, text
    # three receipts from step 4 (two more are delayed by 60 s and 1 h), one from step 6's
    # transaction, one from the view; four sums from steps 4 and 8
    assert text.count("DEBUG event=job_done queue=emails") == 4, text
    assert text.count("task=shop.tasks.add attempt=1 ms=") == 4, text
    assert "Subject: Your order #1" in mails.read_text()  # the console email backend

    # the log lines of step 7 have the level, event and fields of the real ones
    real = {}
    for line in text.splitlines():
        m = re.search(r" (?P<level>[A-Z]+) event=(?P<event>\w+)", line)
        if m:
            real[m["event"]] = (m["level"], re.findall(r" (\w+)=", line))
    shown = [
        line
        for b in found
        if b.step == 7 and b.lang == ""
        for line in b.text.splitlines()
        if "event=" in line
    ]
    assert shown
    for line in shown:
        m = re.search(r" (?P<level>[A-Z]+) event=(?P<event>\w+)", line)
        assert m, line
        if m["event"] == "worker_logging":
            continue  # logged at -v 1 only: tests/test_first_hour.py checks it
        assert real.get(m["event"]) == (m["level"], re.findall(r" (\w+)=", line)), line

    # step 11: the shop's tests pass, with the worker of step 7 gone
    tested = subprocess.run(
        [sys.executable, "manage.py", "test", "shop"],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0 and "Ran 2 tests" in tested.stderr, tested.stderr

    # and the doctor finds nothing wrong with the tutorial's project
    doctor = run("manage.py", "zqueue_doctor")
    assert "ok       tasks: 3 tasks registered" in doctor
    assert "ERROR" not in doctor and doctor.splitlines()[-1].startswith("no error")
