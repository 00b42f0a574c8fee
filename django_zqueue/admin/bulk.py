"""The admin's actions on every job of a tab that matches: Django admin's "Select all N".

Ticking the header checkbox of a page that does not show every job of the tab offers
"Select all N jobs of this tab" (or, with a filter, every job of the tab that matches
it). The action's form then posts ``select_across=1`` with the tab (``state``) and the
filter (``task``, ``error``); the action runs on every such job with
:meth:`Queue.act_on_all <django_zqueue.queue.bulk.Bulk.act_on_all>` (chunks of
``BULK_CHUNK``, each job's script checking that it is still in the state), at most
:data:`MOST_PER_REQUEST` a request. Same URL, method, CSRF check, permission and
``ADMIN_ACTIONS`` switch as the action on selected jobs; a destructive one asks first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.http import QueryDict
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext_lazy

from ..web.humanize import count
from . import actions, filters

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

    from ..queue import Queue

#: most jobs one request acts on (more: the message says so, and the action can be run
#: again to go on)
MOST_PER_REQUEST = 50_000

#: "N had already left <the tab>", by tab
LEFT: dict[str, StrOrPromise] = {
    "dead": ngettext_lazy(
        "%(n)s had already left the dead letters.",
        "%(n)s had already left the dead letters.",
        "num",
    ),
    "ready": ngettext_lazy(
        "%(n)s had already left the line.", "%(n)s had already left the line.", "num"
    ),
    "delayed": ngettext_lazy(
        "%(n)s had already left the delayed jobs.",
        "%(n)s had already left the delayed jobs.",
        "num",
    ),
    "waiting": ngettext_lazy(
        "%(n)s had already stopped waiting for its parents.",
        "%(n)s had already stopped waiting for their parents.",
        "num",
    ),
    "leased": ngettext_lazy("%(n)s had already finished.", "%(n)s had already finished.", "num"),
}
REFUSED = ngettext_lazy(
    "%(n)s was left as it was: its record cannot be used (see its error).",
    "%(n)s were left as they were: their records cannot be used (see their errors).",
    "num",
)
MORE = gettext_lazy(
    "More jobs match than one request acts on (%(most)s): run the action again to go on."
)
#: a filtered confirmation counts the matches for at most this long (seconds) ...
COUNT_BUDGET_S = 1.0
#: ... and reads the tab this many jobs at a time
COUNT_PAGE = 200


@dataclass(frozen=True, slots=True)
class Tally:
    """The jobs of a tab that a filter keeps, counted before an action asks: ``matched``
    among the first ``read`` of the tab's ``total``; ``complete`` when every job was read."""

    matched: int
    read: int
    total: int

    @property
    def complete(self) -> bool:
        return self.read >= self.total


@dataclass(frozen=True, slots=True)
class Across:
    """Every job of tab ``state`` that ``flt`` keeps."""

    state: str
    flt: filters.Filter

    @classmethod
    def of(cls, post: QueryDict, action: actions.Action, payload: bool) -> Across | None:
        """From an action's form; None when the action or the tab does not allow it.
        The error filter applies only with ``payload`` (error text is payload)."""
        state = post.get("state", "")
        if action.bulk is None or state not in action.states:
            return None
        flt = filters.Filter.of(post.get("task"), post.get("error") if payload else None)
        if state != "dead":
            flt = filters.Filter(flt.task, "")
        return cls(state, flt)

    def tally(self, q: Queue, budget_s: float = COUNT_BUDGET_S) -> Tally:
        """Count the jobs the filter keeps, reading the tab in pages of
        :data:`COUNT_PAGE` for about ``budget_s`` seconds (at least one page, at most as
        many pages as one request acts on jobs)."""
        end = time.monotonic() + budget_s
        matched = read = total = 0
        for number in range(1, MOST_PER_REQUEST // COUNT_PAGE + 2):
            listing = q.read.listing(self.state, number, COUNT_PAGE, errors=bool(self.flt.error))
            total = listing.counts[self.state]
            matched += sum(1 for j in listing.jobs if j.record is not None and self.flt.matches(j))
            read += len(listing.jobs)
            if len(listing.jobs) < COUNT_PAGE or time.monotonic() >= end:
                break
        return Tally(matched, read, total)

    def what(self, action: actions.Action, total: int, tally: Tally | None = None) -> str:
        """The jobs, in a question: "all 1,234 dead letters", or with a filter "the 37
        jobs of the tab (of 1,234) whose task contains "x"" (``tally``: the matches
        counted; "at least 37" when it could not read them all)."""
        if not self.flt.active:
            return _("all %(what)s") % {"what": actions.counted(action.what, total)}
        parts = []
        if self.flt.task:
            parts.append(_("whose task contains “%(t)s”") % {"t": self.flt.task})
        if self.flt.error:
            parts.append(_("whose last error contains “%(t)s”") % {"t": self.flt.error})
        which = _(" and ").join(parts)
        if tally is None:
            return _("every job of the tab (of %(n)s) %(which)s") % {
                "n": count(total),
                "which": which,
            }
        if tally.complete:
            text = ngettext_lazy(
                "the %(m)s job of the tab (of %(n)s) %(which)s",
                "the %(m)s jobs of the tab (of %(n)s) %(which)s",
                "num",
            )
            return str(
                text
                % {
                    "num": tally.matched,
                    "m": count(tally.matched),
                    "n": count(tally.total),
                    "which": which,
                }
            )
        text = ngettext_lazy(
            "at least %(m)s job of the tab (of %(n)s) %(which)s (counted in the first %(read)s)",
            "at least %(m)s jobs of the tab (of %(n)s) %(which)s (counted in the first %(read)s)",
            "num",
        )
        return str(
            text
            % {
                "num": tally.matched,
                "m": count(tally.matched),
                "n": count(tally.total),
                "which": which,
                "read": count(tally.read),
            }
        )

    def fields(self) -> list[tuple[str, str]]:
        """The hidden fields that carry it through a confirmation page."""
        out = [("select_across", "1"), ("state", self.state)]
        if self.flt.task:
            out.append(("task", self.flt.task))
        if self.flt.error:
            out.append(("error", self.flt.error))
        return out

    def run(self, q: Queue, action: actions.Action) -> tuple[bool, str, int]:
        """Run ``action`` on every job; (success, the message, the jobs acted on)."""
        assert action.bulk is not None
        match = self.flt.matches if self.flt.active else None
        got = q.act_on_all(action.bulk, self.state, match, most=MOST_PER_REQUEST)
        text = [actions.counted(action.done, got.done)]
        if got.left:
            text.append(actions.counted(LEFT[self.state], got.left))
        if got.refused:
            text.append(actions.counted(REFUSED, got.refused))
        if got.more:
            text.append(str(MORE % {"most": count(MOST_PER_REQUEST)}))
        return bool(got.done) and not got.more, " ".join(text), got.done
