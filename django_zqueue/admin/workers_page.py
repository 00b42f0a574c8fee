"""The admin's workers page: every worker registered in a configured queue, shaped for
display from :func:`django_zqueue.read.workers.read_workers`, with its state (running,
quiet, stopping; gone when its heartbeat stopped) and the jobs it holds; and its
buttons, quiet and stop (:func:`do`), which leave an order for the worker
(:mod:`django_zqueue.ops.workerctl`). An order is a POST (CSRF-checked by the admin),
confirmed on a page that says what happens, needs ``manage_jobs`` and
``ZQUEUE["ADMIN_ACTIONS"]`` (404 when it is False), and is written to the admin log."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _

from .. import conf
from ..engine.records import from_ms
from ..exceptions import InvalidArgument
from ..ops import workerctl
from ..read.stats import local_ms
from ..read.workers import MAX_HELD, read_workers
from ..web.humanize import duration
from . import audit
from .dashboard_text import due_in, local_text

if TYPE_CHECKING:
    from ..queue import Queue


@dataclass(frozen=True, slots=True)
class HeldRow:
    queue: str
    tag: str
    url: str
    task: str  # '' when the record does not say
    progress: str  # '37 %', '' when the job never reported any
    started: str  # local time of its start, '' when unknown
    running: str  # for how long, on Redis' clock
    lease_left: str  # time to the lease deadline ('overdue by …' when past)


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: str
    host: str
    pid: int | None
    threads: int
    queues: list[str]
    started: str  # '' for a worker that does not publish it
    up_for: str
    heartbeat: str  # how long ago it was last seen
    live: bool
    jobs: list[HeldRow]
    state: str  # running, quiet or stopping (what it last said)
    order: str | None  # an order left for it, not yet carried out: quiet or stop


@dataclass(frozen=True, slots=True)
class WorkersPage:
    workers: list[WorkerRow]
    capped: bool  # more than MAX_HELD jobs in flight in some queue: not all listed
    max_held: int = MAX_HELD

    @property
    def live(self) -> int:
        return sum(w.live for w in self.workers)

    @property
    def threads(self) -> int:
        return sum(w.threads for w in self.workers if w.live)


def workers(queues: Sequence[Queue], job_url: Callable[[str, str], str]) -> WorkersPage:
    """The rows of the workers page; ``job_url(queue, tag)`` links each held job."""
    reading = read_workers([q.engine for q in queues])
    here = local_ms()
    rows = []
    for w in reading.workers:
        held = [
            HeldRow(
                queue=j.queue,
                tag=j.tag,
                url=job_url(j.queue, j.tag),
                task=j.task or "",
                progress="" if j.progress is None else f"{j.progress * 100:.0f} %",
                started=local_text(from_ms(j.started_ms)) if j.started_ms else "",
                running=duration((reading.now_ms - j.started_ms) / 1000) if j.started_ms else "",
                lease_left=due_in(from_ms(j.deadline_ms), reading.now_ms),
            )
            for j in sorted(w.jobs, key=lambda j: j.started_ms or 0)
        ]
        rows.append(
            WorkerRow(
                id=w.id,
                host=w.host,
                pid=w.pid,
                threads=w.threads,
                queues=sorted(w.queues),
                started=local_text(from_ms(w.started_ms)) if w.started_ms else "",
                up_for=duration((here - w.started_ms) / 1000) if w.started_ms else "",
                heartbeat=duration((here - w.seen_ms) / 1000),
                live=w.live,
                jobs=held,
                state=w.state,
                order=w.order,
            )
        )
    return WorkersPage(rows, reading.capped)


# ---------------------------------------------------------------------- the orders


class QueueAdmin(Protocol):
    """What the orders use of the admin (:class:`django_zqueue.admin.QueueAdmin`)."""

    @property
    def opts(self) -> Any: ...

    def url(self, view: str, *args: Any, **query: Any) -> str: ...

    def require_actions(self, request: HttpRequest, codename: str) -> None: ...

    def context(
        self, request: HttpRequest, title: str, *crumbs: tuple[str, str | None], **extra: Any
    ) -> dict[str, Any]: ...


#: the permission an order needs (as pausing a queue)
PERMISSION = "manage_jobs"


def may_order(label: str, request: HttpRequest) -> bool:
    """Whether the page shows the quiet and stop buttons to this user (``label``: the
    admin's app label)."""
    return conf.get_config().admin_actions and request.user.has_perm(f"{label}.{PERMISSION}")


def what_happens(order: str, worker: str, running: int) -> str:
    """What an order does, said on its confirmation page."""
    if order == "quiet":
        return _(
            "Worker %(worker)s will claim no more jobs. The %(n)s jobs it runs now finish "
            "as usual; then it stays idle (registered, taking nothing) until it is stopped. "
            "It reads the order within a second."
        ) % {"worker": worker, "n": running}
    return _(
        "Worker %(worker)s will claim no more jobs, finish the %(n)s jobs it runs now "
        "within its grace period (--grace), then exit. Jobs it claimed and did not start "
        "go back to their queue; a job still running at the end of the grace period comes "
        "back when its lease expires. It reads the order within a second."
    ) % {"worker": worker, "n": running}


def do(admin: QueueAdmin, request: HttpRequest) -> HttpResponse:
    """Quiet or stop worker ``worker`` (POST ``op``), after a confirmation page."""
    admin.require_actions(request, PERMISSION)
    op, worker = request.POST.get("op", ""), request.POST.get("worker", "")
    back = HttpResponseRedirect(admin.url("workers"))
    if op not in ("quiet", "stop"):
        messages.error(request, _("Unknown operation %(op)r.") % {"op": op})
        return back
    try:
        found = workerctl.find(worker)
        if request.POST.get("confirm") != "yes":
            title = _("Quiet worker %(worker)s?") if op == "quiet" else _("Stop worker %(worker)s?")
            ctx = admin.context(
                request,
                title % {"worker": worker},
                (_("workers"), admin.url("workers")),
                (op, None),
                worker=worker,
                op=op,
                said=what_happens(op, worker, len(found.jobs)),
                do_url=admin.url("worker_do"),
                back_url=admin.url("workers"),
            )
            return TemplateResponse(request, "admin/django_zqueue/worker_confirm.html", ctx)
        sent = workerctl.send(worker, op)
    except InvalidArgument as exc:
        messages.error(request, str(exc))
        return back
    audit.worker_order(request.user.pk, op, worker, sent.queues, sent.running)
    messages.success(request, what_happens(op, worker, sent.running))
    return back
