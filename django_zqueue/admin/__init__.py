"""The read-only dashboard in the Django admin, built on :mod:`django_zqueue.admin.dashboard`.

The unmanaged :class:`~django_zqueue.models.Queue` model gives the admin an entry and the
permissions; adding, changing and deleting are off. The entry's changelist is the
overview; the other pages come from :meth:`QueueAdmin.get_urls`, each wrapped in
``admin_site.admin_view`` (login as staff, CSRF protection, no caching):

==========================================  ===================================
``<admin>/django_zqueue/queue/``            overview of every configured queue
``…/q/<queue>/?state=ready&page=N``         one page of a queue's jobs (tabs:
                                            ready, delayed, waiting, leased,
                                            dead, finished: the jobs that ended,
                                            ``&ended=`` one way)
``…/q/<queue>/job/?id=<tag>``               one job
``…/search/?q=<tag>[&queue=<queue>]``       find a job by tag: redirect to it
``…/q/<queue>/find/?state=…&text=…``        jobs whose arguments hold a text
                                            (``view_payload``; paged by cursor)
``…/q/<queue>/dead/{requeue,delete,purge}/``  dead-letter actions (POST only)
``…/metrics/``                              Prometheus text format
``…/schedules/``                            periodic schedules; ``do/`` and
                                            ``add/``: their actions (POST only);
                                            ``edit/?name=``: a runtime one's form
``…/workers/``                              the workers; ``do/``: quiet or stop
                                            one (POST only, confirmed)
==========================================  ===================================

Permissions: ``view_queue`` for every page (403 without it); ``view_payload`` to see
job arguments and error text; ``manage_dead_letters`` for the actions, which also need
``ZQUEUE["ADMIN_ACTIONS"]`` (404 when it is False). GET requests only read Redis.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_POST

from ..models import Queue as QueueModel
from . import (
    durable as admin_durable,
)
from . import (
    outbox as admin_outbox,  # noqa: F401 (registers the outbox's admin)
)
from . import (
    schedules_page,
    workers_page,
)
from .action_views import MAX_TAGS as MAX_TAGS
from .action_views import QueueActions
from .base import MissingPermission as MissingPermission
from .page_views import ENDED_LABELS as ENDED_LABELS
from .page_views import TAB_LABELS as TAB_LABELS
from .page_views import QueuePages


@admin.register(QueueModel)
class QueueAdmin(QueuePages, QueueActions):
    """Overview, queue, job and search pages (:class:`~django_zqueue.admin.page_views.QueuePages`),
    the dead-letter and job actions (:class:`~django_zqueue.admin.action_views.QueueActions`),
    the schedules, workers and metrics pages, on the plumbing of
    :class:`~django_zqueue.admin.base.QueueAdminBase`."""

    def get_urls(self) -> list[URLPattern]:
        def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
            return self.admin_site.admin_view(self._unavailable_as_503(view))

        return [
            path("", wrap(self.changelist_view), name=self._name("changelist")),
            path("search/", wrap(self.search_view), name=self._name("search")),
            path("metrics/", wrap(self.metrics_view), name=self._name("metrics")),
            path("workers/", wrap(self.workers_view), name=self._name("workers")),
            path("workers/do/", wrap(self.worker_do_view), name=self._name("worker_do")),
            path("q/<str:queue>/", wrap(self.queue_view), name=self._name("queue")),
            path("q/<str:queue>/job/", wrap(self.job_view), name=self._name("job")),
            path("q/<str:queue>/find/", wrap(self.find_view), name=self._name("find")),
            path(
                "q/<str:queue>/do/<str:action>/", wrap(self.action_view), name=self._name("action")
            ),
            # the dead-letter actions' first URLs
            path("q/<str:queue>/dead/requeue/", wrap(self.action_view), {"action": "requeue"}),
            path("q/<str:queue>/dead/delete/", wrap(self.action_view), {"action": "delete"}),
            path("q/<str:queue>/dead/purge/", wrap(self.purge_dead_view), name=self._name("purge")),
            path("q/<str:queue>/pause/", wrap(self.pause_view), name=self._name("pause")),
            path("q/<str:queue>/unblock/", wrap(self.unblock_view), name=self._name("unblock")),
            path("q/<str:queue>/signal/", wrap(self.signal_view), name=self._name("signal")),
            path("schedules/", wrap(self.schedules_view), name=self._name("schedules")),
            path("schedules/do/", wrap(self.schedule_do_view), name=self._name("schedule_do")),
            path("schedules/add/", wrap(self.schedule_add_view), name=self._name("schedule_add")),
            path(
                "schedules/edit/", wrap(self.schedule_edit_view), name=self._name("schedule_edit")
            ),
        ]

    def schedules_view(self, request: HttpRequest) -> HttpResponse:
        """Every periodic schedule, with its buttons and the add form
        (:mod:`~django_zqueue.admin.schedules_page`)."""
        return schedules_page.page(self, request)

    @method_decorator(require_POST)
    def schedule_do_view(self, request: HttpRequest) -> HttpResponse:
        return schedules_page.do(self, request)

    @method_decorator(require_POST)
    def schedule_add_view(self, request: HttpRequest) -> HttpResponse:
        return schedules_page.add(self, request)

    def schedule_edit_view(self, request: HttpRequest) -> HttpResponse:
        """A runtime schedule's edit form (GET) and its change (POST)."""
        return schedules_page.edit(self, request)

    @method_decorator(require_POST)
    def worker_do_view(self, request: HttpRequest) -> HttpResponse:
        """Quiet or stop one worker, after a confirmation (workers_page.py)."""
        return workers_page.do(self, request)

    @method_decorator(require_POST)
    def signal_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """Send an event to a durable job that waits for it (admin_durable.py)."""
        return admin_durable.signal(self, request, queue)

    def metrics_view(self, request: HttpRequest) -> HttpResponse:
        """The Prometheus text format for every configured queue (staff with view)."""
        self._require_view(request)
        from ..ops.metrics import metrics_response

        return metrics_response()
