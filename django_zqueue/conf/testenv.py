"""The queues' own key prefix under a test runner (docs/testing.md), as Django names a
test database: while Django's test environment is set up (``setup_test_environment``:
``manage.py test``, pytest-django), every queue of the process uses the prefix
``test_<PREFIX>`` (``test_<PREFIX>_<worker>`` under ``pytest -n``), so a developer's
worker, which runs on ``<PREFIX>``, never sees a test's jobs, and a test's leftovers
never reach the developer's keys.

The Django setting ``ZQUEUE_TEST_PREFIX`` (beside ``ZQUEUE``, so a test that overrides
``ZQUEUE`` keeps it) names the prefix instead; ``False`` (or None) opts out: the tests
then run on ``PREFIX`` itself.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from django.conf import settings

#: the Django setting that names the test prefix (False: none)
SETTING = "ZQUEUE_TEST_PREFIX"
#: a prefix's characters (as ``conf.NAME_RE``)
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")


def under_test() -> bool:
    """Whether Django's test environment is set up in this process (its test runner,
    pytest-django): ``django.test.utils.setup_test_environment`` ran and was not torn
    down."""
    utils = sys.modules.get("django.test.utils")
    state = getattr(utils, "_TestState", None)
    return state is not None and hasattr(state, "saved_data")


def default_prefix(prefix: str) -> str:
    """``test_<prefix>``, with ``_<worker>`` under pytest-xdist (as pytest-django names
    each worker's test database)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    name = f"test_{prefix}_{worker}" if worker else f"test_{prefix}"
    return name[:100]


def prefix_under_test(prefix: str) -> str | None:
    """The prefix the queues use under test instead of ``prefix`` (None: ``prefix``
    itself: not under test, or opted out). Raises ``ValueError`` for a
    ``ZQUEUE_TEST_PREFIX`` that is not a prefix, False or None."""
    if not under_test():
        return None
    value: Any = getattr(settings, SETTING, "")
    if value is None or value is False:
        return None
    if value == "" or value is True:
        return default_prefix(prefix)
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValueError(
            f"settings.{SETTING} must be a key prefix (letters, digits, _ . -), or False "
            f"to run the tests on ZQUEUE['PREFIX'] itself; got {value!r}"
        )
    return value
