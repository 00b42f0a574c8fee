"""django_zqueue: a Redis task queue for Django built on sorted sets.

Every waiting job has an exact position in line (rank) and score, read in O(log N).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "DuplicateJob",
    "InvalidArgument",
    "JobInfo",
    "Message",
    "PayloadTooLarge",
    "Queue",
    "QueueUnavailable",
    "ScanResult",
    "UnknownQueue",
    "ZQueueError",
    "__version__",
    "get_queue",
]

from .exceptions import (
    ConfigurationError,
    DuplicateJob,
    InvalidArgument,
    PayloadTooLarge,
    QueueUnavailable,
    UnknownQueue,
    ZQueueError,
)

if TYPE_CHECKING:
    from .queue import JobInfo, Message, Queue, ScanResult, get_queue

_LAZY = {"JobInfo", "Message", "Queue", "ScanResult", "get_queue"}


def __getattr__(name: str) -> Any:
    # The queue module imports django.conf.settings users; loading it lazily keeps
    # "import django_zqueue" cheap and safe before settings are configured.
    if name in _LAZY:
        from . import queue

        return getattr(queue, name)
    raise AttributeError(f"module 'django_zqueue' has no attribute {name!r}")
