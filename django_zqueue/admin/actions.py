"""The admin's actions on selected jobs: one table, :data:`ACTIONS`.

Each :class:`Action` names the tabs (job states) where it is offered, the permission it
needs, what it does to one job (a :class:`~django_zqueue.queue.Queue` method), and, when
it destroys something, the question asked on a confirmation page before it runs. The
admin builds its buttons, its URL (``q/<queue>/do/<name>/``, POST only, CSRF-checked)
and its messages from the table, so an action the Queue API gains later is one entry.

Every action also needs ``ZQUEUE["ADMIN_ACTIONS"]`` (the default; 404 when it is False).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy

from ..queue import Queue
from ..web.humanize import count

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


@dataclass(frozen=True, slots=True)
class Action:
    """One action on selected jobs. Its words go through Django's translation: the
    plural pairs are ``ngettext_lazy`` with ``num`` as the number and ``%(n)s`` the
    count as shown (with the locale's thousands separator)."""

    name: str  # in its URL
    label: StrOrPromise  # its button on a list
    short: StrOrPromise  # its button on a job's page (one job)
    states: tuple[str, ...]  # the tabs (job states) where it is offered
    permission: str  # the codename it needs, in this app
    run: Callable[..., bool]  # do it to one job (with the value, if any); False: not there
    done: StrOrPromise  # "%(n)s jobs cancelled." (plural pair)
    not_done: StrOrPromise  # "%(n)s jobs not cancelled: %(why)s." (plural pair)
    what: StrOrPromise  # "%(n)s jobs": the selection, in a question (plural pair)
    nothing: StrOrPromise  # "No job selected."
    gone: StrOrPromise  # why a job was not acted on
    title: StrOrPromise = ""  # destructive: the confirmation page's title, with %(what)s
    confirm: StrOrPromise | None = None  # destructive: this question first, with %(what)s
    value: StrOrPromise | None = None  # it takes a number: its label (posted as ``value``)
    value_range: tuple[int, int] = (0, 0)  # the integers it accepts
    bulk: str | None = None  # its name in Queue.act_on_all: offered on every job that matches


def _delete_dead(q: Queue, tag: str) -> bool:
    """Delete a dead letter; a job that is not dead is left alone."""
    return q.state(tag) == "dead" and q.delete(tag)


def _retry_now(q: Queue, tag: str) -> bool:
    """Requeue a dead letter to the front of the line (claimed next)."""
    return q.requeue_dead(tag, front=True)


_DEAD_LETTERS = ngettext_lazy("%(n)s dead letter", "%(n)s dead letters", "num")
_JOBS = ngettext_lazy("%(n)s job", "%(n)s jobs", "num")
_WAITING_JOBS = ngettext_lazy("%(n)s waiting job", "%(n)s waiting jobs", "num")

ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        Action(
            "requeue",
            _("Requeue selected"),
            _("Requeue"),
            ("dead",),
            "manage_dead_letters",
            Queue.requeue_dead,
            done=ngettext_lazy(
                "%(n)s dead letter requeued.", "%(n)s dead letters requeued.", "num"
            ),
            not_done=ngettext_lazy(
                "%(n)s job not requeued: %(why)s.", "%(n)s jobs not requeued: %(why)s.", "num"
            ),
            what=_DEAD_LETTERS,
            nothing=_("No dead letter selected."),
            gone=_("no longer dead letters"),
            bulk="requeue",
        ),
        Action(
            "retry_now",
            _("Retry selected now"),
            _("Retry now"),
            ("dead",),
            "manage_dead_letters",
            _retry_now,
            done=ngettext_lazy(
                "%(n)s dead letter requeued to the front of the line.",
                "%(n)s dead letters requeued to the front of the line.",
                "num",
            ),
            not_done=ngettext_lazy(
                "%(n)s job not requeued: %(why)s.", "%(n)s jobs not requeued: %(why)s.", "num"
            ),
            what=_DEAD_LETTERS,
            nothing=_("No dead letter selected."),
            gone=_("no longer dead letters"),
            bulk="retry_now",
        ),
        Action(
            "delete",
            _("Delete selected"),
            _("Delete"),
            ("dead",),
            "manage_dead_letters",
            _delete_dead,
            done=ngettext_lazy("%(n)s dead letter deleted.", "%(n)s dead letters deleted.", "num"),
            not_done=ngettext_lazy(
                "%(n)s job not deleted: %(why)s.", "%(n)s jobs not deleted: %(why)s.", "num"
            ),
            what=_DEAD_LETTERS,
            nothing=_("No dead letter selected."),
            gone=_("no longer dead letters"),
            title=_("Delete %(what)s?"),
            confirm=_("Delete %(what)s, with their records and errors? This cannot be undone."),
            bulk="delete",
        ),
        Action(
            "cancel",
            _("Cancel selected"),
            _("Cancel"),
            ("ready", "delayed", "waiting", "leased"),
            "manage_jobs",
            Queue.cancel,
            done=ngettext_lazy("%(n)s job cancelled.", "%(n)s jobs cancelled.", "num"),
            not_done=ngettext_lazy(
                "%(n)s job not cancelled: %(why)s.", "%(n)s jobs not cancelled: %(why)s.", "num"
            ),
            what=_JOBS,
            nothing=_("No job selected."),
            gone=_("no such job, or it ended already"),
            title=_("Cancel %(what)s?"),
            confirm=_(
                "Cancel %(what)s? A waiting job is removed (a workflow job's dependents "
                "end dead); a running one is stopped (its worker sees the cancel at its next "
                "heartbeat) and is not retried."
            ),
            bulk="cancel",
        ),
        Action(
            "run_now",
            _("Run selected now"),
            _("Run now"),
            ("ready", "delayed"),
            "manage_jobs",
            Queue.run_now,
            done=ngettext_lazy(
                "%(n)s waiting job moved to the front of the line.",
                "%(n)s waiting jobs moved to the front of the line.",
                "num",
            ),
            not_done=ngettext_lazy(
                "%(n)s job not moved to the front of the line: %(why)s.",
                "%(n)s jobs not moved to the front of the line: %(why)s.",
                "num",
            ),
            what=_WAITING_JOBS,
            nothing=_("No waiting job selected."),
            gone=_("no longer waiting jobs"),
            bulk="run_now",
        ),
        Action(
            "priority",
            _("Set priority"),
            _("Set priority"),
            ("ready", "delayed"),
            "manage_jobs",
            Queue.set_priority,
            done=ngettext_lazy(
                "%(n)s waiting job given the new priority.",
                "%(n)s waiting jobs given the new priority.",
                "num",
            ),
            not_done=ngettext_lazy(
                "%(n)s job not given the new priority: %(why)s.",
                "%(n)s jobs not given the new priority: %(why)s.",
                "num",
            ),
            what=_WAITING_JOBS,
            nothing=_("No waiting job selected."),
            gone=_("no longer waiting jobs"),
            value=_("priority"),
            value_range=(-1000, 1000),
        ),
    )
}


def offered(state: str, allowed: Callable[[str], bool]) -> list[Action]:
    """The actions of a tab that a user with ``allowed(codename)`` may run."""
    return [a for a in ACTIONS.values() if state in a.states and allowed(a.permission)]


def counted(pair: StrOrPromise, n: int, **more: object) -> str:
    """A plural pair of :class:`Action` (``ngettext_lazy`` keyed on ``num``) for ``n``."""
    return str(pair % {"num": n, "n": count(n), **more})


def outcome(action: Action, done: int, asked: int) -> list[tuple[bool, str]]:
    """The messages after running ``action`` on ``asked`` jobs (``done`` of them did):
    (success, text) pairs."""
    out = []
    if done:
        out.append((True, counted(action.done, done)))
    if asked - done:
        out.append((False, counted(action.not_done, asked - done, why=action.gone)))
    if not asked:
        out.append((False, str(action.nothing)))
    return out
