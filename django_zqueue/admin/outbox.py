"""The transactional outbox in the Django admin (registered when
:mod:`django_zqueue.admin` is imported): read-only rows, and two actions on the rows
ticked, each after a confirmation page, for users with ``manage_jobs`` (and
``ZQUEUE["ADMIN_ACTIONS"]`` on), each written to the admin log per queue:

- **Retry**: a row set aside with an error gets its error cleared, and the next relay
  step (any worker's, or ``zqueue_scanner``'s, within a second or two) publishes it in
  ``id`` order, or sets it aside again with its new error;
- **Discard**: the rows are deleted, their jobs never published."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .. import conf
from ..models import OutboxEntry
from . import audit

#: the permission the actions need (as acting on waiting jobs)
PERMISSION = "django_zqueue.manage_jobs"


def rows(n: int) -> str:
    """``1 row``, ``3 rows`` (the admin log's plain English)."""
    return f"{n} row" if n == 1 else f"{n} rows"


@admin.register(OutboxEntry)
class OutboxAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The transactional outbox (``ZQUEUE["OUTBOX"]``), read-only: jobs enqueued in a
    committed transaction that the relay has not published yet (Redis down, no worker
    or scanner running), and rows set aside with an error. The arguments (``body``) are
    shown to users with ``view_payload`` only."""

    list_display = ("id", "queue", "task", "tag", "created_at", "last_error")
    actions = ["retry", "discard"]
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

    def has_manage_jobs_permission(self, request: HttpRequest) -> bool:
        """The actions' permission: ``manage_jobs``, with ``ADMIN_ACTIONS`` on."""
        return conf.get_config().admin_actions and request.user.has_perm(PERMISSION)

    def _confirm(
        self, request: HttpRequest, queryset: QuerySet[OutboxEntry], action: str, said: str
    ) -> HttpResponse:
        ctx = {
            **self.admin_site.each_context(request),
            "title": _("Are you sure?"),
            "opts": self.model._meta,
            "rows": list(queryset.order_by("id")),
            "action": action,
            "said": said,
        }
        return TemplateResponse(request, "admin/django_zqueue/outboxentry/action_confirm.html", ctx)

    @admin.action(permissions=["manage_jobs"], description=gettext_lazy("Retry the selected rows"))
    def retry(self, request: HttpRequest, queryset: QuerySet[OutboxEntry]) -> HttpResponse | None:
        if request.POST.get("confirm") != "yes":
            n = queryset.count()
            said = _(
                "The error of these %(n)s rows is cleared: the next relay step publishes "
                "them, in order, or sets them aside again with their new error."
            ) % {"n": n}
            return self._confirm(request, queryset, "retry", said)
        by_queue = Counter(queryset.exclude(last_error="").values_list("queue", flat=True))
        done = queryset.exclude(last_error="").update(last_error="")
        for queue, n in sorted(by_queue.items()):
            audit.log(request, queue, "outbox_retry", rows(n))
        self.message_user(
            request, _("%(n)s rows will be published at the next relay step.") % {"n": done}
        )
        return None

    @admin.action(
        permissions=["manage_jobs"], description=gettext_lazy("Discard the selected rows")
    )
    def discard(self, request: HttpRequest, queryset: QuerySet[OutboxEntry]) -> HttpResponse | None:
        if request.POST.get("confirm") != "yes":
            said = _(
                "These %(n)s rows are deleted: their jobs are never published. This "
                "cannot be undone."
            ) % {"n": queryset.count()}
            return self._confirm(request, queryset, "discard", said)
        by_queue = Counter(queryset.values_list("queue", flat=True))
        done, _kinds = queryset.delete()
        for queue, n in sorted(by_queue.items()):
            audit.log(request, queue, "outbox_discard", rows(n))
        self.message_user(request, _("%(n)s rows discarded.") % {"n": done}, messages.WARNING)
        return None
