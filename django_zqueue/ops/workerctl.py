"""Orders to one worker, from any host: ``quiet`` (it claims no more jobs, finishes the
running ones and stays idle, registered, until it is stopped) and ``stop`` (it claims no
more, finishes the running ones within its ``--grace`` and exits, as on SIGTERM).

An order is left in Redis (``engine.workers.order``: the ``wctl`` hash of each queue the
worker registered in) and the worker reads it at its heartbeat, within a second
(``ORDERS_EVERY``); it then registers again with its new state, which the admin's
workers page and ``manage.py zqueue_worker_ctl list`` show. Used by both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engine import WORKER_ORDERS
from ..exceptions import InvalidArgument
from ..queue import get_queue
from ..read.stats import WORKER_WITHIN_MS, local_ms
from ..read.workers import WorkerInfo, read_workers

if TYPE_CHECKING:
    from ..queue import Queue


@dataclass(frozen=True, slots=True)
class Sent:
    """An order left for a worker: on which of its queues, and the jobs it held then."""

    worker: WorkerInfo
    order: str
    queues: list[str]
    running: int  # the jobs it held when the order was left


def configured() -> list[Queue]:
    from .. import conf

    return [get_queue(name) for name in conf.get_config().queues]


def find(worker_id: str, queues: Sequence[Queue] | None = None) -> WorkerInfo:
    """The live worker ``worker_id`` of ``queues`` (default: every configured queue);
    ``InvalidArgument`` saying why when it is not registered or its heartbeat stopped."""
    queues = list(queues) if queues is not None else configured()
    reading = read_workers([q.engine for q in queues])
    found = next((w for w in reading.workers if w.id == worker_id), None)
    if found is None:
        known = ", ".join(w.id for w in reading.workers if w.live) or "none"
        raise InvalidArgument(
            f"no worker {worker_id!r} is registered in the queues "
            f"{', '.join(q.name for q in queues)} (live workers: {known})"
        )
    if found.seen_ms < local_ms() - WORKER_WITHIN_MS:
        ago = (local_ms() - found.seen_ms) / 1000
        raise InvalidArgument(
            f"worker {worker_id!r} has not been seen for {ago:.0f} s (its heartbeat stopped: "
            "the process is gone or hung); an order would never be read. Its jobs come back "
            "when their leases expire; its entry is removed after 5 minutes"
        )
    return found


def send(worker_id: str, order: str, queues: Sequence[Queue] | None = None) -> Sent:
    """Leave ``order`` (``quiet`` or ``stop``) for the live worker ``worker_id``
    (``InvalidArgument`` when there is no such worker, it is not live, or the order is
    unknown; nothing is written then)."""
    if order not in WORKER_ORDERS:
        raise InvalidArgument(f"no worker order {order!r}: one of {', '.join(WORKER_ORDERS)}")
    queues = list(queues) if queues is not None else configured()
    worker = find(worker_id, queues)
    mine = [q for q in queues if q.name in worker.queues]
    for q in mine:
        q.engine.workers.order(worker_id, order)
    return Sent(worker, order, [q.name for q in mine], len(worker.jobs))
