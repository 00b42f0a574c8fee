"""How a run of a job is reported: ``key=value`` log lines on the logger
``django_zqueue.worker``, and Django signals sent so that a failing receiver is logged
and never fails or strands the job.

Used by the worker (:mod:`django_zqueue.worker`) and by the Django Tasks runner
(:mod:`django_zqueue.backend_runner`), so both log on the one logger operators watch.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.dispatch import Signal

log = logging.getLogger("django_zqueue.worker")


def kv(**fields: object) -> str:
    """One log line: ``key=value`` pairs, a string value with spaces JSON-quoted."""
    return " ".join(
        f"{k}={json.dumps(v) if isinstance(v, str) and ' ' in v else v}" for k, v in fields.items()
    )


def send(signal: Signal, **kwargs: Any) -> None:
    """Send a signal; a failing receiver is logged and does not fail or strand the job."""
    for receiver, result in signal.send_robust(**kwargs):
        if isinstance(result, Exception):
            log.error(
                kv(event="signal_receiver_error", receiver=repr(receiver), error=repr(result)),
                exc_info=result,
            )
