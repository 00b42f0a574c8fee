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

Fairness = Literal["fifo", "groups"]
FAIRNESS_MODES: tuple[str, ...] = ("fifo", "groups")
#: longest group key, in UTF-8 bytes (it is stored in every job's record)
MAX_GROUP_BYTES = 200
#: a group's weight lies in [MIN_WEIGHT, MAX_WEIGHT]; a job of weight w costs 1/w
MIN_WEIGHT = 0.001
MAX_WEIGHT = 1000.0
#: the highest virtual time a queue may reach (ZQ_SEQUENCE_EXHAUSTED past it): a weight-1
#: job advances it by 1, so this is 2^50 weight-1 starts; far below 2^53, where a double
#: stops holding every integer
MAX_VTIME = 2**50

Report = Callable[[str, str, str], None]


def group_problem(group: object) -> str | None:
    """Why ``group`` cannot be a job's group key, or None."""
    if not isinstance(group, str) or not group:
        return f"group must be a non-empty string, got {group!r}"
    if len(group.encode("utf-8")) > MAX_GROUP_BYTES:
        return f"group must be at most {MAX_GROUP_BYTES} bytes in UTF-8"
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
    """``fairness`` and ``group_weights`` (E021) into ``kw`` when valid."""
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
