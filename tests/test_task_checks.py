"""``manage.py check`` runs the Django Tasks checks (E101-E107) of a ``ZQueueBackend``
alias whether or not anything imported ``django.tasks`` (or the backport) before the
checks ran: a fresh project whose Django tasks live outside ``tasks.py``.

Django registers its ``check_tasks`` when ``django.tasks`` is first imported (Django 6.x)
or in the backport's ``AppConfig.ready`` (Django 5.2, only with ``django_tasks`` in
``INSTALLED_APPS``); django_zqueue's ``ready`` imports it when ``TASKS`` names a
ZQueueBackend.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from django_zqueue.tasks.django_tasks import compat as _django_tasks

from .redis_server import redis_url

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not _django_tasks.AVAILABLE, reason="no Django Tasks framework")

SETTINGS = """
SECRET_KEY = "x"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    {backport}
    "django_zqueue",
    "shop",
]
DATABASES = {{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}}}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ZQUEUE = {{"REDIS_URL": {url!r}, "QUEUES": {{"default": {{}}}}}}
TASKS = {{
    "default": {{
        "BACKEND": {backend!r},
        "QUEUES": {queues!r},
        "OPTIONS": {options!r},
    }}
}}
"""

#: the project's Django tasks, in a module nothing imports (not ``tasks.py``)
JOBS = """
try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task
def send_mail(to):
    return to
"""


def _project(
    tmp_path: Path,
    queues: list[str],
    options: dict[str, object],
    backport: bool,
    backend: str = "django_zqueue.backends.ZQueueBackend",
) -> Path:
    site = tmp_path / "site"
    (site / "shop").mkdir(parents=True)
    (site / "shop" / "__init__.py").write_text("")
    (site / "shop" / "jobs.py").write_text(JOBS)
    (site / "shop" / "backends.py").write_text(
        "from django_zqueue.backends import ZQueueBackend\n\n\n"
        "class ShopBackend(ZQueueBackend):\n    pass\n"
    )
    (site / "mysite_settings.py").write_text(
        SETTINGS.format(
            url=redis_url(),
            backend=backend,
            queues=queues,
            options=options,
            backport='"django_tasks",' if backport else "",
        )
    )
    return site


def _check(site: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "ZQUEUE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    env["DJANGO_SETTINGS_MODULE"] = "mysite_settings"
    return subprocess.run(
        [sys.executable, "-m", "django", "check"],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _backport_choices() -> list[bool]:
    """On Django 5.2 the backport with and without ``django_tasks`` in INSTALLED_APPS; on
    Django 6.x ``django.tasks`` (the backport's app would bring its own ``check_tasks``)."""
    return [True, False] if _django_tasks.FRAMEWORKS[0].name == "django_tasks" else [False]


@pytest.mark.parametrize("backport", _backport_choices())
def test_check_reports_the_backend_errors_without_any_import(
    tmp_path: Path, backport: bool
) -> None:
    site = _project(tmp_path, ["default", "nosuch"], {"RESULT_TTL": 0, "COLOUR": 1}, backport)
    out = _check(site)
    assert out.returncode == 1, out.stdout + out.stderr
    text = out.stderr
    assert "(django_zqueue.E101) TASKS['default']['OPTIONS'] has unknown key(s) ['COLOUR']." in text
    assert (
        "(django_zqueue.E102) TASKS['default']['OPTIONS']['RESULT_TTL'] must be seconds in "
        "[1, 10 years]."
    ) in text
    assert (
        "(django_zqueue.E104) TASKS['default']['QUEUES'] names queue(s) ['nosuch'] that are "
        "not in ZQUEUE['QUEUES']."
    ) in text
    assert "3 issues" in text  # each once: no check registered twice


def test_check_reports_the_errors_of_a_subclass(tmp_path: Path) -> None:
    backport = _backport_choices()[-1]
    site = _project(tmp_path, ["default"], {"RESULT_TTL": 0}, backport, "shop.backends.ShopBackend")
    out = _check(site)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "(django_zqueue.E102)" in out.stderr
    assert "1 issue" in out.stderr


@pytest.mark.parametrize("backport", _backport_choices())
def test_check_passes_a_good_backend(tmp_path: Path, backport: bool) -> None:
    site = _project(tmp_path, ["default"], {"RESULT_TTL": 60}, backport)
    out = _check(site)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "System check identified no issues" in out.stdout
