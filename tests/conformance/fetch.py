"""Fetch Django's own tests/tasks package from the Django source release.

    python -m tests.conformance.fetch DEST [VERSION]

Uses ``pip download --no-binary :all: django==VERSION`` (PyPI only) and extracts
``tests/tasks`` into DEST/tasks. Nothing of Django's is committed to this repository.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def fetch(dest: Path, version: str) -> Path:
    target = dest / "tasks"
    if (target / "test_tasks.py").exists():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--ignore-requires-python",  # fetch 6.1's tests from any Python
                "-d",
                tmp,
                f"django=={version}",
            ],
            check=True,
        )
        archive = next(Path(tmp).glob("*.tar.gz"))
        prefix = f"django-{version}/tests/tasks/"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
            for m in members:
                m.name = m.name[len(f"django-{version}/tests/") :]
            dest.mkdir(parents=True, exist_ok=True)
            tar.extractall(dest, members=members, filter="data")
    return target


if __name__ == "__main__":
    print(fetch(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "6.1.3"))
