"""What every page of the queue admin stands on (:class:`QueueAdminBase`): its URLs by
name, the admin's context and look, the permissions a page needs and those a user has,
the buttons of the actions a user may run, and the 503 and 403 pages. The pages are
:mod:`django_zqueue.admin.page_views`, the actions :mod:`django_zqueue.admin.action_views`; the
registered admin that puts them together is :class:`django_zqueue.admin.QueueAdmin`."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.loader import get_template
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _

from .. import conf
from ..exceptions import QueueUnavailable, UnknownQueue
from ..models import Queue as QueueModel
from ..queue import Queue, get_queue
from . import actions, display

V = TypeVar("V", bound=Callable[..., HttpResponse])


class MissingPermission(PermissionDenied):
    """The user lacks ``codename`` of this app: a 403 page in the admin's look names it."""

    def __init__(self, codename: str) -> None:
        super().__init__(codename)
        self.codename = codename


@cache
def _admin_layout() -> dict[str, bool]:
    """What the admin's base template looks like, so our pages match it: Django 6 writes
    breadcrumbs as ``<ol class="breadcrumbs">`` and renders the object tools outside the
    ``content`` block; Django 5.2 uses ``<div class="breadcrumbs">`` and renders them
    inside it."""
    template = get_template("admin/base.html")
    source = str(getattr(getattr(template, "template", None), "source", ""))
    return {
        "ol_breadcrumbs": 'ol class="breadcrumbs"' in source,
        "tools_outside_content": "titles-and-tools" in source,
    }


def configured_queues() -> list[Queue]:
    """Every queue of ``ZQUEUE["QUEUES"]``."""
    return [get_queue(name) for name in conf.get_config().queues]


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[QueueModel]
else:  # ModelAdmin is generic only in django-stubs
    _ModelAdmin = admin.ModelAdmin


class QueueAdminBase(_ModelAdmin):
    """The plumbing of the queue admin's pages: nothing here is a page."""

    #: the overview, queue and job pages refresh their figures in place this often
    #: (seconds; paused while the browser tab is hidden)
    refresh_seconds = 5

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # ------------------------------------------------------------ plumbing

    def _name(self, view: str) -> str:
        return f"{self.opts.app_label}_{self.opts.model_name}_{view}"

    def url(self, view: str, *args: Any, **query: Any) -> str:
        """The URL of one of this admin's pages (``query`` becomes the query string)."""
        base = reverse(f"{self.admin_site.name}:{self._name(view)}", args=args)
        query = {k: v for k, v in query.items() if v is not None}
        return f"{base}?{urlencode(query)}" if query else base

    def _unavailable_as_503(self, view: V) -> V:
        @wraps(view)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except QueueUnavailable as exc:
                ctx = self._context(request, _("Redis is unavailable"), error=str(exc))
                return TemplateResponse(
                    request, "admin/django_zqueue/unavailable.html", ctx, status=503
                )
            except MissingPermission as exc:
                ctx = self._context(
                    request,
                    _("Permission needed"),
                    codename=f"{self.opts.app_label}.{exc.codename}",
                    permission=display.permission_text(exc.codename),
                )
                return TemplateResponse(
                    request, "admin/django_zqueue/forbidden.html", ctx, status=403
                )

        return cast(V, inner)

    def _require_view(self, request: HttpRequest) -> None:
        if not self.has_view_permission(request):
            raise MissingPermission("view_queue")

    require_view = _require_view

    def _queue(self, name: str) -> Queue:
        try:
            return get_queue(name)
        except UnknownQueue as exc:
            raise Http404(str(exc)) from exc

    def _perms(self, request: HttpRequest) -> dict[str, bool]:
        label = self.opts.app_label
        manage = request.user.has_perm(f"{label}.manage_dead_letters")
        actions_on = conf.get_config().admin_actions
        return {
            "payload": request.user.has_perm(f"{label}.view_payload"),
            "manage": manage,
            "actions_on": actions_on,
            "actions": manage and actions_on,
            "pause": actions_on and request.user.has_perm(f"{label}.manage_jobs"),
        }

    def _context(
        self,
        request: HttpRequest,
        title: str,
        *crumbs: tuple[str, str | None],
        **extra: Any,
    ) -> dict[str, Any]:
        """The admin's context plus ``crumbs``: (label, url) after Home and ZQueue; the
        overview is always the first, the last one has no URL (the current page)."""
        trail = [(_("Queues"), self.url("changelist") if crumbs else None), *crumbs]
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "crumbs": trail,
            "zq_layout": _admin_layout(),
            "refresh_seconds": self.refresh_seconds,
            **extra,
        }

    context = _context

    def _actions(self, request: HttpRequest, queue: str, state: str) -> list[dict[str, Any]]:
        """The buttons of the actions a user may run on a tab."""
        if not conf.get_config().admin_actions:
            return []
        label = self.opts.app_label
        mine = actions.offered(state, lambda code: request.user.has_perm(f"{label}.{code}"))
        return [
            {"a": a, "url": self.url("action", queue, a.name), "danger": a.confirm is not None}
            for a in mine
        ]
