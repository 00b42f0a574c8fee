# ruff: noqa: PT009, PT027 -- unittest-style assertions kept as in the adapted upstream tests
"""The tests of django-tasks-rq (the closest peer: a Redis backend for Django's Tasks
framework), adapted to ZQueueBackend.

Source: django-tasks-rq 0.12.0, tests/tests.py in its sdist on PyPI
(``pip download --no-deps --no-binary :all: django-tasks-rq``). Its licence (BSD 3-Clause)
asks that this notice stay with the adapted code:

    Copyright (c) Jake Howard and individual contributors.
    All rights reserved.

    Redistribution and use in source and binary forms, with or without modification,
    are permitted provided that the following conditions are met:

        1. Redistributions of source code must retain the above copyright notice,
           this list of conditions and the following disclaimer.

        2. Redistributions in binary form must reproduce the above copyright
           notice, this list of conditions and the following disclaimer in the
           documentation and/or other materials provided with the distribution.

        3. Neither the name of the copyright holder nor the names of its
           contributors may be used to endorse or promote products derived from
           this software without specific prior written permission.

    THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND
    ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED
    WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
    DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT OWNER OR CONTRIBUTORS BE LIABLE FOR
    ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES
    (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES;
    LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON
    ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
    (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS
    SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.

What was adapted, and why:
- The backend is ZQueueBackend on a real Redis (this suite's test server, under a key
  prefix of each test's own), not RQBackend on fakeredis; ``run_worker`` runs a burst
  ``django_zqueue`` worker instead of RQ's SimpleWorker (and does not assert RQ's logs).
- The tasks module (``tests.tasks`` upstream, not in the sdist) is tests/peer_tasks.py.
- Imports come from ``django.tasks`` on Django 6.x and the backport on 5.2 (upstream uses
  the backport only); the framework's logger is ``django.tasks`` or ``django_tasks``.
- ``test_complex_return_value``: RQ stores a placeholder for a return value it cannot
  pickle and reports ``Exception``; ZQueueBackend refuses a value that is not JSON
  (Django's rule) with the ``TypeError`` of ``normalize_json``.
- ``test_invalid_task_path``: the job naming ``subprocess.check_output`` is published on a
  ``django_zqueue`` queue (not with RQ's ``enqueue_call``); ``get_result`` raises
  ``SuspiciousOperation`` as upstream (ours: ``UnsafeTaskPath``, which is one).
- ``test_queue_isolation`` reads each queue's state of the job (not RQ's ``job_ids``).
- ``test_unknown_queue_name``: the check is ours (E104, the queue is not in
  ``ZQUEUE['QUEUES']``) instead of ``RQ_QUEUES``.
- ``test_using_correct_backend``/``test_check`` use this module's TASKS (no OPTIONS).
- ``CompatTestCase``: ``django_zqueue.tasks.django_tasks.compat.TASK_CLASSES`` is our counterpart of
  ``django_tasks_rq.compat.TASK_CLASSES``.

Left out, and why they do not apply:
- ``test_rq_app_missing``: checks that ``django_rq`` is in INSTALLED_APPS; ZQueueBackend
  needs no app of its own to run (``django_zqueue`` is an app for its admin only).
- ``test_uses_rq_queues_for_queue_names``: RQBackend turns ``QUEUES: []`` into every RQ
  queue; ZQueueBackend keeps Django's meaning (``[]``: any queue name passes validation)
  and enqueues only to queues in ``ZQUEUE['QUEUES']`` (tests/test_backend.py covers it).
- ``test_exception_classes_pop_empty_list_bug``: a regression test of RQBackend's way of
  smuggling exception classes through RQ's job meta, which ZQueueBackend does not have
  (it records each attempt's error with its class path).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import SuspiciousOperation
from django.test import SimpleTestCase, override_settings

from django_zqueue import conf, get_queue
from django_zqueue.backends import ZQueueBackend
from django_zqueue.tasks.django_tasks.compat import (
    AVAILABLE,
    FRAMEWORKS,
    TASK_CLASSES,
    InvalidTask,
    Task,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
)
from django_zqueue.worker import Worker

from .redis_server import redis_url

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="no django.tasks and no django-tasks")

LOGGER = FRAMEWORKS[0].name if FRAMEWORKS else "django.tasks"
BACKEND = "django_zqueue.backends.ZQueueBackend"
TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": ["default", "queue-1"]}}


def default_task_backend() -> Any:
    return task_backends["default"]


class RQBackendTestCase(SimpleTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.prefix = f"zqpeer-{uuid.uuid4().hex[:12]}"
        zqueue = {
            "REDIS_URL": redis_url(),
            "PREFIX": self.prefix,
            "QUEUES": {"default": {}, "queue-1": {}},
        }
        settings_override = override_settings(ZQUEUE=zqueue, TASKS=TASKS)
        settings_override.enable()
        self.addCleanup(settings_override.disable)
        self.addCleanup(conf.reset)
        self.addCleanup(self.delete_keys)
        from tests import peer_tasks

        self.tasks = peer_tasks

    def delete_keys(self) -> None:
        client = get_queue("default").engine._client
        keys = list(client.scan_iter(match=f"{{{self.prefix}:*", count=1000))
        if keys:
            client.delete(*keys)

    def run_worker(self) -> None:
        Worker(["default", "queue-1"], burst=True, scanner=False).run()

    def test_using_correct_backend(self) -> None:
        self.assertIsInstance(task_backends["default"], ZQueueBackend)
        self.assertEqual(default_task_backend().alias, "default")
        self.assertEqual(default_task_backend().options, {})

    def test_enqueue_task(self) -> None:
        for task in [self.tasks.noop_task, self.tasks.noop_task_async]:
            with self.subTest(task):
                result = task.enqueue(1, two=3)

                self.assertEqual(result.status, TaskResultStatus.READY)
                self.assertFalse(result.is_finished)
                self.assertIsNone(result.started_at)
                self.assertIsNone(result.last_attempted_at)
                self.assertIsNone(result.finished_at)
                with self.assertRaisesMessage(ValueError, "Task has not finished yet"):
                    result.return_value  # noqa: B018
                self.assertEqual(result.task, task)
                self.assertEqual(result.args, [1])
                self.assertEqual(result.kwargs, {"two": 3})
                self.assertEqual(result.attempts, 0)

    async def test_enqueue_task_async(self) -> None:
        for task in [self.tasks.noop_task, self.tasks.noop_task_async]:
            with self.subTest(task):
                result = await task.aenqueue()

                self.assertEqual(result.status, TaskResultStatus.READY)
                self.assertFalse(result.is_finished)
                self.assertIsNone(result.started_at)
                self.assertIsNone(result.last_attempted_at)
                self.assertIsNone(result.finished_at)
                with self.assertRaisesMessage(ValueError, "Task has not finished yet"):
                    result.return_value  # noqa: B018
                self.assertEqual(result.task, task)
                self.assertEqual(result.args, [])
                self.assertEqual(result.kwargs, {})
                self.assertEqual(result.attempts, 0)

    def test_catches_exception(self) -> None:
        test_data = [
            (
                self.tasks.failing_task_value_error,
                ValueError,
                "This task failed due to ValueError",
            ),
            (
                self.tasks.failing_task_system_exit,
                SystemExit,
                "This task failed due to SystemExit",
            ),
        ]
        for task, exception, message in test_data:
            with self.subTest(task):
                result = task.enqueue()

                with self.assertLogs(LOGGER, "DEBUG"):
                    self.run_worker()

                result.refresh()

                self.assertEqual(result.status, TaskResultStatus.FAILED)
                with self.assertRaisesMessage(ValueError, "Task failed"):
                    result.return_value  # noqa: B018
                self.assertTrue(result.is_finished)
                self.assertIsNotNone(result.started_at)
                self.assertIsNotNone(result.last_attempted_at)
                self.assertIsNotNone(result.finished_at)
                self.assertGreaterEqual(result.started_at, result.enqueued_at)
                self.assertGreaterEqual(result.finished_at, result.started_at)
                self.assertEqual(result.errors[0].exception_class, exception)
                traceback = result.errors[0].traceback
                self.assertTrue(
                    traceback and traceback.endswith(f"{exception.__name__}: {message}\n"),
                    traceback,
                )
                self.assertEqual(result.task, task)
                self.assertEqual(result.args, [])
                self.assertEqual(result.kwargs, {})
                self.assertEqual(result.attempts, 1)

    def test_complex_exception(self) -> None:
        result = self.tasks.complex_exception.enqueue()

        with self.assertLogs(LOGGER, "DEBUG"):
            self.run_worker()

        result.refresh()

        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)

        self.assertIsNone(result._return_value)
        self.assertEqual(result.errors[0].exception_class, ValueError)
        self.assertIn('ValueError(ValueError("This task failed"))', result.errors[0].traceback)

        self.assertEqual(result.task, self.tasks.complex_exception)
        self.assertEqual(result.args, [])
        self.assertEqual(result.kwargs, {})
        self.assertEqual(result.attempts, 1)

    def test_complex_return_value(self) -> None:
        result = self.tasks.complex_return_value.enqueue()

        with self.assertLogs(LOGGER, "DEBUG"):
            self.run_worker()

        result.refresh()

        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)

        self.assertIsNone(result._return_value)
        # adapted: not RQ's placeholder and Exception, but normalize_json's TypeError
        self.assertEqual(result.errors[0].exception_class, TypeError)

    def test_get_result(self) -> None:
        result = default_task_backend().enqueue(self.tasks.noop_task, [], {})

        new_result = default_task_backend().get_result(result.id)

        self.assertEqual(result, new_result)

    async def test_get_result_async(self) -> None:
        result = await default_task_backend().aenqueue(self.tasks.noop_task, [], {})

        new_result = await default_task_backend().aget_result(result.id)

        self.assertEqual(result, new_result)

    def test_refresh_result(self) -> None:
        result = default_task_backend().enqueue(self.tasks.calculate_meaning_of_life, (), {})

        self.run_worker()

        self.assertEqual(result.status, TaskResultStatus.READY)
        self.assertFalse(result.is_finished)
        self.assertIsNone(result.started_at)
        self.assertIsNone(result.last_attempted_at)
        self.assertIsNone(result.finished_at)
        self.assertEqual(result.attempts, 0)

        result.refresh()

        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertTrue(result.is_finished)
        self.assertEqual(result.return_value, 42)
        self.assertEqual(result.attempts, 1)

    def test_refresh_result_async(self) -> None:
        result = async_to_sync(default_task_backend().aenqueue)(
            self.tasks.calculate_meaning_of_life, (), {}
        )

        self.run_worker()

        self.assertEqual(result.status, TaskResultStatus.READY)
        self.assertFalse(result.is_finished)
        self.assertIsNone(result.started_at)
        self.assertIsNone(result.last_attempted_at)
        self.assertIsNone(result.finished_at)
        self.assertEqual(result.attempts, 0)

        async_to_sync(result.arefresh)()

        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertTrue(result.is_finished)
        self.assertEqual(result.return_value, 42)
        self.assertEqual(result.attempts, 1)

    def test_get_missing_result(self) -> None:
        with self.assertRaises(TaskResultDoesNotExist):
            default_task_backend().get_result(str(uuid.uuid4()))

    async def test_async_get_missing_result(self) -> None:
        with self.assertRaises(TaskResultDoesNotExist):
            await default_task_backend().aget_result(str(uuid.uuid4()))

    def test_invalid_uuid(self) -> None:
        with self.assertRaises(TaskResultDoesNotExist):
            default_task_backend().get_result("123")

    async def test_async_invalid_uuid(self) -> None:
        with self.assertRaises(TaskResultDoesNotExist):
            await default_task_backend().aget_result("123")

    def test_invalid_task_path(self) -> None:
        job_id = get_queue("default").publish(
            {
                "task": "subprocess.check_output",
                "django_task": {"backend": "default"},
                "args": ["exit", "1"],
            }
        )

        with self.assertRaisesMessage(SuspiciousOperation, "subprocess.check_output"):
            default_task_backend().get_result(job_id)

    def test_check(self) -> None:
        errors = list(default_task_backend().check())

        self.assertEqual(len(errors), 0, errors)

    def test_enqueue_logs(self) -> None:
        with self.assertLogs(LOGGER, level="DEBUG") as captured_logs:
            result = self.tasks.noop_task.enqueue()

        self.assertEqual(len(captured_logs.output), 1)
        self.assertIn("enqueued", captured_logs.output[0])
        self.assertIn(result.id, captured_logs.output[0])

    def test_started_finished_logs(self) -> None:
        result = self.tasks.noop_task.enqueue()

        with self.assertLogs(LOGGER, level="DEBUG") as captured_logs:
            self.run_worker()

        self.assertEqual(len(captured_logs.output), 2)
        self.assertIn("state=RUNNING", captured_logs.output[0])
        self.assertIn(result.id, captured_logs.output[0])

        self.assertIn("state=SUCCESSFUL", captured_logs.output[1])
        self.assertIn(result.id, captured_logs.output[1])

    def test_failed_logs(self) -> None:
        result = self.tasks.failing_task_value_error.enqueue()

        with self.assertLogs(LOGGER, level="DEBUG") as captured_logs:
            self.run_worker()

        self.assertEqual(len(captured_logs.output), 2)
        self.assertIn("state=RUNNING", captured_logs.output[0])
        self.assertIn(result.id, captured_logs.output[0])

        self.assertIn("state=FAILED", captured_logs.output[1])
        self.assertIn(result.id, captured_logs.output[1])

    def test_queue_isolation(self) -> None:
        default_task = self.tasks.noop_task.enqueue()
        other_task = self.tasks.noop_task.using(queue_name="queue-1").enqueue()

        default_task_backend().get_result(default_task.id)
        default_task_backend().get_result(other_task.id)

        self.assertEqual(get_queue("default").state(default_task.id), "ready")
        self.assertIsNone(get_queue("default").state(other_task.id))
        self.assertEqual(get_queue("queue-1").state(other_task.id), "ready")
        self.assertIsNone(get_queue("queue-1").state(default_task.id))

    @override_settings(TASKS={"default": {"BACKEND": BACKEND, "QUEUES": ["queue-2"]}})
    def test_unknown_queue_name(self) -> None:
        errors = list(default_task_backend().check())

        self.assertEqual(len(errors), 1)
        self.assertIn("ZQUEUE['QUEUES']", errors[0].msg)

    def test_takes_context(self) -> None:
        result = self.tasks.get_task_id.enqueue()

        self.run_worker()

        result.refresh()

        self.assertEqual(result.return_value, result.id)

    def test_context(self) -> None:
        result = self.tasks.test_context.enqueue(1)
        self.run_worker()
        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

    def test_validate_on_enqueue(self) -> None:
        with override_settings(
            TASKS={"default": {"BACKEND": BACKEND, "QUEUES": ["unknown_queue"]}}
        ):
            task_with_custom_queue_name = self.tasks.noop_task.using(queue_name="unknown_queue")

        with self.assertRaisesMessage(
            InvalidTask, "Queue 'unknown_queue' is not valid for backend"
        ):
            task_with_custom_queue_name.enqueue()

    async def test_validate_on_aenqueue(self) -> None:
        with override_settings(
            TASKS={"default": {"BACKEND": BACKEND, "QUEUES": ["unknown_queue"]}}
        ):
            task_with_custom_queue_name = self.tasks.noop_task.using(queue_name="unknown_queue")

        with self.assertRaisesMessage(
            InvalidTask, "Queue 'unknown_queue' is not valid for backend"
        ):
            await task_with_custom_queue_name.aenqueue()


class CompatTestCase(SimpleTestCase):
    def test_compat_has_django_task(self) -> None:
        self.assertIn(Task, TASK_CLASSES)
        try:
            from django_tasks.base import Task as BackportTask
        except ImportError:
            pass
        else:
            self.assertIn(BackportTask, TASK_CLASSES)

        try:
            from django.tasks.base import Task as DjangoTask
        except ImportError:
            pass
        else:
            self.assertIn(DjangoTask, TASK_CLASSES)
