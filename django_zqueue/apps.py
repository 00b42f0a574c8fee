from __future__ import annotations

from django.apps import AppConfig


class ZQueueConfig(AppConfig):
    name = "django_zqueue"
    verbose_name = "ZQueue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks; never touches Redis.
        from . import checks  # noqa: F401
