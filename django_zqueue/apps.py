from __future__ import annotations

from django.apps import AppConfig


class ZQueueConfig(AppConfig):
    name = "django_zqueue"
    verbose_name = "ZQueue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks (and Django's Tasks checks when TASKS names our
        # backend); never touches Redis.
        from .ops import checks

        checks.register_tasks_checks()
