"""A brand-new Django project, written into a directory, for the subprocess tests of
django_zqueue.testing (tests/test_testing_projects.py): one app, ``shop``, with a signup
view that enqueues inside ``transaction.atomic()``, its tasks, and tests of its own that
use the ``zqueue`` fixture (pytest) and the mixin (``manage.py test``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SETTINGS = """
import os
SECRET_KEY = "x"
DEBUG = True
USE_TZ = True
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django_zqueue",
    "shop",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}}
ROOT_URLCONF = "mysite.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
ZQUEUE = {
    "REDIS_URL": os.environ["SITE_REDIS_URL"],
    "PREFIX": os.environ.get("SITE_PREFIX", "zq"),
    "QUEUES": {"default": {}, "emails": {"max_retries": 2}},
}
"""

URLS = """
from django.urls import path
from shop.views import signup
urlpatterns = [path("signup/", signup)]
"""

TASKS = """
from pathlib import Path
from django.contrib.auth.models import User
from django.core import mail
from django_zqueue import durable, task


@task(queue="emails")
def send_welcome(user_id):
    user = User.objects.get(pk=user_id)
    mail.send_mail("Welcome", "Hello", "shop@example.com", [user.email])


@task
def mark(path, text):
    Path(path).write_text(text)


@task
def fails():
    raise ValueError("the task's own error")


@task
def one(x):
    return x + 1


@task
def nap(x):
    durable.sleep("nap", 3600)
    return x * 10


@task
def three(x):
    assert x == 20
"""

VIEWS = """
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpResponse
from shop.tasks import send_welcome


def signup(request):
    with transaction.atomic():
        user = User.objects.create_user(request.POST["username"], request.POST["email"], "pw")
        send_welcome.enqueue(user.pk)
    return HttpResponse(status=201)
"""

PYTEST_TESTS = """
import time

import pytest
from django.contrib.auth.models import User
from django.core import mail

from django_zqueue import chain
from django_zqueue.tasks.serializer import UnsupportedArgument
from shop.tasks import fails, mark, nap, one, send_welcome, three


@pytest.mark.django_db
def test_signup(client, zqueue):
    client.post("/signup/", {"username": "ann", "email": "ann@example.com"})
    user = User.objects.get(username="ann")
    zqueue.assert_enqueued(send_welcome, args=[user.pk])
    zqueue.drain()
    assert mail.outbox[0].to == ["ann@example.com"]


@pytest.mark.django_db
def test_chain_with_a_long_sleep(zqueue):
    started = time.monotonic()
    chain(one.s(1), nap.s(), three.s()).enqueue()
    summary = zqueue.drain()
    assert summary.succeeded == 3 and time.monotonic() - started < 5


@pytest.mark.django_db
def test_value_error_fails_the_test(zqueue):
    fails.enqueue()
    with pytest.raises(ValueError, match="own error"):
        zqueue.drain()


def test_non_json_argument(zqueue):
    with pytest.raises(UnsupportedArgument):
        mark.enqueue(object(), "x")


def test_on_the_embedded_server(zqueue):
    import os
    from django_zqueue.testing.server import embedded_server

    server = embedded_server()
    assert server is not None and zqueue.redis_url == server.url
    assert os.path.basename(server.binary) == os.environ["EXPECT_BINARY"]
"""

ISOLATION_TESTS = """
import os

import pytest

from django_zqueue import get_queue
from shop.tasks import mark


@pytest.mark.parametrize("n", range(12))
def test_own_jobs_only(zqueue, n):
    for i in range(n + 1):
        mark.enqueue(f"/nonexistent/{n}", str(i))
    assert len(zqueue.enqueued()) == n + 1
    assert {j.args[0] for j in zqueue.enqueued()} == {f"/nonexistent/{n}"}


def test_without_the_fixture_the_worker_has_a_test_prefix():
    worker = os.environ["PYTEST_XDIST_WORKER"]
    assert get_queue().engine.prefix == f"test_{os.environ['SITE_PREFIX']}_{worker}"
"""

DJANGO_TESTS = """
import os

from django.test import TestCase, TransactionTestCase

from django_zqueue import get_queue
from django_zqueue.testing import ZQueueTestMixin
from shop.tasks import mark


class DevWorkerNeverRunsThese(TransactionTestCase):
    def test_enqueue_without_helpers(self):
        mark.enqueue(os.environ["MARKER"], "run by the dev worker")
        prefix = get_queue().engine.prefix
        assert prefix == "test_" + os.environ["SITE_PREFIX"], prefix


class WithTheMixin(ZQueueTestMixin, TestCase):
    def test_drain(self):
        mark.enqueue(os.environ["MARKER"] + ".mixin", "ran in the test")
        self.zqueue.assert_enqueued(mark)
        self.zqueue.drain()
        with open(os.environ["MARKER"] + ".mixin") as f:
            assert f.read() == "ran in the test"
"""


def write_project(where: Path, tests: dict[str, str]) -> Path:
    """The project in ``where`` (``manage.py``, ``mysite/``, ``shop/``), with ``tests``
    (file name -> text) in ``shop/``; returns ``where``."""
    (where / "mysite").mkdir(parents=True)
    (where / "shop").mkdir()
    (where / "mysite" / "__init__.py").write_text("")
    (where / "mysite" / "settings.py").write_text(SETTINGS)
    (where / "mysite" / "urls.py").write_text(URLS)
    (where / "shop" / "__init__.py").write_text("")
    (where / "shop" / "tasks.py").write_text(TASKS)
    (where / "shop" / "views.py").write_text(VIEWS)
    for name, text in tests.items():
        (where / "shop" / name).write_text(text)
    (where / "manage.py").write_text(
        "import os, sys\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'mysite.settings')\n"
        "from django.core.management import execute_from_command_line\n"
        "execute_from_command_line(sys.argv)\n"
    )
    (where / "pytest.ini").write_text(
        "[pytest]\nDJANGO_SETTINGS_MODULE = mysite.settings\npythonpath = .\n"
        "python_files = test_*.py tests.py\n"
        # the package's entry point registers the plugin once installed; this tree is
        # imported from its source, so the plugin is named here
        "addopts = -p django_zqueue.testing.plugin -p no:cacheprovider\n"
    )
    return where


def environ(where: Path, env: dict[str, str]) -> dict[str, str]:
    """The environment of a process of the project: this tree's django_zqueue, ``env``."""
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ZQUEUE_"))},
        "PYTHONPATH": os.pathsep.join([str(where), str(ROOT)]),
        **env,
    }
    full.pop("DJANGO_SETTINGS_MODULE", None)
    return full


def start(where: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``python <args>`` in the project, left running (its output in ``where/proc.log``)."""
    with (where / "proc.log").open("w") as log:
        return subprocess.Popen(
            [sys.executable, *args],
            cwd=where,
            env=environ(where, env),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )


def wait_for(
    done: Callable[[], bool], proc: subprocess.Popen[str], what: str, timeout: float = 30
) -> None:
    """Until ``done()``, at most ``timeout`` seconds, while ``proc`` runs."""
    deadline = time.monotonic() + timeout
    while not done():
        assert proc.poll() is None, f"{what}: the process ended ({proc.returncode})"
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def run(where: Path, args: list[str], env: dict[str, str], timeout: float = 180) -> str:
    """``python <args>`` in the project, with this tree's django_zqueue; its output
    (stdout and stderr), or an AssertionError with it when it fails."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=where,
        env=environ(where, env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    return out
