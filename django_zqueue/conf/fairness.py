"""Tenant fairness: the queue options ``fairness`` and ``group_weights``, and the bounds of a
job's group key (docs/fairness.md).

A queue with ``fairness="groups"`` orders its ready jobs by the virtual start time of
their group (start-time fair queuing), so one ZSET keeps weighted fair order and ``ZRANK``
stays the exact position in line. This module only parses and checks; the scoring lives
in ``lua/_ready_scores.lua`` (mode ``fair``) and ``lua/_fair.lua``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from . import bounds

Fairness = Literal["fifo", "groups"]
FAIRNESS_MODES: tuple[str, ...] = ("fifo", "groups")
#: longest group key, in UTF-8 bytes, and the bounds of a group's weight (bounds.py)
MAX_GROUP_BYTES = bounds.MAX_GROUP_BYTES
MIN_WEIGHT = bounds.MIN_WEIGHT
MAX_WEIGHT = bounds.MAX_WEIGHT
#: the highest virtual time a queue may reach, and the bounds of the per-group limits
#: (bounds.py, the one table: claim_fair.lua and _fair.lua check them too)
MAX_VTIME = bounds.MAX_VTIME
MAX_GROUP_CONCURRENCY = bounds.MAX_GROUP_CONCURRENCY
MAX_GROUP_QPS = bounds.MAX_GROUP_QPS
#: bound of group_max_length (the publish scripts check it too)
MAX_GROUP_LENGTH = bounds.MAX_GROUP_LENGTH

Report = Callable[[str, str, str], None]


def group_problem(group: object) -> str | None:
    """Why ``group`` cannot be a job's group key, or None."""
    if not isinstance(group, str) or not group:
        return f"group must be a non-empty string, got {group!r}"
    if len(group.encode("utf-8")) > MAX_GROUP_BYTES:
        return f"group must be at most {MAX_GROUP_BYTES} bytes in UTF-8"
    if "\0" in group:
        return "group must not contain a NUL character"
    return None


def weight_problem(weight: object) -> str | None:
    if (
        isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or not MIN_WEIGHT <= weight <= MAX_WEIGHT
    ):
        return f"a group weight must be a number in [{MIN_WEIGHT}, {MAX_WEIGHT:g}], got {weight!r}"
    return None


def fairness_options(
    name: str, merged: Mapping[str, Any], kw: dict[str, Any], report: Report
) -> None:
    """``fairness``, ``group_weights``, ``group_concurrency``, ``group_qps`` and
    ``group_max_length`` (E021) into ``kw`` when valid."""
    if "fairness" in merged:
        v = merged["fairness"]
        if v not in FAIRNESS_MODES:
            report(
                "E021",
                f"Queue {name!r}: fairness must be 'fifo' or 'groups', got {v!r}.",
                "'fifo': one line in priority order; 'groups': weighted fair order across "
                "the jobs' group keys (docs/fairness.md).",
            )
        else:
            kw["fairness"] = v
    if "group_weights" in merged:
        weights = merged["group_weights"]
        problem = None
        if not isinstance(weights, Mapping):
            problem = f"group_weights must be a dict, not {type(weights).__name__}"
        else:
            for group, weight in weights.items():
                problem = group_problem(group) or weight_problem(weight)
                if problem:
                    problem = f"group_weights[{group!r}]: {problem}"
                    break
        if problem:
            report(
                "E021",
                f"Queue {name!r}: {problem}.",
                "Map group keys to weights, e.g. {'tenant-1': 2}; groups not listed weigh 1.",
            )
        else:
            kw["group_weights"] = {str(g): float(w) for g, w in weights.items()}
    _limit_options(name, merged, kw, report)
    if kw.get("group_weights") and merged.get("fairness", "fifo") != "groups":
        report(
            "E021",
            f"Queue {name!r}: group_weights has no effect unless fairness is 'groups'.",
            "Set fairness='groups', or remove group_weights.",
        )
        kw.pop("group_weights")
    if kw.get("fairness") == "groups" and merged.get("priority_mode", "strict") != "strict":
        report(
            "E021",
            f"Queue {name!r}: fairness='groups' orders by virtual time and cannot be combined "
            "with priority_mode='aging'.",
            "Remove priority_mode (in a fair queue a priority is a head start in virtual "
            "time, docs/fairness.md), or use fairness='fifo'.",
        )
        kw.pop("fairness")


def _limit_options(
    name: str, merged: Mapping[str, Any], kw: dict[str, Any], report: Report
) -> None:
    """group_concurrency (1..1000 or None), group_qps (> 0 up to 10^6 or None) and
    group_max_length (1..1000 or None): fair queues only, and not with partitions (a
    limit is kept in one hash tag)."""
    for key, top, integer in (
        ("group_concurrency", MAX_GROUP_CONCURRENCY, True),
        ("group_qps", MAX_GROUP_QPS, False),
        ("group_max_length", MAX_GROUP_LENGTH, True),
    ):
        if merged.get(key) is None:
            continue
        v = merged[key]
        good = (isinstance(v, int) if integer else isinstance(v, int | float)) and not isinstance(
            v, bool
        )
        if not good or not 0 < v <= top:
            kind = "an integer in [1, " if integer else "a number in (0, "
            report(
                "E021",
                f"Queue {name!r}: {key} must be {kind}{top}] or None, got {v!r}.",
                "A per-group limit; None (the default) means no limit.",
            )
        elif merged.get("fairness", "fifo") != "groups":
            report(
                "E021",
                f"Queue {name!r}: {key} needs fairness='groups'.",
                "Set fairness='groups', or remove the per-group limit.",
            )
        elif merged.get("partitions", 1) != 1:
            report(
                "E021",
                f"Queue {name!r}: {key} cannot be combined with partitions > 1.",
                "A per-group limit is enforced in one hash tag; use partitions = 1.",
            )
        else:
            kw[key] = v if integer else float(v)
