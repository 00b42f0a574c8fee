"""Prometheus metrics of the configured queues (needs the ``prometheus`` extra).

One scrape reads Redis in two pipelined round trips, a fixed number of O(1) or
O(log N) commands per queue (see :func:`django_zqueue.read.overview`): its cost
grows with the number of queues, never with their length.

Three ways to expose them:

- the admin page ``<admin>/django_zqueue/queue/metrics/`` (staff with ``view_queue``);
- :func:`metrics_view`, to mount in a project's URLconf behind its own protection
  (it checks nothing itself)::

      path("metrics/zqueue/", django_zqueue.metrics.metrics_view)

- ``manage.py zqueue_stats --prometheus``, or :class:`ZQueueCollector` registered in a
  registry of the project's own (``REGISTRY.register(ZQueueCollector())``).

Metrics, each labelled ``queue``::

    zqueue_jobs{state="ready|delayed|inflight|dead"}  gauge
    zqueue_lag_seconds          age of the job at the head of the line (0 when empty)
    zqueue_workers              live worker threads serving the queue
    zqueue_paused               1 while the queue is paused (Queue.pause), else 0
    zqueue_jobs_<event>_total   counters: enqueued, claimed, acked, failed, retried,
                                dead, expired, deleted, requeued, released, cancelled,
                                relayed (by the outbox relay), parked and signalled
                                (durable tasks)
    zqueue_run_seconds_total    run time reported by acks
    zqueue_workers_recycled_total  worker processes recycled (--max-jobs-per-child,
                                --max-memory), counted on each one's first queue
    zqueue_scale_ready          jobs claimable now (in line, queue not paused; not
                                delayed, parked, waiting for parents or set aside)
    zqueue_scale_completed_per_second  acked and failed runs a second, last 5 minutes
    zqueue_scale_desired_threads       worker threads that would drain the claimable
                                line within the collector's target_seconds (60 s by
                                default; django_zqueue.read.scale)

and, for a queue with ``fairness="groups"`` only, the biggest groups without their names
(a label per group would grow without bound), labelled ``queue`` and ``rank`` (1..5)::

    zqueue_group_top_ready      ready jobs of the rank-th biggest group
    zqueue_group_top_inflight   jobs in flight of that group
    zqueue_group_top_started    its starts in the last full minute
    zqueue_groups_seen          groups among the jobs read

read over the first 500 ready and 500 leased jobs of each partition
(:func:`django_zqueue.read.group_figures`; docs/fairness.md#watching-groups).

With ``ZQUEUE["OUTBOX"]``, without a label (a count in the database)::

    zqueue_outbox_waiting       jobs of committed transactions not yet published
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse

from .. import conf, read
from ..queue import Queue, get_queue

if TYPE_CHECKING:
    from prometheus_client.core import Metric

COUNTERS = (
    ("enqueued", "Jobs published."),
    ("claimed", "Deliveries: jobs leased by a consumer."),
    ("acked", "Jobs finished (acked)."),
    ("failed", "Failed deliveries (nacks)."),
    ("retried", "Failed deliveries that were retried."),
    ("dead", "Jobs moved to dead letters."),
    ("expired", "Leases that expired and were recovered by scan."),
    ("deleted", "Jobs deleted or cancelled."),
    ("requeued", "Dead letters put back in line."),
    ("released", "Deliveries given back unrun."),
    ("cancelled", "Running jobs cancelled (a waiting job cancelled counts as deleted)."),
    ("jobs_expired", "Jobs not started before their expiry, ended in the state expired."),
    ("relayed", "Jobs published by the outbox relay (enqueued in a transaction, OUTBOX)."),
    ("parked", "Runs parked by a durable sleep or wait (no attempt used)."),
    ("signalled", "Events delivered to jobs (Job.signal, for durable.wait_for)."),
)
#: groups per fair queue in the metrics, and jobs of each state read to find them
TOP_GROUPS = 5
GROUP_SAMPLE = 500
INSTALL_HINT = "Prometheus metrics need prometheus-client: pip install 'django-zqueue[prometheus]'"


def available() -> bool:
    """Whether prometheus-client is installed."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


class ZQueueCollector:
    """A prometheus-client collector of the queues (default: every configured queue,
    looked up at each scrape so settings changes are followed)."""

    def __init__(self, queues: Sequence[Queue] | None = None, target_seconds: float = 60.0) -> None:
        read.scale.check_scale_args(target_seconds, 1)
        self._queues = queues
        self.target_seconds = target_seconds  # of zqueue_scale_desired_threads

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        queues = self._queues
        if queues is None:
            queues = [get_queue(name) for name in conf.get_config().queues]
        figures = read.overview([q.engine for q in queues])
        jobs = GaugeMetricFamily("zqueue_jobs", "Jobs in each state.", labels=["queue", "state"])
        lag = GaugeMetricFamily(
            "zqueue_lag_seconds",
            "Seconds since the job at the head of the line was enqueued (0: none waiting).",
            labels=["queue"],
        )
        workers = GaugeMetricFamily(
            "zqueue_workers", "Live worker threads serving the queue.", labels=["queue"]
        )
        paused = GaugeMetricFamily(
            "zqueue_paused", "1 while the queue is paused, else 0.", labels=["queue"]
        )
        counters = {
            name: CounterMetricFamily(f"zqueue_jobs_{name}", doc, labels=["queue"])
            for name, doc in COUNTERS
        }
        run = CounterMetricFamily(
            "zqueue_run_seconds", "Run time of acked jobs, as reported.", labels=["queue"]
        )
        for f in figures:
            for state, n in (
                ("ready", f.ready),
                ("delayed", f.delayed),
                ("inflight", f.inflight),
                ("dead", f.dead),
            ):
                jobs.add_metric([f.name, state], n)
            lag.add_metric([f.name], f.lag_seconds or 0.0)
            workers.add_metric([f.name], f.workers)
            paused.add_metric([f.name], 1 if f.paused else 0)
            lifetime = f.counters
            for name, family in counters.items():
                family.add_metric([f.name], lifetime.get(name, 0))
            run.add_metric([f.name], lifetime.get("run_ms", 0) / 1000)
        yield jobs
        yield lag
        yield workers
        yield paused
        yield from counters.values()
        yield run
        yield from lifecycle_metrics(figures, self.target_seconds)
        yield from group_metrics([q for q in queues if q.options.fairness == "groups"])
        if conf.get_config().outbox:
            yield outbox_metric()

    def describe(self) -> list[Any]:
        return []  # no Redis read at registration time


def lifecycle_metrics(figures: Sequence[read.QueueFigures], target: float) -> Iterator[Metric]:
    """The autoscaling gauges (django_zqueue.read.scale) and the recycled workers."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    scale = {
        field: GaugeMetricFamily(f"zqueue_scale_{field}", doc, labels=["queue"])
        for field, doc in (
            ("ready", "Jobs claimable now: in line, the queue not paused."),
            ("completed_per_second", "Acked and failed runs a second, last 5 minutes."),
            ("desired_threads", "Worker threads that would drain the line in the target."),
        )
    }
    recycled = CounterMetricFamily(
        "zqueue_workers_recycled",
        "Worker processes recycled past their budget (on their first queue).",
        labels=["queue"],
    )
    for f in figures:
        signal = read.scale.signal_of(f, target)
        for field, family in scale.items():
            family.add_metric([f.name], getattr(signal, field))
        recycled.add_metric([f.name], f.counters.get("recycled", 0))
    yield from scale.values()
    yield recycled


def outbox_metric() -> Metric:
    """Rows of the transactional outbox waiting to be published (a database count)."""
    from prometheus_client.core import GaugeMetricFamily

    from ..tasks import outbox

    waiting = GaugeMetricFamily(
        "zqueue_outbox_waiting",
        "Jobs enqueued in committed transactions not yet published (ZQUEUE['OUTBOX']).",
    )
    waiting.add_metric([], outbox.waiting())
    return waiting


def group_metrics(queues: Sequence[Queue]) -> Iterator[Metric]:
    """The top groups of fair queues, by rank: no group name becomes a label."""
    from prometheus_client.core import GaugeMetricFamily

    labels = ["queue", "rank"]
    families = {
        "ready": GaugeMetricFamily(
            "zqueue_group_top_ready", "Ready jobs of the rank-th biggest group.", labels=labels
        ),
        "inflight": GaugeMetricFamily(
            "zqueue_group_top_inflight", "Jobs in flight of the rank-th group.", labels=labels
        ),
        "started_before": GaugeMetricFamily(
            "zqueue_group_top_started",
            "Starts of the rank-th group in the last full minute.",
            labels=labels,
        ),
    }
    seen = GaugeMetricFamily("zqueue_groups_seen", "Groups among the jobs read.", labels=["queue"])
    for q in queues:
        figures = read.group_figures(q.engine, TOP_GROUPS, GROUP_SAMPLE)
        seen.add_metric([q.name], figures.groups_seen)
        for i, row in enumerate(figures.rows, start=1):
            for field, family in families.items():
                family.add_metric([q.name, str(i)], getattr(row, field))
    if queues:
        yield from families.values()
        yield seen


def exposition(queues: Sequence[Queue] | None = None) -> bytes:
    """The metrics in the Prometheus text format. ``ImportError`` without prometheus-client."""
    try:
        from prometheus_client import CollectorRegistry, generate_latest
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ZQueueCollector(queues))
    return generate_latest(registry)


def metrics_response(queues: Sequence[Queue] | None = None) -> HttpResponse:
    """An ``HttpResponse`` with :func:`exposition`, or 501 without prometheus-client."""
    if not available():
        return HttpResponse(INSTALL_HINT + "\n", status=501, content_type="text/plain")
    from prometheus_client import CONTENT_TYPE_LATEST

    return HttpResponse(exposition(queues), content_type=CONTENT_TYPE_LATEST)


def metrics_view(request: HttpRequest) -> HttpResponse:
    """A plain view of the metrics of every configured queue. It checks no permission:
    mount it behind whatever protects your scrape endpoints."""
    return metrics_response()
