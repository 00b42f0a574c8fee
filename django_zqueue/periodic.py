"""``@periodic``'s import path (``from django_zqueue.periodic import periodic``,
docs/periodic.md). It lives in ``django_zqueue.tasks.schedules.periodic``; this module
only names it."""

from __future__ import annotations

from .tasks.schedules.periodic import periodic

__all__ = ["periodic"]
