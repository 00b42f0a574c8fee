"""OpenTelemetry traces, when ``opentelemetry-api`` is installed (``django_zqueue[otel]``).

Absent, nothing here imports it and every function is a no-op (one flag test). Present, a
``@task`` enqueue opens a PRODUCER span ``send <queue>`` and carries its context with the
job, in the body's envelope (``{"task": ..., "args": ..., "kwargs": ..., "tc":
{"traceparent": ...}}``: W3C trace context, written by the configured propagator); each
run opens a CONSUMER span ``process <queue>`` whose parent is that producer span, so a
run, and every retry of it, is linked to the request that enqueued it. No record or
script changes: the body is carried as it is, so jobs enqueued before an upgrade simply
have no ``tc``.

Attributes follow the OpenTelemetry messaging semantic conventions
(``messaging.system``, ``messaging.operation.type``/``.name``,
``messaging.destination.name`` = the queue, ``messaging.message.id`` = the job's tag,
``messaging.batch.message_count``), plus ``zqueue.*``: the task, the job's rank in line
right after the enqueue (``zqueue.rank``, one ZRANK, only when the span is recorded),
its attempt, the time it waited from enqueue to start (``zqueue.wait_ms``) and how the run
ended. Spans go to whatever tracer provider the project configures (the SDK, an OTLP
exporter...); with none configured, no span is made (one check per enqueue; a worker
checks at most once a second while none is configured, :class:`Switch`).

Logs: ``key=value`` lines of django_zqueue carry ``trace_id=``/``span_id=`` while a span
is active (:mod:`.events`); :class:`TraceContextFilter` adds ``record.trace_id`` and
``record.span_id`` to a project's own handlers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from ..queue import Queue
    from .context import JobContext

#: whether ``opentelemetry-api`` is installed (checked once, without importing it)
ENABLED = importlib.util.find_spec("opentelemetry") is not None and (
    importlib.util.find_spec("opentelemetry.trace") is not None
)
#: the envelope key of a job body that carries the trace context
ENVELOPE_KEY = "tc"
SYSTEM = "django_zqueue"


def prepare() -> None:
    """Import what the spans need now (a worker calls it before its first claim): the
    propagators' import reads entry points, which must not delay a claimed job."""
    if ENABLED:
        from opentelemetry import propagate, trace  # noqa: F401


_api: list[Any] = []  # the opentelemetry.trace module, once imported (no import per job)


def _live() -> bool:
    """Whether a tracer provider is configured (the SDK, say): with the API's default,
    spans record nothing, so none is made and the per-job cost is this one check."""
    if not _api:
        from opentelemetry import trace

        _api.append(trace)
    trace = _api[0]
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def sending() -> bool:
    """Whether an enqueue now gets a producer span (:func:`start_send` makes one)."""
    return ENABLED and _live()


def _tracer() -> Tracer:
    from opentelemetry import trace

    return trace.get_tracer("django_zqueue")


def start_send(queue: str, task: str, count: int) -> Span | None:
    """Open the producer span of an enqueue of ``count`` jobs (None when OTel is absent)."""
    if not ENABLED or not _live():
        return None
    from opentelemetry.trace import SpanKind

    attributes: dict[str, str | int] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": queue,
        "zqueue.task": task,
    }
    if count > 1:
        attributes["messaging.batch.message_count"] = count
    return _tracer().start_span(f"send {queue}", kind=SpanKind.PRODUCER, attributes=attributes)


def inject(span: Span | None, body: dict[str, Any]) -> None:
    """Put the trace context of ``span`` in a job body's envelope (nothing without one)."""
    if span is None:
        return
    from opentelemetry import propagate, trace

    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    if carrier:
        body[ENVELOPE_KEY] = carrier


def end_send(span: Span | None, queue: Queue, tags: Sequence[str], *, deferred: bool) -> None:
    """Close the producer span once the jobs are sent (``deferred``: they will be when the
    transaction commits). With one job sent now and the span recorded: its rank."""
    if span is None:
        return
    if len(tags) == 1:
        span.set_attribute("messaging.message.id", tags[0])
    if deferred:
        span.set_attribute("zqueue.deferred", True)
    elif len(tags) == 1 and span.is_recording():
        with contextlib.suppress(Exception):  # a failed read must not fail the enqueue
            rank = queue.rank(tags[0])
            if rank is not None:
                span.set_attribute("zqueue.rank", rank)
    span.end()


def fail_send(span: Span | None, exc: BaseException) -> None:
    """Close the producer span of an enqueue that raised."""
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    span.end()


@contextlib.contextmanager
def _process(ctx: JobContext) -> Iterator[Span]:
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    msg = ctx.message
    body = msg.body
    carrier = body.get(ENVELOPE_KEY) if isinstance(body, dict) else None
    parent = propagate.extract(carrier) if isinstance(carrier, dict) else None
    attributes: dict[str, str | int] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": msg.queue,
        "messaging.message.id": msg.tag,
        "zqueue.task": ctx.task_name,
        "zqueue.attempt": msg.attempt,
        "zqueue.wait_ms": max(0, int(time.time() * 1000) - msg.enqueued_at_ms),
    }
    with _tracer().start_as_current_span(
        f"process {msg.queue}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()

#: seconds a worker goes by "no tracer provider" before it asks OpenTelemetry again
RECHECK_SECONDS = 1.0


class Switch:
    """Whether a worker's runs get spans, for :func:`process`. While no tracer provider
    is configured, OpenTelemetry is asked again at most every :data:`RECHECK_SECONDS`,
    not for every job (its answer reads ``os.environ``, a few percent of a no-op job's
    cost): a provider configured while the worker runs is used from the next run after
    that. Once one is, every run asks (a recorded span costs far more than the check)."""

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until = -1.0  # monotonic time until which there is no provider

    def live(self, now: float) -> bool:
        """Whether a run starting at ``now`` (monotonic) gets a span."""
        if now < self._until:
            return False
        if ENABLED and _live():
            return True
        self._until = now + RECHECK_SECONDS
        return False


def process(
    ctx: JobContext, switch: Switch | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """The consumer span of one run of a job, current while it runs (a no-op context
    when OTel is absent, or without a tracer provider: asked now, or of ``switch`` at
    the run's start); end it with :func:`ended` before leaving."""
    live = switch.live(ctx.started) if switch is not None else ENABLED and _live()
    return _process(ctx) if live else _NO_SPAN


def ended(
    span: Span | None,
    *,
    error: str | None = None,
    exception: BaseException | None = None,
    retry: bool = False,
) -> None:
    """Record how a run ended on its consumer span: a success, or a failure with its
    ``error`` text (retried, or dead)."""
    if span is None:
        return
    if error is None:
        span.set_attribute("zqueue.outcome", "success")
        return
    from opentelemetry.trace import Status, StatusCode

    if exception is not None:
        span.record_exception(exception)
    span.set_attribute("zqueue.outcome", "retry" if retry else "dead")
    span.set_status(Status(StatusCode.ERROR, error.splitlines()[0][:200] if error else ""))


class TraceContextFilter(logging.Filter):
    """A logging filter that gives every record ``trace_id`` and ``span_id`` (hex; empty
    outside a span), for a handler's format: ``%(trace_id)s``."""

    def filter(self, record: logging.LogRecord) -> bool:
        from ..events import trace_ids

        ids = trace_ids()
        record.trace_id, record.span_id = ids if ids is not None else ("", "")
        return True
