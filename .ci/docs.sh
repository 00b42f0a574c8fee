#!/usr/bin/env bash
# Builds the documentation site with MkDocs (Material theme, mkdocstrings API reference)
# in strict mode: a broken link, a missing page or an unresolved reference fails the build.
#
# Usage: bash .ci/docs.sh            -> site in .ci/work/site (or $ZQ_CI_WORK/site)
# Env:   ZQ_CI_WORK   work directory (default .ci/work); the venv is $ZQ_CI_WORK/venv-docs,
#                     reused when present
#        PYTHON       interpreter for a new venv (default: a working python3.11, else python3 >= 3.11)
# Needs no Redis and no database: it only imports the package (checked first).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${ZQ_CI_WORK:-$ROOT/.ci/work}
VENV=$WORK/venv-docs
mkdir -p "$WORK"

# shellcheck source=find_python.sh
source "$ROOT/.ci/find_python.sh"
PY=$(find_python)
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
pip() {  # quiet; the full output goes to $WORK/docs-pip.log, shown if pip fails
  "$VENV/bin/python" -m pip --disable-pip-version-check "$@" >"$WORK/docs-pip.log" 2>&1 \
    || { tail -30 "$WORK/docs-pip.log"; echo "docs: pip $* failed" >&2; return 1; }
}
pip install --upgrade pip
# the package with its docs extra; django-environ because testproject.settings uses it;
# django-tasks so that django_zqueue.backends imports on Django 5.2 (Django >= 6 has
# django.tasks); ruff, with which mkdocstrings formats the signatures
pip install -e "$ROOT[docs]" "django-environ>=0.11" "django-tasks>=0.12" ruff

export DJANGO_SETTINGS_MODULE=testproject.settings
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
# a Redis URL nothing listens on: documenting the package must never need a server
export ZQUEUE_REDIS_URL=redis://127.0.0.1:1/0

echo "docs: checking that the documented modules import without Redis"
"$VENV/bin/python" - <<'PY'
import django

django.setup()
import importlib

for name in (
    "django_zqueue",
    "django_zqueue.queue",
    "django_zqueue.tasks.task",
    "django_zqueue.worker",
    "django_zqueue.tasks.schedules",
    "django_zqueue.backends",
    "django_zqueue.exceptions",
):
    importlib.import_module(name)
import django_zqueue

print(f"docs: django_zqueue {django_zqueue.__version__}, Django {django.get_version()}")
PY

export NO_MKDOCS_2_WARNING=1  # Material's notice about its successor, on every build
echo "docs: mkdocs build --strict"
"$VENV/bin/python" -m mkdocs build --strict --clean -f "$ROOT/mkdocs.yml" -d "$WORK/site"
test -s "$WORK/site/index.html"
test -s "$WORK/site/reference/queue/index.html"
echo "docs: site built in $WORK/site"
