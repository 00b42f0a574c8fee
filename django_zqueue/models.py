"""The app's models: an unmanaged one that gives the app its admin entry and its
permissions (no table), and the transactional outbox's table.

The admin pages (:mod:`django_zqueue.admin`) read Redis; nothing is stored in the
database but the rows of the transactional outbox (:class:`OutboxEntry`, defined in
:mod:`django_zqueue.tasks.outbox`), jobs enqueued in a transaction waiting to be published.

Besides the default ``view_queue`` permission, three finer ones exist:

``view_payload``
    see job arguments (bodies) and error text, which may hold personal data or secrets;
``manage_dead_letters``
    requeue, delete and purge dead letters (POST only, and only while
    ``ZQUEUE["ADMIN_ACTIONS"]`` is on);
``manage_jobs``
    act on waiting jobs: cancel them (the same conditions; see
    :data:`django_zqueue.admin.actions.ACTIONS`).
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from .tasks.outbox import OutboxEntry as OutboxEntry  # the outbox's table (ZQUEUE["OUTBOX"])


class Queue(models.Model):
    """The admin's handle on the configured queues (no rows, no table)."""

    class Meta:
        managed = False
        default_permissions = ("view",)
        permissions = [
            ("view_payload", "Can see job arguments and errors"),
            ("manage_dead_letters", "Can requeue, delete and purge dead letters"),
            ("manage_jobs", "Can act on waiting jobs (cancel them)"),
        ]
        verbose_name = _("queue")
        verbose_name_plural = _("queues")

    def __str__(self) -> str:
        return "queue"
