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

from .humanize import count
from .queue import Queue


@dataclass(frozen=True, slots=True)
class Action:
    """One action on selected jobs."""

    name: str  # in its URL
    label: str  # its button
    states: tuple[str, ...]  # the tabs (job states) where it is offered
    permission: str  # the codename it needs, in this app
    run: Callable[..., bool]  # do it to one job (with the value, if any); False: not there
    done: str  # "N jobs <done>."
    noun: str = "job"  # what a selected job is, in messages
    gone: str = ""  # why a job was not acted on ("": no longer a <noun>)
    confirm: str | None = None  # destructive: this question first ({what}: "3 jobs")
    value: str | None = None  # it takes a number: its label (posted as ``value``)
    value_range: tuple[int, int] = (0, 0)  # the integers it accepts


def _delete_dead(q: Queue, tag: str) -> bool:
    """Delete a dead letter; a job that is not dead is left alone."""
    return q.state(tag) == "dead" and q.delete(tag)


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        Action(
            "requeue",
            "Requeue selected",
            ("dead",),
            "manage_dead_letters",
            Queue.requeue_dead,
            "requeued",
            noun="dead letter",
        ),
        Action(
            "delete",
            "Delete selected",
            ("dead",),
            "manage_dead_letters",
            _delete_dead,
            "deleted",
            noun="dead letter",
            confirm="Delete {what}, with their records and errors? This cannot be undone.",
        ),
        Action(
            "cancel",
            "Cancel selected",
            ("ready", "delayed", "waiting", "leased"),
            "manage_jobs",
            Queue.cancel,
            "cancelled",
            gone="no such job, or it ended already",
            confirm="Cancel {what}? A waiting job is removed (a workflow job's dependents "
            "end dead); a running one is stopped (its worker sees the cancel at its next "
            "heartbeat) and is not retried.",
        ),
        Action(
            "run_now",
            "Run selected now",
            ("ready", "delayed"),
            "manage_jobs",
            Queue.run_now,
            "moved to the front of the line",
            noun="waiting job",
        ),
        Action(
            "priority",
            "Set priority",
            ("ready", "delayed"),
            "manage_jobs",
            Queue.set_priority,
            "given the new priority",
            noun="waiting job",
            value="priority",
            value_range=(-1000, 1000),
        ),
    )
}


def offered(state: str, allowed: Callable[[str], bool]) -> list[Action]:
    """The actions of a tab that a user with ``allowed(codename)`` may run."""
    return [a for a in ACTIONS.values() if state in a.states and allowed(a.permission)]


def plural(n: int, word: str) -> str:
    """``n`` and ``word`` (with an s unless one): ``1,234 jobs``."""
    return f"{count(n)} {word}{'' if n == 1 else 's'}"


def outcome(action: Action, done: int, asked: int) -> list[tuple[bool, str]]:
    """The messages after running ``action`` on ``asked`` jobs (``done`` of them did):
    (success, text) pairs."""
    out = []
    reason = action.gone or f"no longer {action.noun}s"
    if done:
        out.append((True, f"{plural(done, action.noun)} {action.done}."))
    if asked - done:
        out.append((False, f"{plural(asked - done, 'job')} not {action.done}: {reason}."))
    if not asked:
        out.append((False, f"No {action.noun} selected."))
    return out
