"""django_zqueue: a Redis task queue for Django built on sorted sets.

Every waiting job has an exact position in line (rank) and score, read in O(log N).
"""

from __future__ import annotations

from .version import __version__

__all__ = [
    "Batch",
    "BatchProgress",
    "ConfigurationError",
    "CorruptResult",
    "DuplicateJob",
    "InvalidArgument",
    "Job",
    "JobContext",
    "JobEnded",
    "JobInfo",
    "Message",
    "PayloadTooLarge",
    "Queue",
    "QueueFull",
    "QueueUnavailable",
    "RedisFull",
    "ScanResult",
    "SignalRefused",
    "Signature",
    "Task",
    "UnknownQueue",
    "Workflow",
    "ZQueueError",
    "__version__",
    "batch",
    "chain",
    "chord",
    "current_job",
    "get_queue",
    "group",
    "optional",
    "task",
]

# Importing these modules does not touch settings or Redis: safe before django.setup().
from .context import JobContext, current_job
from .exceptions import (
    ConfigurationError,
    CorruptResult,
    DuplicateJob,
    InvalidArgument,
    JobEnded,
    PayloadTooLarge,
    QueueFull,
    QueueUnavailable,
    RedisFull,
    SignalRefused,
    UnknownQueue,
    ZQueueError,
)
from .queue import JobInfo, Message, Queue, ScanResult, get_queue
from .task import Job, Signature, Task, task
from .workflow import Batch, BatchProgress, Workflow, batch, chain, chord, group, optional
