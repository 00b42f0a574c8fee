"""The actions of the queue admin (POST only): an action of
:data:`~django_zqueue.admin.actions.ACTIONS` on the jobs selected (or on every job of a tab that
matches, :mod:`django_zqueue.admin.bulk`), after a confirmation page for a destructive
one; pausing and resuming a queue; purging its dead letters. Each needs ``view_queue``,
``ZQUEUE["ADMIN_ACTIONS"]`` (404 when it is False) and its own permission (403)."""

from __future__ import annotations

from django.contrib import messages
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.utils.decorators import method_decorator
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from .. import conf
from ..conf.bounds import ordering_key_problem
from ..queue import Queue
from ..web import humanize
from . import actions, audit, dashboard
from .base import MissingPermission, QueueAdminBase
from .bulk import Across

#: at most this many tags per requeue/delete request
MAX_TAGS = dashboard.MAX_PER_PAGE


class QueueActions(QueueAdminBase):
    """The action, pause and purge views, and what they check."""

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
        """Run ``action`` (:data:`~django_zqueue.admin.actions.ACTIONS`) on the selected jobs
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
                tally = across.tally(q) if across.flt.active else None
                total = q.read.listing(across.state, 1, 1).counts[across.state]
                what = across.what(found, total, tally)
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
            good, text, done = across.run(q, found)
            audit.acted(request, queue, found.name, done, None)
            (messages.success if good else messages.warning)(request, text)
            return self._back(request, queue, across.state)
        done = sum(found.run(q, t, *args) for t in tags)
        if tags:
            audit.acted(request, queue, found.name, done, len(tags))
        for good, text in actions.outcome(found, done, len(tags)):
            (messages.success if good else messages.warning)(request, text)
        return self._back(request, queue, found.states[0])

    @method_decorator(require_POST)
    def pause_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """Pause (``op=pause``) or resume (``op=resume``) a queue (:meth:`Queue.pause`)."""
        q = self._require_actions(request, queue, "manage_jobs")
        op = request.POST.get("op")
        if op == "pause" and request.POST.get("confirm") != "yes":
            ready = humanize.count(q.counts()["ready"])
            ctx = self._context(
                request,
                _("Pause queue %(queue)s?") % {"queue": queue},
                (queue, self.url("queue", queue)),
                (_("pause"), None),
                question=_(
                    "Pause queue %(queue)s? Its %(n)s ready jobs wait, and no worker is "
                    "handed any of its jobs until it is resumed; jobs already running finish."
                )
                % {"queue": queue, "n": ready},
                tags=[],
                across=[("op", "pause")],
                action_url=self.url("pause", queue),
                next="",
                back_url=self.url("queue", queue),
            )
            return TemplateResponse(request, "admin/django_zqueue/action_confirm.html", ctx)
        if op == "pause":
            q.pause()
            audit.log(request, queue, "pause", "the queue")
            messages.success(
                request,
                _("Queue %(queue)s paused: workers take none of its jobs.") % {"queue": queue},
            )
        elif op == "resume":
            q.resume()
            audit.log(request, queue, "resume", "the queue")
            messages.success(request, _("Queue %(queue)s resumed.") % {"queue": queue})
        else:
            return HttpResponseBadRequest("op must be pause or resume")
        return HttpResponseRedirect(self.url("queue", queue))

    @method_decorator(require_POST)
    def unblock_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """Let an ordering key go on without its holder (``engine.order.unblock``;
        docs/job-control.md, "Strict order per key")."""
        q = self._require_actions(request, queue, "manage_jobs")
        key = request.POST.get("key", "")
        if ordering_key_problem(key):
            return HttpResponseBadRequest("key must be an ordering key")
        if q.engine.order.unblock(key):
            messages.success(
                request,
                _("Key %(key)s unblocked: its next job runs, without the job that held it.")
                % {"key": key},
            )
        else:
            messages.warning(request, _("Key %(key)s had no holder.") % {"key": key})
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
        audit.log(request, queue, "purge", f"{audit.jobs(n)} (every dead letter)")
        text = ngettext(
            "Purged %(n)s dead letter of %(queue)s.", "Purged %(n)s dead letters of %(queue)s.", n
        )
        messages.success(request, text % {"n": humanize.count(n), "queue": queue})
        return HttpResponseRedirect(self.url("queue", queue, state="dead"))
