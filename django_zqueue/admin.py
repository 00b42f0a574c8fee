"""The read-only dashboard in the Django admin, built on :mod:`django_zqueue.dashboard`.

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
                                            ``add/``: their actions (POST only)
==========================================  ===================================

Permissions: ``view_queue`` for every page (403 without it); ``view_payload`` to see
job arguments and error text; ``manage_dead_letters`` for the actions, which also need
``ZQUEUE["ADMIN_ACTIONS"]`` (404 when it is False). GET requests only read Redis.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseRedirect,
)
from django.template.loader import get_template
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.decorators import method_decorator
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from . import (
    actions,
    admin_durable,
    admin_outbox,  # noqa: F401 (registers the outbox's admin)
    admin_paging,
    admin_search,
    conf,
    dashboard,
    display,
    filters,
    humanize,
    schedules_page,
    taskstats,
    workers_page,
)
from .admin_bulk import Across
from .exceptions import QueueUnavailable, UnknownQueue
from .metrics import available as metrics_available
from .models import Queue as QueueModel
from .queue import Queue, get_queue
from .queue.durable_calls import durable_records

#: the tabs' names
TAB_LABELS = {
    "ready": gettext_lazy("ready"),
    "delayed": gettext_lazy("delayed"),
    "waiting": gettext_lazy("waiting"),
    "leased": gettext_lazy("in flight"),
    "dead": gettext_lazy("dead letters"),
    "finished": gettext_lazy("finished"),
}
#: the Finished tab's filters: every state a job can end in, or one
ENDED_LABELS = {
    None: gettext_lazy("all"),
    "succeeded": gettext_lazy("succeeded"),
    "dead": gettext_lazy("dead"),
    "cancelled": gettext_lazy("cancelled"),
    "expired": gettext_lazy("expired"),
}
#: at most this many tags per requeue/delete request
MAX_TAGS = dashboard.MAX_PER_PAGE

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


def _queues() -> list[Queue]:
    return [get_queue(name) for name in conf.get_config().queues]


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[QueueModel]
else:  # ModelAdmin is generic only in django-stubs
    _ModelAdmin = admin.ModelAdmin


@admin.register(QueueModel)
class QueueAdmin(_ModelAdmin):
    """Overview, queue, job and search pages, and the dead-letter actions."""

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

    def get_urls(self) -> list[URLPattern]:
        def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
            return self.admin_site.admin_view(self._unavailable_as_503(view))

        return [
            path("", wrap(self.changelist_view), name=self._name("changelist")),
            path("search/", wrap(self.search_view), name=self._name("search")),
            path("metrics/", wrap(self.metrics_view), name=self._name("metrics")),
            path("workers/", wrap(self.workers_view), name=self._name("workers")),
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
            path("q/<str:queue>/signal/", wrap(self.signal_view), name=self._name("signal")),
            path("schedules/", wrap(self.schedules_view), name=self._name("schedules")),
            path("schedules/do/", wrap(self.schedule_do_view), name=self._name("schedule_do")),
            path("schedules/add/", wrap(self.schedule_add_view), name=self._name("schedule_add")),
        ]

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

    # ------------------------------------------------------------ pages

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The overview: every configured queue, with its last hour."""
        self._require_view(request)
        queues = _queues()
        summaries = dashboard.overview(queues)
        rows = [
            {
                "s": s,
                "url": self.url("queue", s.name),
                "depth": s.depth_chart(),
                "throughput": s.throughput_chart(),
            }
            for s in summaries
        ]
        ctx = self._context(
            request,
            _("Queues"),
            rows=rows,
            schedules=dashboard.schedules(queues),
            perms=self._perms(request),
            metrics_url=self.url("metrics") if metrics_available() else None,
            workers_url=self.url("workers"),
            schedules_url=self.url("schedules"),
            search_url=self.url("search"),
            **(extra_context or {}),
        )
        return TemplateResponse(request, "admin/django_zqueue/overview.html", ctx)

    def queue_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """One page of one state of a queue."""
        self._require_view(request)
        q = self._queue(queue)
        state, per_page = admin_paging.page_params(request)
        perms = self._perms(request)
        pg, sc, flt = admin_paging.listing(q, state, request, per_page, perms["payload"])
        link, scan_link = admin_paging.queue_links(self.url, queue, state, per_page, flt, pg.ended)
        ctx = self._context(
            request,
            _("Queue %(queue)s") % {"queue": queue},
            (queue, None),
            queue=queue,
            page=pg,
            tabs=self._tabs(queue, pg),
            pages=[] if sc else admin_paging.page_links(pg, link),
            prev_url=link(pg.number - 1) if pg.number > 1 and not sc else None,
            next_url=link(pg.number + 1) if pg.number < pg.pages and not sc else None,
            per_page_choices=admin_paging.per_page_choices(
                lambda n: self.url("queue", queue, state=state, ended=pg.ended, per_page=n),
                per_page,
            ),
            ended_filters=[
                {
                    "state": s,
                    "label": ENDED_LABELS[s],
                    "count": n,
                    "url": self.url("queue", queue, state="finished", ended=s),
                    "current": s == pg.ended,
                }
                for s, n in pg.ended_filters
            ]
            if state == "finished"
            else None,
            tasks=display.task_rows(taskstats.read(q)),
            scan=sc,
            filter=flt,
            scan_window=filters.WINDOW,
            scan_next=scan_link(sc.window + 1) if sc and sc.more else None,
            clear_url=self.url("queue", queue, state=state),
            perms=perms,
            search_url=self.url("search"),
            find_url=self.url("find", queue),
            job_url=self.url("job", queue),
            row_actions=self._actions(request, queue, state),
            purge_url=self.url("purge", queue),
            pause_url=self.url("pause", queue),
            paused=q.is_paused(),
            # the Groups table counts jobs ready and in flight: not on the Finished tab
            groups=q.read.groups(top=20)
            if q.options.fairness == "groups" and state != "finished"
            else None,
            here=scan_link(sc.window) if sc else link(pg.number),
        )
        return TemplateResponse(request, "admin/django_zqueue/queue.html", ctx)

    def _tabs(self, queue: str, pg: dashboard.Page) -> list[dict[str, Any]]:
        """The tabs of the queue page, one per state, with their counts."""
        return [
            {
                "state": s,
                "label": TAB_LABELS[s],
                "count": pg.counts[s],
                "url": self.url("queue", queue, state=s if s != "ready" else None),
                "current": s == pg.state,
            }
            for s in dashboard.TABS
        ]

    def job_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """Everything known about one job (``?id=<tag>``)."""
        self._require_view(request)
        q = self._queue(queue)
        tag = request.GET.get("id", "")
        perms = self._perms(request)
        detail = dashboard.job(q, tag, payload=perms["payload"])
        if detail is None:
            ctx = self._context(
                request,
                _("No such job"),
                (queue, self.url("queue", queue)),
                (_("not found"), None),
                queue=queue,
                tag=tag,
                queue_url=self.url("queue", queue),
                search_url=self.url("search"),
            )
            return TemplateResponse(
                request, "admin/django_zqueue/job_missing.html", ctx, status=404
            )
        state_tab = {"orphan": "ready"}.get(detail.info.state, detail.info.state)
        ended = None
        if state_tab in dashboard.ENDED and state_tab != "dead":  # the Finished tab's filter
            state_tab, ended = "finished", state_tab
        ctx = self._context(
            request,
            _("Job %(tag)s") % {"tag": tag},
            (queue, self.url("queue", queue)),
            (tag, None),
            queue=queue,
            job=detail,
            arguments_html=display.arguments_html(
                detail.info.body, display.model_link(self.admin_site)
            )
            if detail.arguments is not None
            else None,
            perms=perms,
            queue_url=self.url("queue", queue),
            state_url=self.url("queue", queue, state=state_tab, ended=ended),
            job_actions=self._actions(request, queue, detail.info.state),
            links=self._links(q, tag),
            durable=durable_records(q, tag),  # a durable task's steps (docs/durable.md)
            signal_url=self.url("signal", queue) if perms["pause"] else None,
            here=self.url("job", queue, id=tag),
        )
        return TemplateResponse(request, "admin/django_zqueue/job.html", ctx)

    def _links(self, q: Queue, tag: str) -> dict[str, Any] | None:
        """A workflow job's parents and dependents (the first 50 of each), linked."""
        links = q.read.links(tag)
        if links is None:
            return None

        def rows(jobs: list[Any]) -> list[dict[str, Any]]:
            return [
                {"j": j, "url": self.url("job", j.queue, id=j.tag) if j.state else None}
                for j in jobs
            ]

        return {"l": links, "parents": rows(links.parents), "children": rows(links.children)}

    def search_view(self, request: HttpRequest) -> HttpResponse:
        """Find job ``?q=<tag>`` (in ``?queue=<name>``, or in every queue): redirect to its
        page when one queue has it, else list the matches or say none was found."""
        self._require_view(request)
        tag = request.GET.get("q", "").strip()
        only = request.GET.get("queue")
        queues = [self._queue(only)] if only else _queues()
        found = dashboard.locate(queues, tag) if tag else []
        if len(found) == 1:
            return HttpResponseRedirect(self.url("job", found[0].queue, id=found[0].tag))
        ctx = self._context(
            request,
            _("Find a job"),
            (_("find a job"), None),
            tag=tag,
            searched=[q.name for q in queues],
            found=[
                {
                    "loc": loc,
                    "url": self.url("job", loc.queue, id=loc.tag),
                    "rank": humanize.count(loc.rank),
                    "when": dashboard.location_when(loc),
                }
                for loc in found
            ],
            valid=dashboard.valid_tag(tag),
            search_url=self.url("search"),
            only=only,
        )
        return TemplateResponse(request, "admin/django_zqueue/search.html", ctx)

    def find_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """Jobs of one state whose arguments hold a text (admin_search.py): the
        arguments are payload, so ``view_payload`` is needed too."""
        self._require_view(request)
        if not self._perms(request)["payload"]:
            raise MissingPermission("view_payload")
        return admin_search.page(self, request, self._queue(queue))

    def workers_view(self, request: HttpRequest) -> HttpResponse:
        """Every worker registered in a configured queue, with the jobs it holds."""
        self._require_view(request)
        page = workers_page.workers(_queues(), lambda q, tag: self.url("job", q, id=tag))
        ctx = self._context(request, _("Workers"), (_("workers"), None), page=page)
        return TemplateResponse(request, "admin/django_zqueue/workers.html", ctx)

    def schedules_view(self, request: HttpRequest) -> HttpResponse:
        """Every periodic schedule, with its buttons and the add form
        (:mod:`~django_zqueue.schedules_page`)."""
        return schedules_page.page(self, request)

    @method_decorator(require_POST)
    def schedule_do_view(self, request: HttpRequest) -> HttpResponse:
        return schedules_page.do(self, request)

    @method_decorator(require_POST)
    def schedule_add_view(self, request: HttpRequest) -> HttpResponse:
        return schedules_page.add(self, request)

    @method_decorator(require_POST)
    def signal_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """Send an event to a durable job that waits for it (admin_durable.py)."""
        return admin_durable.signal(self, request, queue)

    def metrics_view(self, request: HttpRequest) -> HttpResponse:
        """The Prometheus text format for every configured queue (staff with view)."""
        self._require_view(request)
        from .metrics import metrics_response

        return metrics_response()

    # ------------------------------------------------------------ actions

    def require_actions(self, request: HttpRequest, codename: str) -> None:
        """``view_queue``, ``ADMIN_ACTIONS`` (404 when off) and ``codename`` (403)."""
        self._require_view(request)
        if not conf.get_config().admin_actions:
            raise Http404("admin actions are off (ZQUEUE['ADMIN_ACTIONS'] = False)")
        if not request.user.has_perm(f"{self.opts.app_label}.{codename}"):
            raise MissingPermission(codename)

    def _require_actions(self, request: HttpRequest, queue: str, codename: str) -> Queue:
        self.require_actions(request, codename)
        return self._queue(queue)

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

    def _tags(self, request: HttpRequest) -> list[str]:
        tags = [t for t in request.POST.getlist("tags") if dashboard.valid_tag(t)]
        return list(dict.fromkeys(tags))[:MAX_TAGS]

    def _back(self, request: HttpRequest, queue: str, state: str) -> HttpResponseRedirect:
        target = request.POST.get("next", "")
        if not target or not url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            target = self.url("queue", queue, state=state)
        return HttpResponseRedirect(target)

    @method_decorator(require_POST)
    def action_view(self, request: HttpRequest, queue: str, action: str) -> HttpResponse:
        """Run ``action`` (:data:`~django_zqueue.actions.ACTIONS`) on the selected jobs
        ``tags``; a destructive one first asks on a confirmation page."""
        found = actions.ACTIONS.get(action)
        if found is None:
            raise Http404(f"no action {action!r}")
        q = self._require_actions(request, queue, found.permission)
        tags = self._tags(request)
        across = None
        if request.POST.get("select_across") == "1":  # every job of the tab that matches
            across = Across.of(request.POST, found, self._perms(request)["payload"])
            if across is None:
                return HttpResponseBadRequest(f"{action} is not offered on every job of a tab")
        if found.confirm and (tags or across) and request.POST.get("confirm") != "yes":
            what = actions.counted(found.what, len(tags))
            if across is not None:
                what = across.what(found, q.read.listing(across.state, 1, 1).counts[across.state])
            ctx = self._context(
                request,
                found.title % {"what": what},
                (queue, self.url("queue", queue, state=found.states[0])),
                (str(found.label).lower(), None),
                question=found.confirm % {"what": what},
                tags=[] if across else tags,
                across=across.fields() if across else None,
                action_url=self.url("action", queue, found.name),
                next=request.POST.get("next", ""),
                back_url=self.url("queue", queue, state=found.states[0]),
            )
            return TemplateResponse(request, "admin/django_zqueue/action_confirm.html", ctx)
        args: tuple[int, ...] = ()
        if found.value:
            lo, hi = found.value_range
            raw = request.POST.get("value", "").strip()
            if not raw.lstrip("-").isdigit() or not lo <= int(raw) <= hi:
                return HttpResponseBadRequest(f"{found.value} must be an integer in [{lo}, {hi}]")
            args = (int(raw),)
        if across is not None:
            good, text = across.run(q, found)
            (messages.success if good else messages.warning)(request, text)
            return self._back(request, queue, across.state)
        done = sum(found.run(q, t, *args) for t in tags)
        for good, text in actions.outcome(found, done, len(tags)):
            (messages.success if good else messages.warning)(request, text)
        return self._back(request, queue, found.states[0])

    @method_decorator(require_POST)
    def pause_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """Pause (``op=pause``) or resume (``op=resume``) a queue (:meth:`Queue.pause`)."""
        q = self._require_actions(request, queue, "manage_jobs")
        op = request.POST.get("op")
        if op == "pause":
            q.pause()
            messages.success(
                request,
                _("Queue %(queue)s paused: workers take none of its jobs.") % {"queue": queue},
            )
        elif op == "resume":
            q.resume()
            messages.success(request, _("Queue %(queue)s resumed.") % {"queue": queue})
        else:
            return HttpResponseBadRequest("op must be pause or resume")
        return HttpResponseRedirect(self.url("queue", queue))

    @method_decorator(require_POST)
    def purge_dead_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """Delete every dead letter of the queue, after a confirmation page."""
        q = self._require_actions(request, queue, "manage_dead_letters")
        if request.POST.get("confirm") != "yes":
            ctx = self._context(
                request,
                _("Purge the dead letters of %(queue)s?") % {"queue": queue},
                (queue, self.url("queue", queue, state="dead")),
                (_("purge dead letters"), None),
                queue=queue,
                count=q.counts()["dead"],
                queue_url=self.url("queue", queue, state="dead"),
                purge_url=self.url("purge", queue),
            )
            return TemplateResponse(request, "admin/django_zqueue/purge_confirm.html", ctx)
        n = q.purge_dead()
        text = ngettext(
            "Purged %(n)s dead letter of %(queue)s.", "Purged %(n)s dead letters of %(queue)s.", n
        )
        messages.success(request, text % {"n": humanize.count(n), "queue": queue})
        return HttpResponseRedirect(self.url("queue", queue, state="dead"))
