"""The worker: claim -> run -> ack/nack, with leases, heartbeats and graceful shutdown.

Each of ``concurrency`` threads is a consumer loop. A loop sends the acks of the jobs it
finished and its next claim in one pipelined round trip, and holds at most ``prefetch``
claimed jobs (by default an adaptive number: 1 when the line is short or jobs are slow,
up to 20 short jobs when the line is long). Idle, it blocks on the queues' notify lists
(no sleep-polling), so a new job starts within milliseconds. A heartbeat thread extends
the leases of every held job, enforces task timeouts, registers the worker, and runs the
embedded scanner step.

SIGTERM/SIGINT: stop claiming, give back held-but-unstarted jobs at once, let running
jobs finish within ``grace`` seconds, then give back what still runs, and exit 0. A
second signal gives back everything held and exits at once. SIGKILL loses nothing
either: the leases expire and the jobs run again.

The parts:

- :mod:`.worker`: :class:`Worker`, its threads, start and stop, signals, the scanner step;
- :mod:`.consumer`: one consumer thread: claims, adaptive prefetch, the pipelined flush
  of outcomes with the next claim, the wait for work;
- :mod:`.leases`: the jobs held, and the heartbeat (lease extensions, timeouts,
  hand-backs, releases, the worker's registration);
- :mod:`.runner`: runs one job of a registered task to an
  :class:`~django_zqueue.worker.outcome.Outcome` (Django tasks:
  :mod:`django_zqueue.worker.django_tasks`);
- :mod:`.processes`: :func:`run_processes`, the supervisor of ``--processes N``.
"""

from __future__ import annotations

from ..exceptions import JobCancelled, JobTimeout

# The adaptive-prefetch constants are re-exported for reading; each part reads its own
# module's (change them there, e.g. django_zqueue.worker.consumer.AUTO_HOLD_SECONDS).
from ..tasks.context import JobContext, current_job
from .consumer import AUTO_HOLD_SECONDS, AUTO_PREFETCH_MAX
from .leases import GIVE_BACK_AFTER
from .processes import run_processes
from .worker import Worker

__all__ = [
    "AUTO_HOLD_SECONDS",
    "AUTO_PREFETCH_MAX",
    "GIVE_BACK_AFTER",
    "JobCancelled",
    "JobContext",
    "JobTimeout",
    "Worker",
    "current_job",
    "run_processes",
]
