"""The Prometheus metrics' import path (``from django_zqueue.metrics import metrics_view``,
docs/observability.md). They live in ``django_zqueue.ops.metrics``; this module only
names them."""

from __future__ import annotations

from .ops.metrics import ZQueueCollector, exposition, metrics_response, metrics_view

__all__ = ["ZQueueCollector", "exposition", "metrics_response", "metrics_view"]
