#!/usr/bin/env bash
# Release check: builds the sdist and the wheel, checks them, then installs the WHEEL
# (not the source tree) into a fresh virtualenv and smoke-tests it from a directory
# outside the repository against a real Redis.
#
# Usage: bash .ci/package.sh        -> sdist and wheel in .ci/work/dist (or $ZQ_CI_WORK/dist)
# Env:   ZQUEUE_TEST_REDIS_URL  Redis for the smoke test (default redis://127.0.0.1:6379/0);
#                               it must answer. Only keys under a fresh prefix
#                               ({zqsmoke-<random>:...}) are written, and deleted after.
#        ZQ_CI_WORK             work directory (default .ci/work): venv-pkg (build tools,
#                               reused), venv-wheel (made anew every run), dist
#        PYTHON                 interpreter for the venvs (default: a working python3.11, else python3 >= 3.11)
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${ZQ_CI_WORK:-$ROOT/.ci/work}
DIST=$WORK/dist
PKG=$WORK/venv-pkg
WHEEL_VENV=$WORK/venv-wheel
export ZQUEUE_TEST_REDIS_URL=${ZQUEUE_TEST_REDIS_URL:-redis://127.0.0.1:6379/0}
mkdir -p "$WORK"
log() { printf '\n=== package: %s\n' "$*"; }
quiet_pip() { "$1" -m pip -q --disable-pip-version-check "${@:2}" 2>&1 \
  | { grep -v '^WARNING: Location' || true; }; }

# shellcheck source=find_python.sh
source "$ROOT/.ci/find_python.sh"
PY=$(find_python)

log "build tools ($PKG)"
[ -x "$PKG/bin/python" ] || "$PY" -m venv "$PKG"
quiet_pip "$PKG/bin/python" install --upgrade pip
quiet_pip "$PKG/bin/python" install --upgrade build twine trove-classifiers

log "python -m build (sdist, then the wheel from the sdist)"
rm -rf "$DIST"
"$PKG/bin/python" -m build --outdir "$DIST" "$ROOT" >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log"; echo "package: build failed" >&2; exit 1; }
ls -l "$DIST"
SDIST=$(ls "$DIST"/*.tar.gz)
WHEEL=$(ls "$DIST"/*.whl)

log "twine check --strict"
"$PKG/bin/python" -m twine check --strict "$DIST"/*

log "contents and metadata"
"$PKG/bin/python" - "$ROOT" "$SDIST" "$WHEEL" <<'PY'
"""Every file of the source package is in both archives; metadata is consistent."""
import email
import pathlib
import re
import sys
import tarfile
import zipfile

from trove_classifiers import classifiers as known_classifiers

root, sdist, wheel = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
pkg = root / "django_zqueue"
version = re.search(r'^__version__ = "([^"]+)"', (pkg / "version.py").read_text(), re.M)[1]
expected = sorted(
    str(p.relative_to(root))
    for p in pkg.rglob("*")
    if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
)
failures = []

with zipfile.ZipFile(wheel) as zf:
    in_wheel = set(zf.namelist())
    meta = email.message_from_bytes(zf.read(f"django_zqueue-{version}.dist-info/METADATA"))
with tarfile.open(sdist) as tf:
    base = f"django_zqueue-{version}/"
    in_sdist = {n[len(base):] for n in tf.getnames() if n.startswith(base)}

for name, files in (("wheel", in_wheel), ("sdist", in_sdist)):
    missing = [f for f in expected if f not in files]
    if missing:
        failures.append(f"{name} lacks {len(missing)} files: {missing}")
    strays = sorted(f for f in files if "__pycache__" in f or f.endswith(".pyc"))
    if strays:
        failures.append(f"{name} has compiled files: {strays[:5]}")

kinds = {
    "Lua scripts": "django_zqueue/engine/lua/",
    "templates": "django_zqueue/templates/",
    "static files": "django_zqueue/static/",
    "migrations": "django_zqueue/migrations/",
    "management commands": "django_zqueue/management/commands/",
}
for label, prefix in kinds.items():
    n = sum(1 for f in in_wheel if f.startswith(prefix))
    print(f"wheel: {n:3d} {label}")
    if n == 0:
        failures.append(f"wheel has no {label}")
for needed in ("django_zqueue/py.typed", "django_zqueue/migrations/__init__.py",
               "django_zqueue/migrations/0001_initial.py"):
    if needed not in in_wheel:
        failures.append(f"wheel lacks {needed}")

if meta["Version"] != version:
    failures.append(f"wheel version {meta['Version']} != __version__ {version}")
extras = set(meta.get_all("Provides-Extra") or [])
for extra in ("hiredis", "embedded", "prometheus", "demo", "docs"):
    if extra not in extras:
        failures.append(f"extra {extra!r} missing from the metadata")
bad = [c for c in meta.get_all("Classifier") or [] if c not in known_classifiers]
if bad:
    failures.append(f"classifiers unknown to PyPI: {bad}")
if meta.get("Description-Content-Type") != "text/markdown":
    failures.append(f"description content type: {meta.get('Description-Content-Type')}")

print(f"{pathlib.Path(wheel).name}: {len(in_wheel)} files; "
      f"{pathlib.Path(sdist).name}: {len(in_sdist)} files; version {version}; "
      f"extras {sorted(extras)}")
if failures:
    print("\n".join(f"FAIL: {f}" for f in failures), file=sys.stderr)
    sys.exit(1)
PY

log "fresh venv with the wheel ($WHEEL_VENV)"
rm -rf "$WHEEL_VENV"
"$PY" -m venv "$WHEEL_VENV"
quiet_pip "$WHEEL_VENV/bin/python" install --upgrade pip
quiet_pip "$WHEEL_VENV/bin/python" install "$WHEEL" "Django>=5.2"
"$WHEEL_VENV/bin/python" -m pip check --disable-pip-version-check

log "smoke test from outside the repository (Redis: $ZQUEUE_TEST_REDIS_URL)"
SMOKE_DIR=$(mktemp -d)
trap 'rm -rf "$SMOKE_DIR"' EXIT
cat >"$SMOKE_DIR/smoke.py" <<'PY'
"""Smoke test of an installed wheel: settings, Lua, templates, migrations, Redis."""
import os
import pathlib
import sys
import uuid

repo = pathlib.Path(sys.argv[1]).resolve()
import django_zqueue  # noqa: E402

where = pathlib.Path(django_zqueue.__file__).resolve()
# the installed copy, in this venv's site-packages: never the repository's source
assert "site-packages" in where.parts and where.is_relative_to(sys.prefix), where
assert not where.is_relative_to(repo / "django_zqueue"), where
print(f"smoke: django_zqueue {django_zqueue.__version__} from {where.parent}")

import django  # noqa: E402
from django.conf import settings  # noqa: E402

url = os.environ["ZQUEUE_TEST_REDIS_URL"]
prefix = f"zqsmoke-{uuid.uuid4().hex[:12]}"
tmp = os.getcwd()  # the temporary directory this script runs in
settings.configure(
    SECRET_KEY="smoke-test",
    USE_TZ=True,
    TIME_ZONE="UTC",
    INSTALLED_APPS=[
        "django.contrib.admin",
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django.contrib.staticfiles",
        "django_zqueue",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                           "NAME": os.path.join(tmp, "db.sqlite3")}},
    TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True, "OPTIONS": {}}],
    STATIC_URL="static/",
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    ZQUEUE={"REDIS_URL": url, "PREFIX": prefix, "QUEUES": {"default": {}}},
)
django.setup()
print(f"smoke: Django {django.get_version()}, prefix {prefix}")

from importlib import resources  # noqa: E402

import redis  # noqa: E402
from django.contrib.auth.models import Permission  # noqa: E402
from django.contrib.staticfiles import finders  # noqa: E402
from django.core import checks  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.migrations.loader import MigrationLoader  # noqa: E402
from django.template.loader import get_template  # noqa: E402

from django_zqueue import get_queue, task  # noqa: E402
from django_zqueue.engine import scripts  # noqa: E402
from django_zqueue.worker import Worker  # noqa: E402

# settings: the package's own system checks pass
errors = checks.run_checks(tags=["django_zqueue"])
assert not errors, errors

# Lua scripts load from the installed package
lua = resources.files("django_zqueue.engine") / "lua"
names = sorted(p.name[:-4] for p in lua.iterdir() if p.name.endswith(".lua"))
# every script the package runs is there, and each helper it includes (lua/_<name>.lua)
assert set(scripts.SCRIPT_NAMES) <= set(names), names
assert "redis.call" in scripts.source("claim") and "local function now_ms" in scripts.source("claim")
for name in scripts.SCRIPT_NAMES:
    for helper in scripts.includes(name):
        assert f"_{helper}" in names, (name, helper)
    assert scripts.source(name).strip(), name
print(f"smoke: {len(names)} Lua files, scripts.source('claim') is "
      f"{len(scripts.source('claim'))} chars")

# templates resolve and compile; static files are found
templates = resources.files("django_zqueue") / "templates" / "admin" / "django_zqueue"
for name in ("overview.html", "queue.html", "job.html", "base.html"):
    get_template(f"admin/django_zqueue/{name}")
assert templates.joinpath("overview.html").is_file()
assert finders.find("django_zqueue/dashboard.css"), "static file not found"
print("smoke: templates and static files found")

# migrations are found and apply (SQLite in a temp directory)
loader = MigrationLoader(connection, ignore_no_migrations=True)
assert ("django_zqueue", "0001_initial") in loader.disk_migrations, "no migrations on disk"
call_command("migrate", run_syncdb=True, verbosity=0)
applied = MigrationLoader(connection).applied_migrations
assert ("django_zqueue", "0001_initial") in applied, "0001_initial not applied"
perms = set(Permission.objects.filter(content_type__app_label="django_zqueue")
            .values_list("codename", flat=True))
assert perms, "migrate created no django_zqueue permissions"
print(f"smoke: migrations applied; permissions {sorted(perms)}")

client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=5)
try:
    # the queue engine: publish / get / ack
    q = get_queue("default")
    tag = q.publish({"smoke": True}, priority=5)
    assert q.rank(tag) == 0 and q.state(tag) == "ready", (q.rank(tag), q.state(tag))
    msg = q.get(timeout=5)
    assert msg is not None and msg.tag == tag and msg.body == {"smoke": True}, msg
    assert q.state(tag) == "leased"
    assert q.ack(msg) is True
    assert q.state(tag) is None
    assert q.counts() == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}, q.counts()
    print("smoke: publish/get/ack round trip ok")

    # a task through a burst worker, result kept
    @task(store_result=True)
    def add(a, b):
        return a + b

    job = add.enqueue(2, 3)
    ran = Worker(["default"], burst=True).run()
    assert ran == 1 and job.result() == 5 and job.status() == "finished", (ran, job.status())
    print("smoke: @task enqueue, burst worker, result ok")
finally:
    keys = list(client.scan_iter(match=f"{{{prefix}:*", count=1000))
    if keys:
        client.delete(*keys)
    left = list(client.scan_iter(match=f"{{{prefix}:*", count=1000))
    assert not left, left
    print(f"smoke: deleted {len(keys)} keys under {{{prefix}:")
print("smoke: OK")
PY
(cd "$SMOKE_DIR" && env -u PYTHONPATH -u DJANGO_SETTINGS_MODULE \
  "$WHEEL_VENV/bin/python" -I smoke.py "$ROOT")
echo "package: OK ($(basename "$SDIST"), $(basename "$WHEEL"))"
