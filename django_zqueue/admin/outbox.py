"""The transactional outbox in the Django admin, read-only (registered when
:mod:`django_zqueue.admin` is imported)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from ..models import OutboxEntry


@admin.register(OutboxEntry)
class OutboxAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The transactional outbox (``ZQUEUE["OUTBOX"]``), read-only: jobs enqueued in a
    committed transaction that the relay has not published yet (Redis down, no worker
    or scanner running), and rows set aside with an error. The arguments (``body``) are
    shown to users with ``view_payload`` only."""

    list_display = ("id", "queue", "task", "tag", "created_at", "last_error")
    list_filter = ("queue",)
    search_fields = ("tag", "task")
    ordering = ("id",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = ["id", "queue", "task", "tag", "created_at", "options", "last_error"]
        if request.user.has_perm("django_zqueue.view_payload"):
            fields.insert(4, "arguments")
        return fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.get_fields(request, obj)

    @admin.display(description="body")
    def arguments(self, obj: OutboxEntry) -> str:
        return bytes(obj.body).decode("utf-8", "replace")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
