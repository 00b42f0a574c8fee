"""Django settings for ``python -m bench.scaling``: the test project's settings with the
queues named in ``ZQBENCH_QUEUES`` (comma-separated) besides ``default``, each with
``ZQBENCH_PARTITIONS`` partitions (default 1). The Redis URL and key prefix come from
``ZQUEUE_REDIS_URL`` / ``ZQUEUE_PREFIX`` as usual.
"""

import os

from testproject.settings import *  # noqa: F403
from testproject.settings import ZQUEUE

_names = [n for n in os.environ.get("ZQBENCH_QUEUES", "").split(",") if n]
_partitions = int(os.environ.get("ZQBENCH_PARTITIONS", "1"))
_options = {"partitions": _partitions} if _partitions > 1 else {}
ZQUEUE = {**ZQUEUE, "QUEUES": {**ZQUEUE["QUEUES"], **dict.fromkeys(_names, _options)}}
