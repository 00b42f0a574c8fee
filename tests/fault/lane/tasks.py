"""Imported by the worker's autodiscovery: registers the ``async def`` demo tasks."""

from testproject.demo import async_tasks  # noqa: F401
