"""Django settings for ``python -m bench.scaling``: the test project's settings with the
queues named in ``ZQBENCH_QUEUES`` (comma-separated) besides ``default``. The Redis URL
and key prefix come from ``ZQUEUE_REDIS_URL`` / ``ZQUEUE_PREFIX`` as usual.
"""

import os

from testproject.settings import *  # noqa: F403
from testproject.settings import ZQUEUE

_names = [n for n in os.environ.get("ZQBENCH_QUEUES", "").split(",") if n]
ZQUEUE = {**ZQUEUE, "QUEUES": {**ZQUEUE["QUEUES"], **{n: {} for n in _names}}}
