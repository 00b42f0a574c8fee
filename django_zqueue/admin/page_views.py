"""The pages of the queue admin that show what Redis holds (GET only): the overview,
a queue's page with its tabs, a job's page, finding a job by its tag or its arguments,
and the workers. Each reads through :mod:`django_zqueue.admin.dashboard`."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..ops.metrics import available as metrics_available
from ..queue import Queue
from ..queue.durable_calls import durable_records
from ..web import humanize
from ..worker import taskstats
from . import chart_ranges, dashboard, display, filters, workers_page
from . import durable as admin_durable
from . import history as admin_history
from . import paging as admin_paging
from . import search as admin_search
from .base import MissingPermission, QueueAdminBase, configured_queues

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


class QueuePages(QueueAdminBase):
    """The overview, queue, job, search, find and workers pages."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The overview: every configured queue, with its last hour."""
        self._require_view(request)
        queues = configured_queues()
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
        pg, sc, flt, hist = self._listing(request, q, state, per_page, perms["payload"])
        link, scan_link = admin_paging.queue_links(self.url, queue, state, per_page, flt, pg.ended)
        ctx = self._context(
            request,
            _("Queue %(queue)s") % {"queue": queue},
            (queue, None),
            queue=queue,
            page=pg,
            tabs=self._tabs(queue, pg),
            pages=[] if sc or hist else admin_paging.page_links(pg, link),
            prev_url=link(pg.number - 1) if pg.number > 1 and not (sc or hist) else None,
            next_url=link(pg.number + 1) if pg.number < pg.pages and not (sc or hist) else None,
            per_page_choices=admin_paging.per_page_choices(
                lambda n: self.url("queue", queue, state=state, ended=pg.ended, per_page=n),
                per_page,
            ),
            ended_filters=self._ended_filters(queue, pg) if state == "finished" else None,
            tasks=display.task_rows(taskstats.read(q)),
            **self._range_charts(request, q, state, pg),
            history=hist,
            spans=list(admin_history.SPANS),
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
            # strict order per key: the keys holding jobs back (docs/job-control.md)
            blocked=q.engine.order.blocked(limit=10) if state != "finished" else None,
            unblock_url=self.url("unblock", queue),
            here=scan_link(sc.window) if sc else link(pg.number),
        )
        return TemplateResponse(request, "admin/django_zqueue/queue.html", ctx)

    def _ended_filters(self, queue: str, pg: dashboard.Page) -> list[dict[str, Any]]:
        """The Finished tab's filters by how the jobs ended, with their counts."""
        return [
            {
                "state": s,
                "label": ENDED_LABELS[s],
                "count": n,
                "url": self.url("queue", queue, state="finished", ended=s),
                "current": s == pg.ended,
            }
            for s, n in pg.ended_filters
        ]

    def _range_charts(
        self, request: HttpRequest, q: Queue, state: str, pg: dashboard.Page
    ) -> dict[str, Any]:
        """The Activity charts of the range asked (1 h, 24 h, 7 days) and the switcher."""
        shown = chart_ranges.chosen(request)
        return {
            "range_charts": chart_ranges.charts(q, shown),
            "ranges": chart_ranges.links(
                lambda key: (
                    self.url("queue", q.name, state=state, ended=pg.ended, range=key)
                    + "#zq-range-charts"
                ),
                shown,
            ),
        }

    def _listing(
        self, request: HttpRequest, q: Queue, state: str, per_page: int, payload: bool
    ) -> tuple[dashboard.Page, filters.Scan | None, filters.Filter, admin_history.History | None]:
        """The queue view's listing (:func:`~.paging.listing`), or the Finished tab
        filtered (task, error, arguments, since: :mod:`.history`) with its read."""

        def more(**query: Any) -> str:
            return self.url("queue", q.name, state=state, **query)

        hist = None
        if state == "finished":
            hist = admin_history.read(q, request, per_page, payload, more)
        if hist is not None:
            return hist.page, None, filters.Filter(), hist
        pg, sc, flt = admin_paging.listing(q, state, request, per_page, payload)
        if state == "delayed" and pg.rows:  # a parked durable job shows its own state
            pg = admin_durable.with_parked(q, pg)
        return pg, sc, flt, None

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
        steps = durable_records(q, tag)  # a durable task's steps (docs/durable.md)
        parked = admin_durable.parked_now(q, tag, steps)
        ctx = self._context(
            request,
            _("Job %(tag)s") % {"tag": tag},
            (queue, self.url("queue", queue)),
            (tag, None),
            queue=queue,
            job=detail,
            parked=parked,
            waits=admin_durable.waited_names(steps, parked),
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
            chunk=self._chunk(q, tag),
            durable=steps,
            # what it said, per attempt (docs/admin.md, "Job logs"): with its arguments' permission
            job_log=q.read.log(tag) if perms["payload"] else None,
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

    def _chunk(self, q: Queue, tag: str) -> list[dict[str, Any]] | None:
        """A chunk task's job: the jobs of its latest handler call, in the call's order,
        each linked (this job marked, not linked); None for any other job."""
        tags = q.read.chunk_members(tag)
        if tags is None:
            return None
        return [
            {"tag": t, "url": None if t == tag else self.url("job", q.name, id=t)} for t in tags
        ]

    def search_view(self, request: HttpRequest) -> HttpResponse:
        """Find job ``?q=<tag>`` (in ``?queue=<name>``, or in every queue): redirect to its
        page when one queue has it, else list the matches or say none was found."""
        self._require_view(request)
        tag = request.GET.get("q", "").strip()
        only = request.GET.get("queue")
        queues = [self._queue(only)] if only else configured_queues()
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
        page = workers_page.workers(configured_queues(), lambda q, tag: self.url("job", q, id=tag))
        ctx = self._context(
            request,
            _("Workers"),
            (_("workers"), None),
            page=page,
            may_order=workers_page.may_order(self.opts.app_label, request),
            do_url=self.url("worker_do"),
        )
        return TemplateResponse(request, "admin/django_zqueue/workers.html", ctx)
