"""Database connections around a job, as Django checks them around a request.

Django's ``close_old_connections`` closes the connections of this thread that are broken
or past ``CONN_MAX_AGE``. A worker calls it before and after each job, but it costs a
pass over every configured database even when no job of the thread touched one (most
of a no-op job's database time). :func:`tidy` does the same check only while this
thread has a connection open: Django's ``connection_created`` signal tells when one is
opened, and a check that finds none open stops checking until the next one is.
"""

from __future__ import annotations

import threading

from django.db import close_old_connections, connections
from django.db.backends.signals import connection_created

_local = threading.local()


def _opened(sender: object, **kwargs: object) -> None:
    _local.open = True


connection_created.connect(_opened, weak=False, dispatch_uid="django_zqueue.dbconn")


def tidy() -> None:
    """``close_old_connections()`` when this thread may hold a connection (a thread is
    assumed to until its first check finds none)."""
    if not getattr(_local, "open", True):
        return
    close_old_connections()
    if not any(c.connection is not None for c in connections.all(initialized_only=True)):
        _local.open = False
