"""How a run of a job is reported: ``key=value`` log lines on the logger
``django_zqueue.worker``, and Django signals sent so that a failing receiver is logged
and never fails or strands the job.

Used by the worker (:mod:`django_zqueue.worker`) and by the Django Tasks runner
(:mod:`django_zqueue.backend_runner`), so both log on the one logger operators watch.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from typing import Any

from django.dispatch import Signal

log = logging.getLogger("django_zqueue.worker")


#: opentelemetry-api installed (checked without importing it; imported at first use)
_OTEL = importlib.util.find_spec("opentelemetry") is not None and (
    importlib.util.find_spec("opentelemetry.trace") is not None
)


def trace_ids() -> tuple[str, str] | None:
    """(trace id, span id) in hex of the active OpenTelemetry span; None without one (or
    without opentelemetry-api)."""
    if not _OTEL:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def kv(**fields: object) -> str:
    """One log line: ``key=value`` pairs, a string value with spaces JSON-quoted; with
    ``trace_id``/``span_id`` while an OpenTelemetry span is active."""
    ids = trace_ids() if _OTEL else None
    if ids is not None:
        fields = {**fields, "trace_id": ids[0], "span_id": ids[1]}
    return " ".join(
        f"{k}={json.dumps(v) if isinstance(v, str) and ' ' in v else v}" for k, v in fields.items()
    )


def send(signal: Signal, **kwargs: Any) -> None:
    """Send a signal; a failing receiver is logged and does not fail or strand the job."""
    if not signal.receivers:  # none connected (the usual case): nothing to do, per job
        return
    for receiver, result in signal.send_robust(**kwargs):
        if isinstance(result, Exception):
            log.error(
                kv(event="signal_receiver_error", receiver=repr(receiver), error=repr(result)),
                exc_info=result,
            )
