"""Settings for the fault suite's worker processes: the testproject's, plus

ZQ_FAULT_LEASE   visibility_timeout of the "fault" queue, seconds (default 300)
ZQ_FAULT_SKEW    seconds added to this process's ``time.time``/``time.time_ns`` (clock skew)
ZQ_FAULT_ASYNC   when set, the ``async def`` demo tasks are registered (app tests.fault.lane),
                 so a worker runs an event-loop lane
ZQ_FAULT_LUA_FUNCTIONS  ``0``: the scripts run as EVALSHA (``LUA_FUNCTIONS`` False)

Every connection is named ``zqfault-<pid>`` so a test can find (and CLIENT KILL) the
connections of one worker process.
"""

from __future__ import annotations

import os
import time

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS as _APPS
from testproject.settings import ZQUEUE as _BASE

if os.environ.get("ZQ_FAULT_ASYNC"):
    INSTALLED_APPS = [*_APPS, "tests.fault.lane"]

_skew = float(os.environ.get("ZQ_FAULT_SKEW", "0") or 0)
if _skew:
    _real_time, _real_time_ns = time.time, time.time_ns
    time.time = lambda: _real_time() + _skew
    time.time_ns = lambda: _real_time_ns() + int(_skew * 1e9)

ZQUEUE = {
    **_BASE,
    "QUEUES": {
        **_BASE["QUEUES"],
        # a queue of its own: no periodic task of the test project fires into it, so
        # every job the suite counts is one it enqueued
        "fault": {
            "visibility_timeout": float(os.environ.get("ZQ_FAULT_LEASE", "300")),
            **(
                {"scan_batch": int(os.environ["ZQ_FAULT_SCAN_BATCH"])}
                if os.environ.get("ZQ_FAULT_SCAN_BATCH")
                else {}
            ),
        },
    },
    "CONNECTION_OPTIONS": {"client_name": f"zqfault-{os.getpid()}"},
    "LUA_FUNCTIONS": os.environ.get("ZQ_FAULT_LUA_FUNCTIONS", "1") != "0",
}
