"""Django's own tests/tasks suite, run against ZQueueBackend.

Each of Django's test classes is subclassed with our backend as TASKS["default"]; the
backend used here runs a burst worker between enqueue and the assertions. Expected
failures are listed below, each with its reason.
"""

from __future__ import annotations

import inspect
import unittest
from typing import Any

import tasks.test_immediate_backend as immediate
import tasks.test_tasks as framework
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import override_settings

OURS = {"BACKEND": "tests.conformance.backend.ConformanceBackend", "QUEUES": []}

#: (Django test class, test name) -> why it cannot pass with a real queue backend
EXPECTED_FAILURES: dict[tuple[str, str], str] = {
    # ImmediateBackendTestCase: the immediate backend's own quirks
    ("ImmediateBackendTestCase", "test_using_correct_backend"): (
        "asserts the backend is an ImmediateBackend"
    ),
    ("ImmediateBackendTestCase", "test_throws_keyboard_interrupt"): (
        "the immediate backend lets KeyboardInterrupt escape the caller's enqueue(); a "
        "worker records it as that job's failure and keeps running"
    ),
    ("ImmediateBackendTestCase", "test_cannot_get_result"): (
        "ImmediateBackend has no get_result; ours supports it"
    ),
    ("ImmediateBackendTestCase", "test_cannot_refresh_result"): (
        "ImmediateBackend cannot refresh results; ours can"
    ),
    ("ImmediateBackendTestCase", "test_cannot_pass_run_after"): (
        "ImmediateBackend rejects run_after; ours supports it"
    ),
    # TaskTestCase: its default backend is the DummyBackend
    ("TaskTestCase", "test_using_correct_backend"): "asserts the backend is a DummyBackend",
    ("TaskTestCase", "test_get_backend"): "asserts the default backend is a DummyBackend",
    ("TaskTestCase", "test_enqueue_task"): "reads DummyBackend.results",
    ("TaskTestCase", "test_enqueue_task_async"): (
        "reads DummyBackend.results and expects READY after enqueue (no worker run)"
    ),
}


#: On Django 5.2 the suite runs against the django-tasks backport (tests/conformance/alias.py
#: aliases its module and logger names): these tests check Django 6.1 framework features
#: the backport (0.12) does not have.
BACKPORT_DIFFERENCES: dict[tuple[str, str], str] = {
    **{
        ("TaskTestCase", name): "Task pickling (__reduce__/_reconstruct) is new in Django 6.1"
        for name in (
            "test_pickle_task",
            "test_pickle_task_result",
            "test_unpickle_arbitrary_string",
            "test_unpickle_non_task_object",
        )
    },
    ("TaskTestCase", "test_run_after_in_decorator"): "the backport's message differs",
}
if getattr(settings, "BACKPORT", False):
    EXPECTED_FAILURES = {**EXPECTED_FAILURES, **BACKPORT_DIFFERENCES}


def _expected_failure(method: Any) -> Any:
    if inspect.iscoroutinefunction(method):
        # Django runs async tests through async_to_sync; mark a sync wrapper instead
        def run(self: Any) -> None:
            async_to_sync(method)(self)

        run.__name__ = method.__name__
        return unittest.expectedFailure(run)
    return unittest.expectedFailure(method)


def conformance(base: type, settings: dict[str, object]) -> type:
    attrs: dict[str, object] = {}
    for name in dir(base):
        if (base.__name__, name) in EXPECTED_FAILURES:
            attrs[name] = _expected_failure(getattr(base, name))
    cls = type(f"ZQueue{base.__name__}", (base,), attrs)
    return override_settings(**settings)(cls)


ZQueueImmediateBackendTestCase = conformance(
    immediate.ImmediateBackendTestCase, {"TASKS": {"default": OURS}}
)
ZQueueTaskTestCase = conformance(
    framework.TaskTestCase,
    {
        "TASKS": {
            "default": {**OURS, "QUEUES": ["default", "queue_1"]},
            "immediate": {
                "BACKEND": "django.tasks.backends.immediate.ImmediateBackend",
                "QUEUES": [],
            },
            "missing": {"BACKEND": "does.not.exist"},
        }
    },
)


@override_settings(TASKS={"default": OURS})
class ZQueueImmediateBackendTransactionTestCase(immediate.ImmediateBackendTransactionTestCase):
    """Its test pins TASKS to the ImmediateBackend at method level: run the undecorated
    test (``__wrapped__``) under our backend. ``available_apps`` names the apps whose
    tables the TransactionTestCase flushes (Django's ``[]`` relies on its test runner)."""

    available_apps = ["tasks", "django_zqueue"]
    test_doesnt_wait_until_transaction_commit_by_default = (
        immediate.ImmediateBackendTransactionTestCase.test_doesnt_wait_until_transaction_commit_by_default.__wrapped__  # type: ignore[attr-defined]
    )
