"""``ZQUEUE["JOB_LOGS"]``: what a job's log keeps (docs/settings.md, "Job logs").

``LEVEL``: the level from which the ``logging`` records emitted inside a running task are
kept in its job's log (``None``, the default: none are, and no handler is installed);
``current_job().log(text)`` is kept whatever it says. ``MAX_LINES``: the most lines one
job's log holds (the oldest are dropped, and the log says how many); ``MAX_LINE_BYTES``:
the longest line kept (a longer one is cut, with a marker). A job's log therefore holds
at most ``MAX_LINES`` x ``MAX_LINE_BYTES`` bytes of text."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: bounds of ``MAX_LINES`` and ``MAX_LINE_BYTES``
LINES_RANGE = (1, 100_000)
LINE_BYTES_RANGE = (100, 1_048_576)
KEYS = ("LEVEL", "MAX_LINES", "MAX_LINE_BYTES")


@dataclass(frozen=True, slots=True)
class JobLogOptions:
    """``ZQUEUE["JOB_LOGS"]`` parsed: ``level`` None (no capture of ``logging``
    records) or a ``logging`` level number."""

    level: int | None = None
    max_lines: int = 1000
    max_line_bytes: int = 2000


def parse_job_logs(raw: object, add: Callable[[str, str, str], None]) -> JobLogOptions:
    """``raw`` (the setting, or None) checked; each problem goes to ``add(id, msg,
    hint)`` as ``E030``, and the default stands for it."""
    if raw is None:
        return JobLogOptions()
    hint = "For example {'LEVEL': 'INFO', 'MAX_LINES': 1000, 'MAX_LINE_BYTES': 2000}."
    if not isinstance(raw, Mapping):
        add("E030", "ZQUEUE['JOB_LOGS'] must be a dict.", hint)
        return JobLogOptions()
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        add("E030", f"ZQUEUE['JOB_LOGS'] has unknown key(s) {unknown}.", f"Known keys: {KEYS}.")
    level = _level(raw.get("LEVEL"), add, hint)
    lines = _int(raw, "MAX_LINES", 1000, LINES_RANGE, add)
    line_bytes = _int(raw, "MAX_LINE_BYTES", 2000, LINE_BYTES_RANGE, add)
    return JobLogOptions(level, lines, line_bytes)


def _level(value: object, add: Callable[[str, str, str], None], hint: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and isinstance(logging.getLevelName(value.upper()), int):
        return int(logging.getLevelName(value.upper()))
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 100:
        return value
    add(
        "E030",
        f"ZQUEUE['JOB_LOGS']['LEVEL'] must be None, a logging level name or 0..100, not {value!r}.",
        hint,
    )
    return None


def _int(
    raw: Mapping[str, Any],
    key: str,
    default: int,
    bounds: tuple[int, int],
    add: Callable[[str, str, str], None],
) -> int:
    value = raw.get(key, default)
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        add(
            "E030",
            f"ZQUEUE['JOB_LOGS'][{key!r}] must be an int in [{low:,}, {high:,}], not {value!r}.",
            f"Use {default}.",
        )
        return default
    return value
